"""Where tracking goes, and what it needs installed.

A TensorBoard target is a folder; an MLflow target a tracking URI, or a folder for MLflow's file
store. A relative folder is relative to a base: the experiment file's folder for what the file
says, the current folder for a command-line option (as with ``store.path`` and ``--store``).
"""

from __future__ import annotations

import re
from pathlib import Path

from mosaic.core.extras import MLFLOW, TENSORBOARD, require

__all__ = ["SINKS", "mlflow_uri", "require_sink", "tensorboard_folder"]

#: Each sink by its key in ``tracking:``: the module it imports, the extra that installs it,
#: and what it is, for messages.
SINKS = {
    "tensorboard": ("tensorboardX", TENSORBOARD, "TensorBoard logging"),
    "mlflow": ("mlflow", MLFLOW, "MLflow logging"),
}

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
#: Tracking URIs MLflow takes without a scheme: not folders.
_NAMED_URIS = frozenset({"databricks"})


def require_sink(kind: str) -> None:
    """Import what the sink ``kind`` (a key of :data:`SINKS`) needs, or raise
    :class:`~mosaic.core.errors.MissingExtra` naming its extra."""
    module, extra, purpose = SINKS[kind]
    require(module, purpose, extra)


def tensorboard_folder(value: str, base: Path) -> Path:
    """The folder ``value`` (``~`` expanded), absolute: a relative one is in ``base``."""
    folder = Path(value).expanduser()
    return (folder if folder.is_absolute() else base / folder).resolve()


def mlflow_uri(value: str, base: Path) -> str:
    """The MLflow tracking URI ``value``, with a local folder made absolute: a plain path or a
    ``file:`` URI with a relative path is taken from ``base`` (``file:///abs/path`` then);
    any other URI (``http://...``, ``databricks``, ``file:///...``) is as written."""
    match = _SCHEME.match(value)
    if value in _NAMED_URIS:
        return value
    if match is None:
        return tensorboard_folder(value, base).as_uri()
    if match.group(1).lower() != "file":
        return value
    rest = value[match.end():]
    if rest.startswith("//"):  # file://host/path or file:///path: absolute already
        return value
    return tensorboard_folder(rest, base).as_uri()
