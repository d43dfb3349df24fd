"""The training loop: the Lightning module, gradient accumulation, sharding, callbacks, divergence
checks, the step timer, and ``run`` (what ``nas train`` and a trial call), which measures what
``trainers.measure`` measures as it trains."""
