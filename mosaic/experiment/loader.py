"""Reading an experiment file: YAML parsing, validation, and errors a user can act on.

:func:`load_experiment` reports every problem it finds at once, one per line, each as
``file:line: key.path: what is wrong; what was expected (hint: what to do)``. The reading, the
positions of keys and the wording of problems are shared with evaluation files
(:mod:`mosaic.core.config_yaml`, :mod:`mosaic.core.config_problems`); what is particular to an
experiment, the results store and the CURVE keys, is checked here.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mosaic.core.config_problems import (
    Loc,
    Position,
    Problem,
    config_error,
    format_location,
    locate,
    validate,
)
from mosaic.core.config_yaml import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    Document,
    FileKind,
    empty_file,
    read_document,
    require_mapping,
)
from mosaic.core.errors import ConfigError, MissingExtra
from mosaic.core.imports import add_user_folder
from mosaic.core.store_path import resolve_store
from mosaic.experiment.paths import PathError, covers, set_value
from mosaic.experiment.schema import MAX_RUNS, Experiment, ExperimentFile, SweepPoint
from mosaic.experiment.sweep import sweep_points
from mosaic.tracking import SINKS, require_sink

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "check_experiment",
    "experiment_from_data",
    "format_location",
    "load_experiment",
    "search_point",
]

# What an Experiment holds beyond the file's keys.
_RESOLVED = {"source", "store_path", "store_url", "curve_keys_dir", "points", "overrides"}

_EXPERIMENT = FileKind(
    "experiment",
    empty_hint="an experiment needs at least uid, environments and agents; see "
    "examples/cartpole_random.yml",
)


def load_experiment(
    path: str | os.PathLike[str],
    *,
    store_override: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Experiment:
    """Read, validate and return the experiment in the YAML file ``path``.

    Validation imports the modules the file names (environments, brains, muscles), so their
    top-level code runs. The results store is ``store_override`` when given (a PostgreSQL URL,
    or a path: a relative one resolves against the current folder, as a command-line path
    does), else the file's ``store.url``, else its ``store.path`` (a relative path resolves
    against the experiment file's folder), else ``<file stem>.sqlite`` next to the experiment
    file; a URL lands in ``store_url``, a file in ``store_path``. ``curve_keys``, a relative
    path too, resolves against the experiment file's folder, and its keys are read and checked
    here.

    ``overrides`` maps key paths (:mod:`mosaic.experiment.paths`: ``seed``,
    ``agents.0.params.learning_rate``) to values that replace what the file holds there, as if
    written in the file; a mapping value replaces the whole mapping at its path. A ``sweep``
    section (:mod:`mosaic.experiment.sweep`) is expanded into :attr:`Experiment.points`, each
    validated as a file of its own; a ``search``'s points are asked for while it runs, and the
    ends of its distributions and each of its choices are validated here instead.

    Raises :class:`~mosaic.core.errors.ConfigError` for a file that is missing, unreadable, larger
    than :data:`MAX_FILE_BYTES`, not YAML text, nested deeper than :data:`MAX_DEPTH` or not a
    valid experiment (with its overrides and every point of its sweep), for a results store
    path that cannot be a SQLite file (an existing file that is not one, or a path under a
    file), for a store URL that is not PostgreSQL or whose driver is not installed (nothing
    is connected to here), and for a ``tracking:`` sink whose extra is not installed. The
    error carries every problem found (``problems``), and ``str()`` of it shows one per line,
    each with the file, the line when known, the key path, what was expected, and a hint where
    one helps. References between sections (unique uids, policy mappings, the tcp host) are
    checked once every key has a valid value.
    """
    shown = os.fspath(path)
    document = read_document(shown, _EXPERIMENT)
    source = Path(shown).expanduser().resolve()
    add_user_folder(source.parent)  # its modules are named beside it
    return _build(shown, document, source, store_override, overrides)


def check_experiment(path: str | os.PathLike[str], *,
                     store_override: str | None = None,
                     overrides: Mapping[str, Any] | None = None) -> Experiment:
    """:func:`load_experiment`, then build every environment once to check what only building
    tells (:func:`mosaic.experiment.probe.probe_environments`): that it builds and takes its
    ``wrappers``, and that mosaic's codec carries its spaces.

    Raises :class:`~mosaic.core.errors.ConfigError` as :func:`load_experiment` does, and with
    every problem the environments show, each at its key path and line.
    """
    from mosaic.experiment.probe import probe_environments  # builds environments: heavy

    shown = os.fspath(path)
    document = read_document(shown, _EXPERIMENT)
    source = Path(shown).expanduser().resolve()
    add_user_folder(source.parent)
    experiment = _build(shown, document, source, store_override, overrides)
    problems = probe_environments(experiment)
    if problems:
        raise config_error(shown, problems, document.positions)
    return experiment


def experiment_from_data(
    data: Mapping[str, Any],
    *,
    source: str | os.PathLike[str] | None = None,
    store_override: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Experiment:
    """Validate and return the experiment held by ``data``: what a file would hold, as Python
    data (mappings, lists, text, numbers, booleans, ``None``).

    ``data`` is read as if it were the file ``source``: relative paths in it resolve against
    that file's folder, and the default store is ``<source stem>.sqlite`` beside it. Without
    ``source`` it is ``<uid>.yml`` in the current folder. ``data`` itself is not changed.
    Otherwise as :func:`load_experiment`, with errors naming ``source``, or ``<experiment data>``
    without one, and no line numbers.
    """
    if source is None:
        uid = data.get("uid") if isinstance(data, Mapping) else None
        plain = isinstance(uid, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", uid)
        name = uid if plain else "experiment"
        shown, resolved = "<experiment data>", Path.cwd() / f"{name}.yml"
    else:
        shown = os.fspath(source)
        resolved = Path(shown).expanduser().resolve()
    if not isinstance(data, Mapping):
        require_mapping(data, shown, _EXPERIMENT)
    if not data:
        raise empty_file(shown, _EXPERIMENT)
    document = Document(copy.deepcopy(dict(data)), {}, [])
    return _build(shown, document, resolved, store_override, overrides)


def _build(shown: str, document: Document, source: Path, store_override: str | None,
           overrides: Mapping[str, Any] | None) -> Experiment:
    """The one way from a document to an :class:`Experiment`: overrides, validation, sweep."""
    problems = list(document.problems)
    positions = document.positions
    data = document.data
    if isinstance(data, Mapping) and "operators" in data and not (
            "agents" in data or "environments" in data):
        raise ConfigError(shown, "", "this is not an experiment file: it has operators but no "
                          "agents/environments",
                          "an evaluation file runs with 'mosaic evaluate'; an experiment file "
                          "has uid, environments and agents")
    changed: dict[Loc, str] = {}
    if data is not None and overrides:
        data, positions, changed, found = _overridden(data, positions, overrides)
        problems.extend(found)
    model: ExperimentFile | None = None
    if data is not None:  # None: the document could not be built (recursive alias)
        model, found = validate(ExperimentFile, data)
        problems.extend(_blamed(problem, changed) for problem in found)
    points: tuple[SweepPoint, ...] = ()
    if model is not None and model.sweep is not None:
        points, found = _points(data, model)
        problems.extend(found)
    if problems:
        raise config_error(shown, problems, positions)
    if model is None:  # pragma: no cover - validate returns a model or problems
        raise ConfigError(shown, "", "validation failed without a reason")

    _, path_line = locate(("store", "path"), positions)
    _, url_line = locate(("store", "url"), positions)
    store = resolve_store(shown, source, store_override, model.store.path, model.store.url,
                          line=path_line, url_line=url_line)
    where = {"store_url": store} if isinstance(store, str) else {"store_path": store}
    curve_keys_dir = _curve_keys_dir(model, source, shown, positions)
    _check_tracking(model, shown, positions)
    _check_search(model, shown, positions)
    fields = {name: getattr(model, name) for name in ExperimentFile.model_fields}
    experiment = Experiment.model_validate({**fields, "source": source, **where,
                                            "curve_keys_dir": curve_keys_dir, "points": points,
                                            "overrides": dict(overrides or {})})
    if experiment.run_count > MAX_RUNS:
        raise ConfigError(shown, "sweep", f"{len(points)} points x {model.runs} runs make "
                          f"{experiment.run_count:,} runs, more than {MAX_RUNS:,}",
                          "sweep fewer values, or lower runs", line=locate(("sweep",),
                                                                           positions)[1])
    return experiment


def _overridden(data: Any, positions: dict[Loc, Position], overrides: Mapping[str, Any]
                ) -> tuple[Any, dict[Loc, Position], dict[Loc, str], list[Problem]]:
    """``data`` with ``overrides`` set, the positions of what the file still says, the key path
    each override set (with the override), and the problems of overrides that set nothing."""
    data = copy.deepcopy(data)
    problems: list[Problem] = []
    changed: dict[Loc, str] = {}
    for path, value in overrides.items():
        if not isinstance(path, str):
            problems.append(Problem((), f"an override's key must be a key path (text), got "
                                    f"{path!r}"))
            continue
        try:
            changed[set_value(data, path, copy.deepcopy(value))] = path
        except PathError as error:
            problems.append(Problem(error.loc, f"override {path!r}: {error.message}", error.hint))
    # Lines of the file would point at what the override replaced.
    kept = {loc: at for loc, at in positions.items()
            if not any(covers(loc_changed, loc) for loc_changed in changed)}
    return data, kept, changed, problems


def _blamed(problem: Problem, changed: Mapping[Loc, str]) -> Problem:
    """``problem``, saying which override it comes from when it lies on an overridden path."""
    for loc, path in changed.items():
        if problem.loc and (covers(loc, problem.loc) or covers(problem.loc, loc)):
            return dataclasses.replace(problem, message=f"{problem.message} (set by the "
                                       f"override {path!r})")
    return problem


def _points(data: Any, model: ExperimentFile) -> tuple[tuple[SweepPoint, ...], list[Problem]]:
    """Each point of the sweep, validated as a file of its own; or the problems of the sweep.

    A problem a point's values cause is reported at the sweep's key path that set them.
    """
    sweep = model.sweep
    if sweep is None:  # pragma: no cover - the caller checks
        return (), []
    base = {key: value for key, value in data.items() if key != "sweep"}
    points: list[SweepPoint] = []
    problems: dict[tuple[Loc, str], Problem] = {}
    for values in sweep_points(sweep, model.seed):
        variant = copy.deepcopy(base)
        at: dict[Loc, str] = {}
        for path, value in values.items():
            try:
                at[set_value(variant, path, copy.deepcopy(value))] = path
            except PathError as error:
                where = sweep.loc_of(path)
                problems.setdefault((where, error.message),
                                    Problem(where, error.message, error.hint))
        if len(at) < len(values):
            continue
        settings, found = validate(ExperimentFile, variant)
        for problem in found:
            swept = next((p for loc, p in at.items() if covers(loc, problem.loc)),
                         next(iter(at.values())))
            shown = format_location(problem.loc)
            where = sweep.loc_of(swept)
            message = f"with {swept} = {values[swept]!r}: {shown}: {problem.message}"
            problems.setdefault((where, f"{shown}: {problem.message}"),
                                Problem(where, message, problem.hint))
        if settings is not None:
            points.append(SweepPoint(params=values, settings=settings))
    if sweep.search is not None:  # its points are asked for as it runs: these were probes
        return (), list(problems.values())
    return tuple(points), list(problems.values())


def search_point(experiment: Experiment, values: Mapping[str, Any]) -> SweepPoint:
    """The point of ``experiment``'s search with ``values`` (key path -> value), validated as
    a file of its own, as every point of a grid is when loaded.

    Raises :class:`~mosaic.core.errors.ConfigError` naming the key path whose value it cannot
    take.
    """
    data = experiment.model_dump(by_alias=True, exclude_unset=True,
                                 exclude={"sweep", *_RESOLVED})
    at: dict[Loc, str] = {}
    try:
        for path, value in values.items():
            at[set_value(data, path, copy.deepcopy(value))] = path
    except PathError as error:
        raise ConfigError(str(experiment.source), format_location(error.loc),
                          error.message, error.hint) from None
    settings, found = validate(ExperimentFile, data)
    if settings is None or found:
        problem = found[0]
        swept = next((p for loc, p in at.items() if covers(loc, problem.loc)), "")
        where = format_location(problem.loc)
        raise ConfigError(str(experiment.source), f"sweep.search.params[{swept!r}]",
                          f"with {swept} = {values.get(swept)!r}: {where}: {problem.message}",
                          problem.hint)
    return SweepPoint(params=dict(values), settings=settings)


def _check_search(model: ExperimentFile, shown: str, positions: dict[Loc, Position]) -> None:
    """Refuse a search without Optuna (naming the extra), or with a sampler or pruner option
    Optuna does not take, before anything runs."""
    search = model.sweep.search if model.sweep is not None else None
    if search is None:
        return
    from mosaic.experiment.search import build_pruner, build_sampler, optuna

    try:
        optuna()
    except MissingExtra as error:
        raise ConfigError(shown, "sweep.search", str(error),
                          line=locate(("sweep", "search"), positions)[1]) from None
    for key, name, build in (
            ("sampler", search.sampler_name,
             lambda: build_sampler(search.sampler_name, search.sampler_options, 0)),
            ("pruner", search.pruner_name,
             lambda: build_pruner(search.pruner_name, search.pruner_options))):
        try:
            build()
        except (TypeError, ValueError) as error:
            loc = ("sweep", "search", key, name)
            raise ConfigError(shown, format_location(loc), f"Optuna's {name} {key} refuses "
                              f"these options: {error}", f"see Optuna's documentation of "
                              f"its {name} {key}", line=locate(loc, positions)[1]) from None


def _check_tracking(model: ExperimentFile, shown: str, positions: dict[Loc, Position]) -> None:
    """Refuse a ``tracking:`` sink whose extra is not installed, naming it, before anything
    runs (its package is imported here: one that is there but does not import is missing)."""
    for kind in SINKS:
        if getattr(model.tracking, kind) is None:
            continue
        try:
            require_sink(kind)
        except MissingExtra as error:
            _, line = locate(("tracking", kind), positions)
            raise ConfigError(shown, f"tracking.{kind}", str(error), line=line) from None


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
