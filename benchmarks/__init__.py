"""Benchmarks, in rooms: ``model/`` (one model's costs on any device), ``gpu/`` (the GPU check)
and ``harness/`` (the training loop, sweeps at scale, the gallery), over the shared timing and
machine helpers here (``common``, ``arms``, ``variant_step_time``, ``machine_speed``) and
``make bench``'s runner (``run_all``)."""
