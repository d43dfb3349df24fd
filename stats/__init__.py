"""Statistics that both ``reports`` and ``search_spaces``/``nas`` read: the report's comparisons
of arms over seeds (``compare``), what a sweep could detect (``power``), and the routing
statistics of depth-mixing weights with the collapse rule (``routing``). Torch-free, importing no
other project package, so any part of the project can reach it."""
