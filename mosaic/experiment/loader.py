"""Reading an experiment file: YAML parsing, validation, and errors a user can act on.

:func:`load_experiment` reports every problem it finds at once, one per line, each as
``file:line: key.path: what is wrong; what was expected (hint: what to do)``. The reading, the
positions of keys and the wording of problems are shared with evaluation files
(:mod:`mosaic.core.config_yaml`, :mod:`mosaic.core.config_problems`); what is particular to an
experiment, the results store and the CURVE keys, is checked here.
"""

from __future__ import annotations

import os
from pathlib import Path

from mosaic.core.config_problems import (
    Loc,
    Position,
    config_error,
    format_location,
    locate,
    validate,
)
from mosaic.core.config_yaml import MAX_DEPTH, MAX_FILE_BYTES, FileKind, read_document
from mosaic.core.errors import ConfigError
from mosaic.core.store_path import resolve_store_path
from mosaic.experiment.schema import Experiment, ExperimentFile

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "format_location", "load_experiment"]

_EXPERIMENT = FileKind(
    "experiment",
    empty_hint="an experiment needs at least uid, environments and agents; see "
    "examples/cartpole_random.yml",
)


def load_experiment(
    path: str | os.PathLike[str], *, store_override: str | None = None
) -> Experiment:
    """Read, validate and return the experiment in the YAML file ``path``.

    Validation imports the modules the file names (environments, brains, muscles), so their
    top-level code runs. The results store is ``store_override`` when given (a relative path
    resolves against the current folder, as a command-line path does), else the file's
    ``store.path`` (a relative path resolves against the experiment file's folder), else
    ``<file stem>.sqlite`` next to the experiment file. ``curve_keys``, a relative path too,
    resolves against the experiment file's folder, and its keys are read and checked here.

    Raises :class:`~mosaic.core.errors.ConfigError` for a file that is missing, unreadable, larger
    than :data:`MAX_FILE_BYTES`, not YAML text, nested deeper than :data:`MAX_DEPTH` or not a
    valid experiment, and for a results store path that cannot be a SQLite file (an existing
    file that is not one, or a path under a file). The error carries every problem found
    (``problems``), and ``str()`` of it shows one per line, each with the file, the line when
    known, the key path, what was expected, and a hint where one helps. References between
    sections (unique uids, policy mappings, the tcp host) are checked once every key has a valid
    value.
    """
    shown = os.fspath(path)
    document = read_document(shown, _EXPERIMENT)
    problems = list(document.problems)
    model: ExperimentFile | None = None
    if document.data is not None:  # None: the document could not be built (recursive alias)
        model, found = validate(ExperimentFile, document.data)
        problems.extend(found)
    if problems:
        raise config_error(shown, problems, document.positions)
    if model is None:  # pragma: no cover - validate returns a model or problems
        raise ConfigError(shown, "", "validation failed without a reason")

    source = Path(shown).expanduser().resolve()
    _, store_line = locate(("store", "path"), document.positions)
    store_path = resolve_store_path(shown, source, store_override, model.store.path,
                                    line=store_line)
    curve_keys_dir = _curve_keys_dir(model, source, shown, document.positions)
    fields = {name: getattr(model, name) for name in ExperimentFile.model_fields}
    return Experiment.model_validate({**fields, "source": source, "store_path": store_path,
                                      "curve_keys_dir": curve_keys_dir})


def _curve_keys_dir(
    model: ExperimentFile, source: Path, shown: str, positions: dict[Loc, Position]
) -> Path | None:
    """The key folder of ``curve_keys``, resolved like ``store.path``, once its keys are read."""
    if model.curve_keys is None:
        return None
    # Imported when needed: the transport package is heavy, and a file check should be quick.
    from mosaic.transport.keys import HOW_TO_GENERATE, KeyFileError, load_keys

    folder = Path(model.curve_keys).expanduser()
    folder = (folder if folder.is_absolute() else source.parent / folder).resolve()
    try:
        load_keys(folder)
    except KeyFileError as error:
        _, line = locate(("curve_keys",), positions)
        raise ConfigError(shown, "curve_keys", f"{error.path}: {error.problem}", HOW_TO_GENERATE,
                          line=line) from None
    return folder
