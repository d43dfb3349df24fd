"""Measurement of a model, below the training loop that calls it: dilution diagnostics and their
plots, the coord check, the memory plan and its fit, and the device and decode cost models. The
torch-free ``coordcheck_table`` is read by the reports; importing this package loads nothing."""
