"""One sweep trial, whatever hosts it: its run (``run``), the host that carries its reports
(a Ray Tune worker or this process), its checkpoints, the Lightning hooks that log and report, and
its data-parallel and sharded forms over Ray Train workers."""
