"""What a sweep runs, decided from its space and its record: the campaign kinds (a grid, a tuned
grid, a search), ``--seeds auto``, the Optuna searcher warm-started from the record, and the check
that a re-run's plan extends the record rather than changing what it means."""
