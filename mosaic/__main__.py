"""``python -m mosaic`` is the ``mosaic`` command."""

from mosaic.core.imports import user_folder_last

# Before anything else is imported: ``-m`` put the current folder first, where a numpy.py of
# the user's would shadow NumPy.
user_folder_last()

from mosaic.cli import run  # noqa: E402

run()
