"""How one trial trains: the plain-torch model (its layers, and a registry per variant axis),
the data sources, the Lightning module and callbacks, the dilution diagnostics, and ``train``
(``trainers.training.run``), which ``nas train`` and every sweep trial call."""
