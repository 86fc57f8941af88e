"""Reading an evaluation file's YAML with the line and column of every key, flagging repeated keys.

YAML itself keeps only the last of two equal keys, silently; here the repetition is a problem.
"""

from __future__ import annotations

from typing import Any

import yaml

from mosaic.core.errors import ConfigError
from mosaic.operators.evaluation._problems import Loc, Position, Problem


def _walk_nodes(
    node: yaml.Node,
    loc: Loc,
    positions: dict[Loc, Position],
    problems: list[Problem],
    key_line: int | None,
    stack: set[int],
) -> None:
    positions[loc] = Position(key_line, node.start_mark.line + 1, node.start_mark.column + 1)
    if id(node) in stack:  # a recursive alias: stop here
        return
    stack.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(
                    Problem(
                        loc + (key,),
                        f"duplicate key {key!r} (line {line}; first at line {seen[key]})",
                        "remove one of them: YAML keeps only the last, silently",
                        on_key=True,
                    )
                )
                continue
            seen[key] = line
            _walk_nodes(value_node, loc + (key,), positions, problems, line, stack)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk_nodes(item, loc + (index,), positions, problems, None, stack)
    stack.discard(id(node))


def load_yaml(text: str, source: str) -> tuple[Any, dict[Loc, Position], list[Problem]]:
    """Parse ``text``: its data, each key path's position, and a problem per repeated key.

    Raises ConfigError (naming ``source``, with line and column) for invalid YAML.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        positions: dict[Loc, Position] = {}
        problems: list[Problem] = []
        if node is None:
            return None, positions, problems
        _walk_nodes(node, (), positions, problems, None, set())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = exc.problem or str(exc)
        if exc.context:
            what += f" ({exc.context})"
        raise ConfigError(
            source, "", f"YAML syntax error at {where}{what}",
            "check the indentation and quoting there",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, "", f"YAML error: {exc}") from None
    finally:
        loader.dispose()
    return data, positions, problems
