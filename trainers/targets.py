"""What a target position may hold besides a token id: the data sources write it, the loss skips
it. Torch-free, so the data room and the model room share one definition."""

IGNORE = -100  # cross-entropy's default ignore_index: this target carries no loss
