"""What the harness around a model costs and does: the training loop against a bare one, short
trainings of every arm, a sweep's overhead and its scale on SQLite and PostgreSQL, the measured
time plan against the trials, and the gallery of studies (``make results``)."""
