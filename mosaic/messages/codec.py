"""mosaic's wire format: msgpack plus typed extensions, and the message envelope.

:func:`pack` / :func:`unpack` round-trip arbitrary values exactly, types included: ``None``,
``bool``, ``int`` of any size, ``float``, ``str``, ``bytes``, ``list``, ``tuple`` (also nested and
as dict keys), ``dict`` with any hashable keys, NumPy arrays of any dtype and shape, every NumPy
scalar type, and registered :class:`~mosaic.messages.Record` and
:class:`~mosaic.messages.Message` instances nested anywhere. ``bytearray`` and ``memoryview``
are sent as ``bytes``. Anything else raises :class:`~mosaic.core.errors.CodecError`. Pickle is never
used: decoding a frame never runs code named by the frame.

:func:`encode_message` / :func:`decode_message` wrap one message in the envelope
``[PROTOCOL_VERSION, correlation_id, tag, {field: value}]``. Decoding arbitrary bytes raises only
subclasses of :class:`~mosaic.core.errors.CodecError`.

Non-native values use msgpack extension types. Flat values (big ints, plain NumPy arrays and
scalars) are one extension whose payload holds the raw bytes. Containers (tuples, records, object
and structured arrays) are an ordinary msgpack array whose first element is a *head* extension
saying what to rebuild; the list hook rebuilds them bottom-up, so decoding never recurses into a
nested unpack and msgpack's own depth and length limits bound every frame.

The work is done in private modules, one concern each: :mod:`~mosaic.messages._wire` (extension
codes and header layout), :mod:`~mosaic.messages._dtypes` (NumPy dtype descriptions),
:mod:`~mosaic.messages._encode` and :mod:`~mosaic.messages._decode`. This module holds the
public functions and the envelope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mosaic.core.errors import (
    CodecError,
    MalformedFrame,
    ProtocolVersionMismatch,
    UnknownMessageType,
)
from mosaic.messages._base import Message, lookup, schema
from mosaic.messages._decode import decode_frame, from_fields
from mosaic.messages._encode import TypedSpec, encode_value, typed_spec

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "decode_message",
    "encode_message",
    "pack",
    "pack_each",
    "unpack",
]

BytesLike = bytes | bytearray | memoryview
"""What the decoders accept (any object with the buffer protocol works, a ZeroMQ frame too)."""

PROTOCOL_VERSION = 2
"""Envelope version. Frames with another version are refused with ProtocolVersionMismatch."""

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""Frames larger than this are refused with FrameTooLarge before they are parsed."""


def pack(obj: Any) -> bytes:
    """Encode ``obj`` as msgpack bytes that :func:`unpack` turns back into an equal value.

    Types are preserved exactly (see the module docstring). Raises
    :class:`~mosaic.core.errors.CodecError` naming the type of a value that cannot be encoded,
    or when containers nest deeper than msgpack's limit (about 1000 levels). Thread-safe.
    """
    return encode_value(obj)


def pack_each(values: list[Any]) -> bytes:
    """The encodings of ``values`` one after another: ``b"".join(pack(v) for v in values)``,
    made in one call (a digest over many values per step takes them this way).

    Raises :class:`~mosaic.core.errors.CodecError` as :func:`pack` does. Thread-safe.
    """
    count = len(values)
    # msgpack's array header comes first: a fixarray byte, or array16 / array32 with its length.
    return encode_value(values)[1 if count < 16 else 3 if count < 1 << 16 else 5:]


_MESSAGE_SPECS: dict[type, TypedSpec] = {}


def encode_message(message: Message, correlation_id: int = 0) -> bytes:
    """Encode ``message`` in the envelope ``[PROTOCOL_VERSION, correlation_id, tag, fields]``.

    ``correlation_id`` pairs a response with its request: an int in ``[0, 2**64)``. Raises
    :class:`~mosaic.core.errors.CodecError` if ``message`` is not a registered message, the id is
    out of range, or a field holds a value :func:`pack` cannot encode. Thread-safe.
    """
    kind = type(message)
    spec = _MESSAGE_SPECS.get(kind)
    if spec is None:
        if not isinstance(message, Message):
            raise CodecError(f"cannot send {kind.__qualname__}: it is not a mosaic Message")
        spec = _MESSAGE_SPECS[kind] = typed_spec(kind)
    if type(correlation_id) is not int or not 0 <= correlation_id < 1 << 64:
        raise CodecError(f"correlation_id must be an int in [0, 2**64), got {correlation_id!r}")
    tag, _, field_map, _ = spec
    return encode_value([PROTOCOL_VERSION, correlation_id, tag, field_map(message)])


def unpack(data: BytesLike, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Any:
    """Decode bytes made by :func:`pack`.

    Raises :class:`~mosaic.core.errors.FrameTooLarge` if ``data`` is longer than ``max_bytes``
    (before parsing), :class:`~mosaic.core.errors.MalformedFrame` for anything that is not a
    valid encoding, and :class:`~mosaic.core.errors.UnknownMessageType` /
    :class:`~mosaic.core.errors.MessageFieldError` for a nested record this side does not know
    or whose fields do not fit. Nothing else.
    Decoded arrays are writable and own their memory. Thread-safe.
    """
    return decode_frame(data, max_bytes)


def decode_message(
    frame: BytesLike, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> tuple[int, Message]:
    """Decode one envelope made by :func:`encode_message`; return ``(correlation_id, message)``.

    ``frame`` may be any bytes-like object (``bytes``, ``memoryview``, a ZeroMQ frame). Raises
    exactly one of these, and nothing else, whatever the bytes:

    - :class:`~mosaic.core.errors.FrameTooLarge`: longer than ``max_bytes``, checked before parsing;
    - :class:`~mosaic.core.errors.MalformedFrame`: not msgpack, trailing bytes, not an envelope, a
      correlation id outside ``[0, 2**64)``, bad extension payloads;
    - :class:`~mosaic.core.errors.ProtocolVersionMismatch`;
    - :class:`~mosaic.core.errors.UnknownMessageType`: a type tag this side has not registered;
    - :class:`~mosaic.core.errors.MessageFieldError`: missing, unknown or mistyped fields, named in
      the error message.

    Thread-safe.
    """
    envelope = decode_frame(frame, max_bytes)
    # The common case first, in as few tests as it takes: a well-formed envelope of a message
    # type decoded before. Anything else takes the checks below, which name what is wrong.
    if type(envelope) is list and len(envelope) == 4:
        version, correlation_id, tag, fields = envelope
        decode = _MESSAGE_DECODERS.get(tag) if type(tag) is str else None
        if (decode is not None and version == PROTOCOL_VERSION and type(version) is int
                and type(correlation_id) is int and 0 <= correlation_id < 1 << 64
                and type(fields) is dict):
            return correlation_id, decode(fields)
    return _decode_envelope(envelope)


#: Type tag -> the schema decoder of the message class registered under it, for the tags seen.
_MESSAGE_DECODERS: dict[str, Callable[[Any], Any]] = {}


def _decode_envelope(envelope: Any) -> tuple[int, Message]:
    """Check ``envelope`` field by field; raise the error that names its first problem."""
    if type(envelope) is not list or not envelope:
        raise MalformedFrame(
            f"expected an envelope [version, correlation id, type, fields], "
            f"got {type(envelope).__name__}"
        )
    version = envelope[0]
    if type(version) is not int:
        raise MalformedFrame(f"envelope version must be an int, got {type(version).__name__}")
    if version != PROTOCOL_VERSION:
        shown = version if -(10**9) < version < 10**9 else "out of range"  # never str() a huge int
        raise ProtocolVersionMismatch(
            f"frame uses protocol version {shown}, this side speaks {PROTOCOL_VERSION}; "
            "run the same mosaic version on both sides"
        )
    if len(envelope) != 4:
        raise MalformedFrame(f"envelope must have 4 elements, got {len(envelope)}")
    _, correlation_id, tag, fields = envelope
    if type(correlation_id) is not int or type(tag) is not str or type(fields) is not dict:
        raise MalformedFrame(
            "envelope must be [int version, int correlation id, str type, map fields], got "
            f"[int, {type(correlation_id).__name__}, {type(tag).__name__}, "
            f"{type(fields).__name__}]"
        )
    if not 0 <= correlation_id < 1 << 64:
        raise MalformedFrame("envelope correlation id is outside [0, 2**64)")
    cls = lookup(tag)
    if not issubclass(cls, Message):
        raise UnknownMessageType(f"{tag!r} is a record, not a message type")
    message = from_fields(cls, fields)
    # Decoded once: the class is sound, and its tag can take the short way from now on.
    _MESSAGE_DECODERS[tag] = schema(cls).decode
    return correlation_id, message
