"""What to try: search spaces as data. Empty until the sweep issue adds the spaces."""
