"""The ground floor: what a sweep's record is and how a store is reached, shared by the side
that writes it (``nas``, and ``trainers`` for the metric names it logs) and the side that reads
it (``reports``, and the CLI's run lookups).

Here and nowhere else: the schema (statuses, tags, metric and report keys, artifact folders),
redaction of secrets, tracking-URI parsing and store checks, the MLflow client set-up, the
one-line error renderer and the read primitives (a sweep's parents and trials, live or
archived). Imports flow into this package only: it loads neither torch, pandas nor any other
package of the project, and MLflow only inside the functions that talk to a store.
"""
