"""How one trial trains: the plain-torch model with its variant registries, the Lightning module, data sources and the training entry point."""
