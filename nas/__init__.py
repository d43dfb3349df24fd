"""Orchestration: the `nas` command-line interface (sweeps and reports land here too)."""
