"""Reading a config file's YAML safely: bounded in size and depth, with the position of every key.

:func:`read_document` reads an experiment or evaluation file and returns its data, where each key
path starts (for :func:`~mosaic.core.config_problems.config_error`), and the problems YAML itself
hides: a repeated key (YAML keeps only the last, silently) and a recursive alias. What cannot be
read at all (a missing, binary or oversized file, a YAML syntax error, an empty document) raises
:class:`~mosaic.core.errors.ConfigError` at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mosaic.core.config_problems import Loc, Position, Problem, describe_value
from mosaic.core.errors import ConfigError

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "Document",
    "FileKind",
    "empty_file",
    "read_document",
    "require_mapping",
]

#: The largest config file read. Real ones are a few KB; the limit bounds the time of a check,
#: as PyYAML's parser is pure Python: the densest YAML of this size (a value per byte) takes
#: about 2 s.
MAX_FILE_BYTES = 128 * 1024
#: The deepest nesting of lists and mappings accepted, aliases expanded. Real files nest a few
#: levels; the parser, the validators and the JSON encoder recurse once or more per level.
MAX_DEPTH = 50
# Aliases let a small file expand to a huge document; nobody writes a config this large.
_MAX_EXPANDED_NODES = 200_000
_MERGE_TAG = "tag:yaml.org,2002:merge"
_RECURSIVE = "recursive alias: this value contains itself"


@dataclass(frozen=True)
class FileKind:
    """What a kind of config file is called in messages, and how an empty one should start.

    ``name`` is ``"experiment"`` or ``"evaluation"``: messages speak of ``an experiment file``
    and ``an experiment's .yml file``. ``empty_hint`` tells what an empty file lacks.
    """

    name: str
    empty_hint: str

    @property
    def noun(self) -> str:
        """``an <name> file``."""
        return f"{_article(self.name)} {self.name} file"

    @property
    def path_hint(self) -> str:
        """The hint for a path that names no file of this kind."""
        return f"give the path of {_article(self.name)} {self.name}'s .yml file"


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclass
class Document:
    """A parsed file: its ``data`` (``None`` when a recursive alias keeps it from being built),
    the position of each key path, and the problems found on the way (repeated keys, recursive
    aliases)."""

    data: Any
    positions: dict[Loc, Position]
    problems: list[Problem]


def read_document(path: str | os.PathLike[str], kind: FileKind) -> Document:
    """Read and parse the YAML file ``path``: plain data only, never Python objects named by tags.

    Raises :class:`~mosaic.core.errors.ConfigError` (naming ``path`` as given) for a file that is
    missing, a directory, unreadable, larger than :data:`MAX_FILE_BYTES`, not UTF-8 text, not
    valid YAML (with line and column), empty, nested deeper than :data:`MAX_DEPTH`, too large
    once its aliases are expanded, or whose top level is not a mapping.
    """
    shown = os.fspath(path)
    return _parse(_read(Path(shown).expanduser(), shown, kind), shown, kind)


def require_mapping(
    data: Any, source: str, kind: FileKind, line: int | None = None
) -> dict[Any, Any]:
    """``data`` itself when it is a mapping; else raises the ConfigError that says the top level
    of the file ``source`` (at ``line``) must be one."""
    if not isinstance(data, dict):
        raise ConfigError(
            source,
            "",
            f"expected a mapping of keys at the top level, got {describe_value(data)}",
            f"{kind.noun} is made of 'key: value' lines, starting with e.g. 'uid: my-run'",
            line=line,
        )
    return data


def empty_file(source: str, kind: FileKind) -> ConfigError:
    """The error for a file (or data) ``source`` with nothing in it."""
    return ConfigError(source, "", "the file is empty", kind.empty_hint)


# -- reading the bytes -------------------------------------------------------------------------


def _read(source: Path, shown: str, kind: FileKind) -> str:
    if source.is_dir():
        candidates = sorted(p.name for p in source.iterdir() if p.suffix in (".yml", ".yaml"))
        hint = (
            "did you mean " + " or ".join(f"'{source / name}'" for name in candidates[:3]) + "?"
            if candidates
            else kind.path_hint
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
            f"the file is too large: {kind.noun} is at most {MAX_FILE_BYTES // 1024} KiB, {found}",
            f"is this the right file? {kind.noun} is a few KB of YAML",
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        found = f"byte 0x{raw[error.start]:02x} at offset {error.start}"
        raise _not_text(shown, f"expected UTF-8 text, found {found}",
                        "save the file as UTF-8") from None
    if b"\0" in raw:
        raise _not_text(shown, f"found a NUL byte at offset {raw.index(0)}, as in binary data",
                        kind.path_hint)
    return text


def _size(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 1024:.0f} KiB"


def _not_text(shown: str, why: str, hint: str) -> ConfigError:
    return ConfigError(shown, "", f"not a YAML text file: {why}", hint)


# -- parsing the YAML --------------------------------------------------------------------------


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
        # A node already measured is reached again through an alias.
        if node is not None and id(node) not in self._heights:
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


def _parse(text: str, shown: str, kind: FileKind) -> Document:
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise empty_file(shown, kind)
        # A file within MAX_FILE_BYTES holds at most about one value per byte: only aliases
        # take a document past this.
        if _expanded_size(root, {}) > _MAX_EXPANDED_NODES:
            raise ConfigError(shown, "", "the document is too large once its aliases are expanded",
                              f"more than {_MAX_EXPANDED_NODES:,} values; use fewer aliases")
        positions: dict[Loc, Position] = {(): Position(root.start_mark.line + 1, 1, False)}
        problems: list[Problem] = []
        _index(root, (), positions, problems, set(), set())
        if any(problem.message == _RECURSIVE for problem in problems):
            return Document(None, positions, problems)
        data = loader.construct_document(root)
    except _TooDeep as error:
        raise ConfigError(
            shown,
            "",
            f"the document is nested too deeply: more than {MAX_DEPTH} levels of lists and "
            "mappings (aliases included)",
            f"{kind.noun} nests a few levels; check the brackets and the indentation here",
            line=error.mark.line + 1,
            column=error.mark.column + 1,
        ) from None
    except yaml.MarkedYAMLError as error:
        raise _syntax_error(error, shown, kind) from None
    except yaml.YAMLError as error:
        raise ConfigError(shown, "", f"invalid YAML: {error}") from None
    finally:
        loader.dispose()
    require_mapping(data, shown, kind, line=root.start_mark.line + 1)
    return Document(data, positions, problems)


def _syntax_error(error: yaml.MarkedYAMLError, shown: str, kind: FileKind) -> ConfigError:
    mark = error.problem_mark or error.context_mark
    message = f"invalid YAML: {error.problem or error.context}"
    if error.context and error.problem:
        message += f" ({error.context}"
        if error.context_mark is not None and error.context_mark is not mark:
            message += f" started at line {error.context_mark.line + 1}"
        message += ")"
    hint = ""
    if isinstance(error, yaml.constructor.ConstructorError) and "tag" in str(error.problem):
        hint = f"{kind.noun} holds plain data only; remove the '!!' tag"
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    return ConfigError(shown, "", message, hint, line=line, column=column)


def _index(
    node: yaml.Node,
    loc: Loc,
    positions: dict[Loc, Position],
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
                positions[child] = Position(
                    line,
                    key_node.start_mark.column + 1,
                    isinstance(value_node, yaml.ScalarNode),
                )
            _index(value_node, child, positions, problems, open_nodes, done)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*loc, index)
            positions[child] = Position(
                item.start_mark.line + 1,
                item.start_mark.column + 1,
                isinstance(item, yaml.ScalarNode),
            )
            _index(item, child, positions, problems, open_nodes, done)
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
