"""Reading an experiment file: YAML parsing, validation, and errors a user can act on.

:func:`load_experiment` reports every problem it finds at once, one per line, each as
``file:line: key.path: what is wrong; what was expected (hint: what to do)``.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from mosaic.core.errors import ConfigError
from mosaic.experiment.schema import (
    PROBLEMS_ERROR,
    Experiment,
    ExperimentFile,
    Loc,
    Problem,
)
from mosaic.experiment.schema import describe_value as describe

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "format_location", "load_experiment"]

#: The largest experiment file read. Real ones are a few KB; the limit bounds the time of a
#: check, as PyYAML's parser is pure Python: the densest YAML of this size (a value per byte)
#: takes about 2 s.
MAX_FILE_BYTES = 128 * 1024
#: The deepest nesting of lists and mappings accepted, aliases expanded. Real files nest a few
#: levels; the parser, the validators and the JSON encoder recurse once or more per level.
MAX_DEPTH = 50
# Aliases let a small file expand to a huge document; nobody writes an experiment this large.
_MAX_EXPANDED_NODES = 200_000
_SQLITE_HEADER = b"SQLite format 3\x00"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_RECURSIVE = "recursive alias: this value contains itself"
_TYPE_NOUNS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "string_type": "text",
    "bool_type": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}
_BOUNDS = {
    "greater_than_equal": ("ge", ">="),
    "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="),
    "less_than": ("lt", "<"),
}


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
    source = Path(shown).expanduser()
    text = _read(source, shown)
    document = _parse(text, shown)
    problems = list(document.problems)
    model: ExperimentFile | None = None
    if document.data is not None:  # None: the document could not be built (recursive alias)
        try:
            model = ExperimentFile.model_validate(document.data)
        except ValidationError as error:
            for detail in error.errors(include_url=False):
                problems.extend(_translate(detail))
    if problems:
        raise _collect(problems, document, shown)
    if model is None:  # pragma: no cover - model_validate either returns or raises
        raise ConfigError(shown, "", "validation failed without a reason")

    source = source.resolve()
    store_path = _store_path(model, source, store_override, shown, document)
    curve_keys_dir = _curve_keys_dir(model, source, shown, document)
    fields = {name: getattr(model, name) for name in ExperimentFile.model_fields}
    return Experiment.model_validate({**fields, "source": source, "store_path": store_path,
                                      "curve_keys_dir": curve_keys_dir})


def format_location(loc: Loc) -> str:
    """Format a key path as an experiment file's reader sees it: ``agents[1].muscle.class``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def _read(source: Path, shown: str) -> str:
    if source.is_dir():
        candidates = sorted(p.name for p in source.iterdir() if p.suffix in (".yml", ".yaml"))
        hint = (
            "did you mean " + " or ".join(f"'{source / name}'" for name in candidates[:3]) + "?"
            if candidates
            else "give the path of an experiment's .yml file"
        )
        raise ConfigError(shown, "", "is a directory, expected a YAML file", hint)
    try:
        with source.open("rb") as file:
            # A regular file's size is known before reading it; a pipe's only by reading it.
            size = os.fstat(file.fileno()).st_size
            raw = b"" if size > MAX_FILE_BYTES else file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(shown, "", "file not found", f"looked for {source.absolute()}") from None
    except OSError as error:
        raise ConfigError(shown, "", f"cannot read the file: {error.strerror or error}") from None
    if max(size, len(raw)) > MAX_FILE_BYTES:
        found = f"this one is {_size(size)}" if size > MAX_FILE_BYTES else "this one is longer"
        raise ConfigError(
            shown,
            "",
            f"the file is too large: an experiment file is at most {MAX_FILE_BYTES // 1024} KiB, "
            f"{found}",
            "is this the right file? an experiment file is a few KB of YAML",
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        found = f"byte 0x{raw[error.start]:02x} at offset {error.start}"
        raise _not_text(shown, f"expected UTF-8 text, found {found}",
                        "save the file as UTF-8") from None
    if b"\0" in raw:
        raise _not_text(shown, f"found a NUL byte at offset {raw.index(0)}, as in binary data",
                        "give the path of an experiment's .yml file")
    return text


def _size(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 1024:.0f} KiB"


def _not_text(shown: str, why: str, hint: str) -> ConfigError:
    return ConfigError(shown, "", f"not a YAML text file: {why}", hint)


@dataclass(frozen=True)
class _Node:
    line: int
    column: int
    scalar: bool


@dataclass
class _Document:
    data: Any
    nodes: dict[Loc, _Node]
    problems: list[Problem]


class _TooDeep(Exception):
    def __init__(self, mark: yaml.Mark) -> None:
        super().__init__(mark)
        self.mark = mark


class _Loader(yaml.SafeLoader):
    """The safe loader (plain data only, never Python objects named by tags), which stops at a
    document nested deeper than :data:`MAX_DEPTH` before anything walks it recursively.

    The composer recurses once per level, so the depth is counted as it descends; the height of
    each node built is recorded too, since an alias puts a whole node one level further down.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._heights: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self._depth >= MAX_DEPTH:
            raise _TooDeep(self.peek_event().start_mark)  # type: ignore[no-untyped-call]
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None and id(node) not in self._heights:  # else an alias of a node already measured
            if isinstance(node, yaml.MappingNode):
                children = [child for pair in node.value for child in pair]
            else:
                children = node.value if isinstance(node, yaml.SequenceNode) else []
            # A child absent from the table is a recursive alias; _index reports it.
            height = 1 + max((self._heights.get(id(child), 0) for child in children), default=0)
            if height > MAX_DEPTH:
                raise _TooDeep(node.start_mark)
            self._heights[id(node)] = height
        return node


def _parse(text: str, shown: str) -> _Document:
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise ConfigError(
                shown,
                "",
                "the file is empty",
                "an experiment needs at least uid, environments and agents; see "
                "examples/cartpole_random.yml",
            )
        # A file within MAX_FILE_BYTES holds at most about one value per byte: only aliases
        # take a document past this.
        if _expanded_size(root, {}) > _MAX_EXPANDED_NODES:
            raise ConfigError(shown, "", "the document is too large once its aliases are expanded",
                              f"more than {_MAX_EXPANDED_NODES:,} values; use fewer aliases")
        nodes: dict[Loc, _Node] = {(): _Node(root.start_mark.line + 1, 1, False)}
        problems: list[Problem] = []
        _index(root, (), nodes, problems, set(), set())
        if any(problem.message == _RECURSIVE for problem in problems):
            return _Document(None, nodes, problems)
        data = loader.construct_document(root)
    except _TooDeep as error:
        raise ConfigError(
            shown,
            "",
            f"the document is nested too deeply: more than {MAX_DEPTH} levels of lists and "
            "mappings (aliases included)",
            "an experiment file nests a few levels; check the brackets and the indentation here",
            line=error.mark.line + 1,
            column=error.mark.column + 1,
        ) from None
    except yaml.MarkedYAMLError as error:
        raise _syntax_error(error, shown) from None
    except yaml.YAMLError as error:
        raise ConfigError(shown, "", f"invalid YAML: {error}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError(
            shown,
            "",
            f"expected a mapping of keys at the top level, got {describe(data)}",
            "an experiment file is made of 'key: value' lines, starting with e.g. 'uid: my-run'",
            line=root.start_mark.line + 1,
        )
    return _Document(data, nodes, problems)


def _syntax_error(error: yaml.MarkedYAMLError, shown: str) -> ConfigError:
    mark = error.problem_mark or error.context_mark
    message = f"invalid YAML: {error.problem or error.context}"
    if error.context and error.problem:
        message += f" ({error.context}"
        if error.context_mark is not None and error.context_mark is not mark:
            message += f" started at line {error.context_mark.line + 1}"
        message += ")"
    hint = ""
    if isinstance(error, yaml.constructor.ConstructorError) and "tag" in str(error.problem):
        hint = "an experiment file holds plain data only; remove the '!!' tag"
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    return ConfigError(shown, "", message, hint, line=line, column=column)


def _index(
    node: yaml.Node,
    loc: Loc,
    nodes: dict[Loc, _Node],
    problems: list[Problem],
    open_nodes: set[int],
    done: set[int],
) -> None:
    """Record where each key path starts, and find duplicate keys and recursive aliases.

    A node reached again through an alias is not walked again (its key paths get the line of
    the alias), so that the walk stays linear in the size of the file.
    """
    if id(node) in open_nodes:
        problems.append(Problem(loc, _RECURSIVE, "remove the alias"))
        return
    if id(node) in done:
        return
    open_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first_seen: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                _index(value_node, loc, {}, problems, open_nodes, done)
                continue
            child = (*loc, key_node.value)
            line = key_node.start_mark.line + 1
            identity = (key_node.tag, key_node.value)
            if identity in first_seen:
                problems.append(
                    Problem(
                        child,
                        f"duplicate key '{key_node.value}' (first at line {first_seen[identity]})",
                        "YAML would keep only the last one; remove or rename one of them",
                        line=line,
                    )
                )
            else:
                first_seen[identity] = line
                nodes[child] = _Node(
                    line,
                    key_node.start_mark.column + 1,
                    isinstance(value_node, yaml.ScalarNode),
                )
            _index(value_node, child, nodes, problems, open_nodes, done)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*loc, index)
            nodes[child] = _Node(
                item.start_mark.line + 1,
                item.start_mark.column + 1,
                isinstance(item, yaml.ScalarNode),
            )
            _index(item, child, nodes, problems, open_nodes, done)
    open_nodes.discard(id(node))
    done.add(id(node))


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """Count the nodes of the document with aliases expanded (a shared node once per use)."""
    if id(node) in sizes:
        return sizes[id(node)]
    sizes[id(node)] = 1  # a recursive alias counts once here; _index reports it
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(item, sizes) for item in node.value)
    else:
        size = 1
    sizes[id(node)] = min(size, _MAX_EXPANDED_NODES + 1)
    return sizes[id(node)]


def _translate(detail: Any) -> list[Problem]:
    """Turn one pydantic error into problems in plain words (never pydantic's own wording)."""
    kind: str = detail["type"]
    loc: Loc = tuple(detail["loc"])
    value = detail.get("input")
    ctx = detail.get("ctx") or {}
    if kind == PROBLEMS_ERROR:
        return [Problem((*loc, *p.loc), p.message, p.hint) for p in ctx["problems"]]
    if kind == "invalid_key" or loc[-1:] == ("[key]",):
        # pydantic reports a bad mapping key at the key, plus "[key]" for a typed mapping.
        loc = loc[:-1] if loc[-1:] == ("[key]",) else loc
        key = loc[-1] if loc else value
        return [
            Problem(
                (*loc[:-1], str(key)),
                f"expected a text key, got {describe(key)}",
                f"quote the key: '{key}'",
            )
        ]
    field, target = _resolve(loc)
    expected = field.description if field is not None and field.description else None
    if expected is None and _is_model(target):
        expected = getattr(target, "expected", None)

    if kind == "missing":
        return [Problem(loc, f"required key is missing; expected {expected or 'a value'}")]
    if kind == "extra_forbidden":
        return [_unknown_key(loc)]
    if kind in _TYPE_NOUNS:
        return [
            Problem(
                loc,
                f"expected {expected or _TYPE_NOUNS[kind]}, got {describe(value)}",
                _type_hint(kind, value),
            )
        ]
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        wanted = expected or f"a value {sign} {ctx.get(key)}"
        return [Problem(loc, f"expected {wanted}, got {describe(value)}")]
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return [
            Problem(
                loc,
                f"expected {ctx.get('expected', 'one of the allowed values')}, "
                f"got {describe(value)}",
                _choice_hint(value, choices),
            )
        ]
    if kind == "string_pattern_mismatch":
        return [Problem(loc, f"expected {expected or 'another text'}, got {describe(value)}")]
    if kind == "too_short":
        noun = "entry" if isinstance(value, dict) else "item"
        return [
            Problem(
                loc,
                f"expected at least {ctx.get('min_length', 1)} {noun}, got none",
                f"expected {expected}" if expected else "",
            )
        ]
    if kind == "finite_number":
        return [Problem(loc, f"expected a finite number, got {describe(value)}")]
    message = str(detail.get("msg", "invalid value")).replace("Input should be", "expected")
    return [Problem(loc, f"{message}; got {describe(value)}")]


def _unwrap(annotation: Any) -> Any:
    """Strip ``Optional`` and ``Annotated`` from a type annotation."""
    while True:
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is Union or type(annotation).__name__ == "UnionType":
            rest = [arg for arg in args if arg is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        elif hasattr(annotation, "__metadata__"):
            annotation = args[0]
        else:
            return annotation


def _resolve(loc: Loc) -> tuple[FieldInfo | None, Any]:
    """Find the schema field at ``loc`` (``None`` unless it ends on a model's key) and its type."""
    target: Any = ExperimentFile
    field: FieldInfo | None = None
    for part in loc:
        target = _unwrap(target)
        if _is_model(target):
            field = _field(target, part)
            if field is None:
                return None, None
            target = field.annotation
        elif get_origin(target) is list and isinstance(part, int):
            field, target = None, get_args(target)[0]
        elif get_origin(target) is dict:
            field, target = None, get_args(target)[1]
        else:
            return None, None
    return field, _unwrap(target)


def _is_model(target: Any) -> bool:
    return isinstance(target, type) and get_origin(target) is None and issubclass(target, BaseModel)


def _field(model: type[BaseModel], key: str | int) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _unknown_key(loc: Loc) -> Problem:
    key = str(loc[-1])
    _, parent = _resolve(loc[:-1])
    known = _keys(parent) if _is_model(parent) else []
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    listed = f"known keys here: {', '.join(known)}" if known else ""
    hint = f"did you mean '{close[0]}'? {listed}" if close else listed
    return Problem(loc, f"unknown key '{key}'", hint.strip())


def _type_hint(kind: str, value: Any) -> str:
    if kind in ("int_type", "float_type") and isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return f"remove the quotes: {value!r} in quotes is text, not a number"
    if kind == "int_type" and isinstance(value, float):
        return "use a whole number"
    if kind == "string_type" and isinstance(value, bool):
        return "YAML reads yes/no/on/off/true/false as booleans; quote the value to keep it as text"
    if kind == "string_type" and isinstance(value, int | float):
        return f"quote the value to keep it as text: '{value}'"
    if kind == "bool_type" and isinstance(value, str):
        return "write true or false, without quotes"
    if kind == "list_type" and isinstance(value, dict):
        return "start each item of a list with '- '"
    if kind in ("dict_type", "model_type", "model_attributes_type") and isinstance(value, list):
        return "write 'key: value' lines, without a leading '- '"
    return ""


def _choice_hint(value: Any, choices: list[str]) -> str:
    if isinstance(value, bool):
        return "YAML reads yes/no/on/off/true/false as booleans; quote the value to keep it as text"
    if isinstance(value, str):
        close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.5)
        if close:
            return f"did you mean '{close[0]}'?"
    return ""


def _position(loc: Loc, nodes: dict[Loc, _Node]) -> tuple[Loc, int | None]:
    """Return the key path to show for ``loc``, and the line where it is written.

    A value the user wrote in its short form (``muscle: pkg.mod:Class`` rather than a mapping with
    ``class``) is validated as the long form; the error is shown at the key the user wrote.
    """
    while loc and loc not in nodes and loc[:-1] in nodes and nodes[loc[:-1]].scalar:
        loc = loc[:-1]
    probe = loc
    while probe and probe not in nodes:
        probe = probe[:-1]
    line = nodes[probe].line if probe and probe in nodes else None
    return loc, line


def _collect(problems: list[Problem], document: _Document, shown: str) -> ConfigError:
    errors: list[ConfigError] = []
    seen: set[tuple[str, str]] = set()
    placed: list[tuple[int, int, str, int | None, Problem]] = []
    for problem in problems:
        loc, line = _position(problem.loc, document.nodes)
        line = problem.line if problem.line is not None else line
        location = format_location(loc)
        if (location, problem.message) in seen:
            continue
        seen.add((location, problem.message))
        placed.append((line if line is not None else 1 << 30, len(placed), location, line, problem))
    for _, _, location, line, problem in sorted(placed):
        errors.append(ConfigError(shown, location, problem.message, problem.hint, line=line))
    return ConfigError.collect(errors)


def _store_path(
    model: ExperimentFile,
    source: Path,
    override: str | None,
    shown: str,
    document: _Document,
) -> Path:
    if override is not None:
        if "://" in override or not override.strip():
            raise ConfigError(shown, "--store", f"expected a file path, got {describe(override)}")
        store = Path(override).expanduser()
        store = store if store.is_absolute() else Path.cwd() / store
        location: Loc = ()
    elif model.store.path is not None:
        store = Path(model.store.path).expanduser()
        store = store if store.is_absolute() else source.parent / store
        location = ("store", "path")
    else:
        store = source.parent / f"{source.stem}.sqlite"
        location = ()
    store = store.resolve()
    problem = _store_file_problem(store)
    if problem is not None:
        _, line = _position(location, document.nodes)
        raise ConfigError(
            shown,
            format_location(location) or ("--store" if override is not None else "store.path"),
            f"the results store {store} {problem}",
            "name a new file, e.g. results.sqlite, or the SQLite file of earlier runs",
            line=line,
        )
    return store


def _store_file_problem(store: Path) -> str | None:
    """Why the file path ``store`` cannot hold a SQLite database, or None if it can.

    A missing file (created later) or an empty one is fine. Checked here so that the file and
    the key are named, and before ``experiment-start`` starts anything.
    """
    if os.path.isdir(store):
        return "is a directory, expected a file path"
    if os.path.exists(store):
        if not os.path.isfile(store):
            return "is not a regular file, expected a SQLite file"
        try:
            with open(store, "rb") as file:
                header = file.read(len(_SQLITE_HEADER))
        except OSError as error:
            return f"cannot be read: {error.strerror or error}"
        if header and header != _SQLITE_HEADER:
            return "exists and is not a SQLite database"
        return None
    parent = next(p for p in store.parents if os.path.exists(p))
    if not os.path.isdir(parent):
        return f"lies under {parent}, which is a file, not a folder"
    return None


def _curve_keys_dir(
    model: ExperimentFile, source: Path, shown: str, document: _Document
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
        _, line = _position(("curve_keys",), document.nodes)
        raise ConfigError(shown, "curve_keys", f"{error.path}: {error.problem}", HOW_TO_GENERATE,
                          line=line) from None
    return folder
