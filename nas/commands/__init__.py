"""One module per ``nas`` command: its parser and what it runs (``nas.cli`` registers each). Heavy
imports wait inside the command, so that ``nas --help`` stays fast."""
