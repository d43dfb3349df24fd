"""The tracking store: the only MLflow writer (``tracking``), a trial's outbox that survives an
outage, the one judge of a failed write, the first opening of a store, the MLflow server ``nas ui``
starts and what its dashboard shows. Below every other room of the driver but the trial's spec."""
