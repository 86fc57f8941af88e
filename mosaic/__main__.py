"""``python -m mosaic`` is the ``mosaic`` command."""

from mosaic.cli import main

main()
