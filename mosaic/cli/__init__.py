"""The ``mosaic`` command line."""

from mosaic.cli.main import main

__all__ = ["main"]
