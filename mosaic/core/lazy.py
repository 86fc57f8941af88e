"""Names of a package's façade that load their module on first use (PEP 562).

A component process imports ``mosaic`` and a few subpackages; a façade that imported everything
it names would make each of them pay for pydantic, YAML or SQLAlchemy at start-up.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str], public: Sequence[str]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    ``homes`` maps each lazily loaded name to the module that defines it. The first access
    imports that module and keeps the value in the package's namespace, so later accesses cost
    nothing; an unknown name raises :class:`AttributeError` as for any module.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__
