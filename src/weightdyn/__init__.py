"""weightdyn: theory vs simulation of SGD weight dynamics (papers 000 and 002, see docs/)."""

__version__ = "0.1.0"

from weightdyn.io import open_sweep

__all__ = ["__version__", "open_sweep"]
