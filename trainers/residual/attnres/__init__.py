"""The AttnRes family (Kimi Team 2026, arXiv 2603.15031): Full (``full``), Block (``block``) and
Delta (``delta``) AttnRes, and the depth softmax they share: its plain path with the paper's design
switches (``depth_mixing``), its two-phase form (``depth_attention``) and its preallocated buffers
with a hand-written backward (``depth_buffer``)."""
