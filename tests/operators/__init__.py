"""Tests of mosaic's operator layer. Shared fixtures are in conftest.py."""

from __future__ import annotations

import sys

PY = sys.executable


def worker(name: str, *args: str) -> list[str]:
    """The argv of built-in worker ``name``."""
    return [PY, "-m", f"workers.{name}", *args]
