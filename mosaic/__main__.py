"""``python -m mosaic`` is the ``mosaic`` command."""

from mosaic.cli import run

run()
