"""What to try: search spaces as data (built-in named spaces and user YAML files), and the one
function that applies a sampled point to a base configuration. Imports no torch."""

from search_spaces.builtin import BUILTIN
from search_spaces.loader import get_space, load_space
from search_spaces.space import Cell, Skipped, Space, apply_point, grid_cells, partitions

__all__ = [
    "BUILTIN",
    "Cell",
    "Skipped",
    "Space",
    "apply_point",
    "get_space",
    "grid_cells",
    "load_space",
    "partitions",
]
