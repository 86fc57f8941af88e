"""Checks that anyone can run on their own mosaic components.

:func:`check_worker` runs a worker program (built-in or third-party) against the operator
protocol's conformance checks; :func:`assert_conformant` does the same for pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["CheckResult", "ConformanceReport", "assert_conformant", "check_worker"]

if TYPE_CHECKING:
    from mosaic.testing.worker_conformance import (
        CheckResult,
        ConformanceReport,
        assert_conformant,
        check_worker,
    )


def __getattr__(name: str) -> Any:
    # Imported lazily so that `python -m mosaic.testing.worker_conformance` runs the module once.
    if name in __all__:
        from mosaic.testing import worker_conformance

        return getattr(worker_conformance, name)
    raise AttributeError(f"module 'mosaic.testing' has no attribute {name!r}")
