"""What was learned: the MLflow reader, statistics, figures and rendering. Empty until the report issue."""
