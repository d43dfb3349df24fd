"""Fixtures shared by the report tests (the browser's is suite-wide: ``tests/conftest.py``)."""
