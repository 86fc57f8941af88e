"""The ``mosaic`` command line."""

from mosaic.cli.main import main, run

__all__ = ["main", "run"]
