"""The operator worker wire protocol: one JSON object per line, UTF-8, on stdin and stdout.

A driver writes *commands* (``{"cmd": ...}``) to a worker's stdin; the worker writes *replies*
(``{"type": ...}``) to its stdout, one per command, in order. The names and fields are those of
MOSAIC's operator protocol, with four tightenings:

* Exactly one episode-end type, ``episode_end``. It is its own line, written right after the
  ``step`` line of the step that ended the episode, and carries that step's ``id``.
* ``step_index`` is 0-based: the first step of an episode has ``step_index`` 0.
* Any command may carry an ``id`` (a string or an int); the worker echoes it in the reply. A line
  that cannot be parsed gets an ``error`` reply without ``id``.
* Render frames are off unless asked for, and are never nested JSON lists: an RGB frame is a PNG
  (``{"mode": "rgb_png_base64", "png": ..., "width": ..., "height": ...}``), a text frame is
  ``{"mode": "ansi", "text": ...}``.

Commands: ``reset`` (``seed``), ``step``, ``stop``, ``ping``, ``init_agent`` (``player_id``,
optional ``env_name``, ``task``, ``game_name`` (MOSAIC's name for the game), ``settings``),
``select_action`` (``observation``, optional ``legal_actions`` or ``action_mask``,
``player_id``, ``info``). ``info`` is the driver's own context; mosaic's built-in workers accept
it and do not use it.

Replies: ``ready``, ``step``, ``episode_end``, ``agent_ready``, ``action_selected``, ``pong``,
``stopped``, ``error``. Their required fields are in :data:`RESPONSE_FIELDS`; a reply may carry
more fields (for example ``llm``, ``tokens`` and ``llm_error`` from the LLM worker), which are
passed on.

MOSAIC's own workers speak a looser dialect of this protocol (no ids, unsolicited lines, two
episode-end spellings); :mod:`mosaic.operators.dialect` reads and writes it.

Only JSON is ever decoded; nothing on the wire can execute code.
Why one file of this length: it is the whole wire contract, every command and reply with its
field checks, so that the author of a worker in another language reads one module.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mosaic.core.errors import CodecError, MissingExtra
from mosaic.core.extras import IMAGES

__all__ = [
    "CMD_INIT_AGENT",
    "CMD_PING",
    "CMD_RESET",
    "CMD_SELECT_ACTION",
    "CMD_STEP",
    "CMD_STOP",
    "COMMANDS",
    "MAX_LINE_BYTES",
    "RESPONSES",
    "RESPONSE_FIELDS",
    "RESP_ACTION_SELECTED",
    "RESP_AGENT_READY",
    "RESP_EPISODE_END",
    "RESP_ERROR",
    "RESP_PONG",
    "RESP_READY",
    "RESP_STEP",
    "RESP_STOPPED",
    "ProtocolError",
    "UnknownCommand",
    "ansi_payload",
    "decode_object",
    "encode_line",
    "encode_png",
    "legal_from_mask",
    "parse_command",
    "parse_response",
    "require_png",
    "rgb_payload",
    "to_jsonable",
    "validate_response",
]

#: The launcher puts its own pid in this variable of a worker's environment, so that a worker can
#: tell that its parent died before it started.
PARENT_PID_ENV = "MOSAIC_PARENT_PID"

CMD_RESET = "reset"
CMD_STEP = "step"
CMD_STOP = "stop"
CMD_PING = "ping"
CMD_INIT_AGENT = "init_agent"
CMD_SELECT_ACTION = "select_action"
COMMANDS = frozenset(
    {CMD_RESET, CMD_STEP, CMD_STOP, CMD_PING, CMD_INIT_AGENT, CMD_SELECT_ACTION}
)

RESP_READY = "ready"
RESP_STEP = "step"
RESP_EPISODE_END = "episode_end"
RESP_AGENT_READY = "agent_ready"
RESP_ACTION_SELECTED = "action_selected"
RESP_PONG = "pong"
RESP_STOPPED = "stopped"
RESP_ERROR = "error"
RESPONSES = frozenset(
    {
        RESP_READY,
        RESP_STEP,
        RESP_EPISODE_END,
        RESP_AGENT_READY,
        RESP_ACTION_SELECTED,
        RESP_PONG,
        RESP_STOPPED,
        RESP_ERROR,
    }
)

#: Longest line either side accepts. A longer line is a protocol error and is not decoded.
MAX_LINE_BYTES = 16 * 1024 * 1024


class ProtocolError(CodecError):
    """A line is not valid protocol JSON, or a value cannot be put on the wire."""


class UnknownCommand(ProtocolError):
    """A command line is valid JSON but names no known command (``cmd`` holds the name)."""

    def __init__(self, cmd: object) -> None:
        self.cmd = cmd
        super().__init__(
            f"unknown command {cmd!r}; expected one of {', '.join(sorted(COMMANDS))}"
        )


# --- encoding -------------------------------------------------------------------------------------


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"cannot send a NumPy array of dtype {obj.dtype} as JSON")
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot send a {type(obj).__name__} as JSON")


def to_jsonable(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars replaced by lists and Python numbers.

    Raises :class:`ProtocolError` for values JSON cannot hold (bytes, sets, objects).
    """
    try:
        return json.loads(json.dumps(value, default=_default))
    except (TypeError, ValueError) as exc:
        raise ProtocolError(str(exc)) from exc


def encode_line(obj: Mapping[str, Any]) -> bytes:
    """One protocol line: compact UTF-8 JSON of ``obj`` plus ``\\n``.

    NumPy arrays become (nested) lists and NumPy scalars become numbers; tuples become lists.
    Non-finite floats are written as ``NaN``/``Infinity``, which Python's ``json`` reads back.
    Raises :class:`ProtocolError` for a value JSON cannot hold; nothing is ever pickled.
    """
    try:
        text = json.dumps(obj, default=_default, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"cannot encode message: {exc}") from exc
    return text.encode("utf-8") + b"\n"


# --- decoding and validation ----------------------------------------------------------------------


def decode_object(line: bytes | str) -> dict[str, Any]:
    """One line decoded as a JSON object, not yet checked against any message type.

    Raises :class:`ProtocolError` for a line over :data:`MAX_LINE_BYTES`, bad UTF-8, bad JSON
    or JSON that is not an object.
    """
    if isinstance(line, bytes):
        if len(line) > MAX_LINE_BYTES:
            raise ProtocolError(f"line of {len(line)} bytes exceeds {MAX_LINE_BYTES}")
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"line is not UTF-8: {exc}") from exc
    text = line.strip()
    if not text:
        raise ProtocolError("empty line")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_any(value: Any) -> bool:
    return True


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _is_id(value: Any) -> bool:
    return _is_str(value) or _is_int(value)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def accepts(value: Any) -> bool:
        return value is None or check(value)

    return accepts


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_int(v) for v in value)


def _mask_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_int(v) or _is_bool(v) for v in value)


_Spec = dict[str, Callable[[Any], bool]]

#: Required and optional fields of each command.
COMMAND_FIELDS: dict[str, tuple[_Spec, _Spec]] = {
    CMD_RESET: ({}, {"seed": _optional(_is_int)}),
    CMD_STEP: ({}, {}),
    CMD_STOP: ({}, {}),
    CMD_PING: ({}, {}),
    CMD_INIT_AGENT: (
        {"player_id": _is_str},
        {"env_name": _optional(_is_str), "task": _optional(_is_str),
         "game_name": _optional(_is_str), "settings": _optional(_is_dict)},
    ),
    CMD_SELECT_ACTION: (
        {"observation": _is_any},
        {
            "legal_actions": _optional(_int_list),
            "action_mask": _optional(_mask_list),
            "player_id": _optional(_is_str),
            "info": _optional(_is_dict),
        },
    ),
}

#: Required and optional fields of each reply.
RESPONSE_FIELDS: dict[str, tuple[_Spec, _Spec]] = {
    RESP_READY: (
        {"run_id": _is_str, "env_id": _is_str, "seed": _optional(_is_int),
         "observation_shape": _optional(_is_list)},
        {},
    ),
    RESP_STEP: (
        {
            "step_index": _is_int,
            "action": _is_any,
            "reward": _is_number,
            "terminated": _is_bool,
            "truncated": _is_bool,
            "episode_reward": _is_number,
        },
        {"observation": _is_any, "render_payload": _optional(_is_dict)},
    ),
    RESP_EPISODE_END: (
        {"total_reward": _is_number, "episode_length": _is_int, "terminated": _is_bool,
         "truncated": _is_bool},
        {},
    ),
    RESP_AGENT_READY: ({"player_id": _is_str}, {}),
    RESP_ACTION_SELECTED: (
        {"action": _is_any},
        {"player_id": _optional(_is_str), "info": _optional(_is_dict)},
    ),
    RESP_PONG: ({}, {}),
    RESP_STOPPED: ({}, {}),
    RESP_ERROR: ({"message": _is_str}, {}),
}


def _check_fields(obj: dict[str, Any], kind: str, spec: tuple[_Spec, _Spec]) -> None:
    required, optional = spec
    for name, check in required.items():
        if name not in obj:
            raise ProtocolError(f"{kind!r} is missing required field {name!r}")
        if not check(obj[name]):
            raise ProtocolError(f"{kind!r} field {name!r} has a bad value: {obj[name]!r:.80}")
    for name, check in optional.items():
        if name in obj and not check(obj[name]):
            raise ProtocolError(f"{kind!r} field {name!r} has a bad value: {obj[name]!r:.80}")
    if "id" in obj and not _is_id(obj["id"]):
        raise ProtocolError(f"{kind!r} field 'id' must be a string or an int; got {obj['id']!r}")


def parse_command(line: bytes | str) -> dict[str, Any]:
    """Decode and validate one command line; returns the command dict.

    Raises :class:`UnknownCommand` for a valid object with an unknown ``cmd`` and
    :class:`ProtocolError` for anything else that is not a valid command (bad JSON, missing or
    mistyped fields). Unknown extra fields are allowed and ignored.
    """
    obj = decode_object(line)
    cmd = obj.get("cmd")
    if not isinstance(cmd, str):
        raise ProtocolError("a command needs a string field 'cmd'")
    if cmd not in COMMANDS:
        raise UnknownCommand(cmd)
    _check_fields(obj, cmd, COMMAND_FIELDS[cmd])
    if (
        cmd == CMD_SELECT_ACTION
        and obj.get("legal_actions") is not None
        and obj.get("action_mask") is not None
    ):
        raise ProtocolError("'select_action' takes legal_actions or action_mask, not both")
    return obj


def parse_response(line: bytes | str) -> dict[str, Any]:
    """Decode and validate one reply line; returns the reply dict.

    Raises :class:`ProtocolError` for bad JSON, an unknown ``type``, or missing or mistyped
    required fields. ``step_index`` must be >= 0. Extra fields are kept.
    """
    return validate_response(decode_object(line))


def validate_response(obj: dict[str, Any]) -> dict[str, Any]:
    """Check a decoded reply as :func:`parse_response` does; returns ``obj``."""
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("a reply needs a string field 'type'")
    spec = RESPONSE_FIELDS.get(kind)
    if spec is None:
        raise ProtocolError(
            f"unknown reply type {kind!r}; expected one of {', '.join(sorted(RESPONSES))}"
        )
    _check_fields(obj, kind, spec)
    if kind == RESP_STEP and obj["step_index"] < 0:
        raise ProtocolError(f"'step' has a negative step_index {obj['step_index']}")
    return obj


def legal_from_mask(mask: Any) -> list[int]:
    """The indices where ``mask`` is true (a list, tuple or array of bools or 0/1)."""
    return [int(i) for i in np.flatnonzero(np.asarray(mask).reshape(-1))]


# --- render payloads ------------------------------------------------------------------------------


def encode_png(frame: np.ndarray, *, level: int = 1) -> bytes:
    """A PNG file holding ``frame``: (H, W) grey, (H, W, 3) RGB or (H, W, 4) RGBA, 8-bit.

    Non-uint8 frames are clipped to 0..255; zlib ``level`` 1 is fast, 9 small. Encoded by
    Pillow, the ``images`` extra: raises :class:`~mosaic.core.errors.MissingExtra` naming it
    when Pillow is not installed, and ``ValueError`` for another shape.
    """
    array = np.asarray(frame)
    if not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4))):
        raise ValueError(f"cannot encode a frame of shape {array.shape} as PNG")
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    image = _pillow_image().fromarray(np.ascontiguousarray(array))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=level)
    return buffer.getvalue()


def require_png() -> None:
    """Raise :class:`~mosaic.core.errors.MissingExtra` naming the ``images`` extra unless
    :func:`encode_png` can encode (Pillow is installed): for a worker to fail at start rather
    than at its first frame."""
    _pillow_image()


def _pillow_image() -> Any:
    """Pillow's ``Image`` module, imported on the first frame: a worker that sends no image
    frames does not need the extra."""
    try:
        from PIL import Image
    except ImportError as exc:
        raise MissingExtra("Pillow", IMAGES, "a render frame as PNG") from exc
    return Image


def rgb_payload(frame: np.ndarray) -> dict[str, Any]:
    """A ``render_payload`` for an image frame: PNG bytes in base64, with width and height."""
    png = encode_png(frame)
    array = np.asarray(frame)
    return {
        "mode": "rgb_png_base64",
        "png": base64.b64encode(png).decode("ascii"),
        "width": int(array.shape[1]),
        "height": int(array.shape[0]),
    }


def ansi_payload(text: Any) -> dict[str, Any]:
    """A ``render_payload`` for a text frame (a string, or a file-like object with getvalue)."""
    if hasattr(text, "getvalue"):
        text = text.getvalue()
    return {"mode": "ansi", "text": str(text)}
