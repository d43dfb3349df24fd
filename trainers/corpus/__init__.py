"""A user's own corpus, tokenized once by ``nas data prepare``: the shard file format, the
documents a source folder holds, the tokenizer (trained or given) and its bytes per token, and
the manifest that names what was written. Torch-free: the CLI and the sweep planner read it."""
