"""What a sweep's cells cost before anything launches: the memory each cell needs against its
device (``memory``), and the time plan from measurement (``measured_time``, one ``cell_timing``
process per cell)."""
