"""Key paths into an experiment's data, and setting values at them.

A key path names one value of an experiment file: the keys from the top down, joined by dots,
where a whole number indexes a list (``agents.0.params.learning_rate`` is ``learning_rate`` in the
``params`` of the first agent). Overrides (``mosaic.run(file, seed=3)``) and sweeps (the
``sweep:`` section) set values at key paths, as if they were written there in the file; the
file is then validated as a whole, so a key the schema does not know is the file's usual error.

A path may go through mappings the file does not write yet (``store.path`` in a file without
``store:``): they are created. It may not go past the end of a list or through a value that is
not a mapping or list; :func:`set_value` raises :class:`PathError` for those.
"""

from __future__ import annotations

from typing import Any

from mosaic.core.config_problems import Loc, describe_value, format_location

__all__ = ["PathError", "covers", "parse_path", "set_value"]


class PathError(ValueError):
    """A key path that names no place in the data.

    ``loc`` is how far the path got, ``message`` what is wrong there, ``hint`` what to do.
    """

    def __init__(self, loc: Loc, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.hint = hint


def parse_path(path: str) -> tuple[str, ...]:
    """Split ``path`` at its dots; raises :class:`PathError` for an empty path or an empty part."""
    parts = tuple(path.split("."))
    if not path or any(not part for part in parts):
        raise PathError((), f"expected a key path such as 'agents.0.params.gamma', got {path!r}",
                        "join keys with single dots; a whole number picks an item of a list")
    return parts


def set_value(data: dict[str, Any], path: str, value: Any) -> Loc:
    """Set ``value`` at ``path`` in ``data`` (changed in place); return the path as a key path.

    Missing mappings on the way are created. Raises :class:`PathError` for a path that indexes
    a list with anything but a whole number in range, or goes through a value that is neither
    a mapping nor a list.
    """
    parts = parse_path(path)
    node: Any = data
    loc: Loc = ()
    for position, part in enumerate(parts):
        last = position == len(parts) - 1
        if isinstance(node, list):
            index = _index(part, node, loc)
            loc = (*loc, index)
            if last:
                node[index] = value
            else:
                node = _descend(node, index, loc)
        elif isinstance(node, dict):
            loc = (*loc, part)
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        else:
            raise PathError(loc, f"{format_location(loc)} is {describe_value(node)}, which has no "
                            f"key '{part}'", _SHORT_FORM_HINT if isinstance(node, str) else
                            "a key path goes through mappings and lists only")
    return loc


_SHORT_FORM_HINT = ("to set a key inside a value written in its short form, write it as a mapping "
                    "in the file, e.g. muscle: {class: package.module:Class, params: {}}")


def covers(outer: Loc, inner: Loc) -> bool:
    """Whether the key path ``inner`` lies at or below ``outer``."""
    return inner[: len(outer)] == outer


def _index(part: str, items: list[Any], loc: Loc) -> int:
    where = format_location(loc) or "the top level"
    if not part.isdigit():
        raise PathError((*loc, part), f"{where} is a list; expected an item's number, got "
                        f"'{part}'", f"write e.g. {'.'.join(map(str, (*loc, 0)))}")
    index = int(part)
    if index >= len(items):
        raise PathError((*loc, index), f"{where} has {len(items)} item(s), so no item {index}",
                        "items are numbered from 0")
    return index


def _descend(items: list[Any], index: int, loc: Loc) -> Any:
    item = items[index]
    if not isinstance(item, dict | list):
        raise PathError(loc, f"{format_location(loc)} is {describe_value(item)}, which has no keys",
                        _SHORT_FORM_HINT if isinstance(item, str) else "")
    return item
