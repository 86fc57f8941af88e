"""mosaic's wire format: msgpack plus typed extensions, and the message envelope.

:func:`pack` / :func:`unpack` round-trip arbitrary values exactly, types included: ``None``,
``bool``, ``int`` of any size, ``float``, ``str``, ``bytes``, ``list``, ``tuple`` (also nested and
as dict keys), ``dict`` with any hashable keys, NumPy arrays of any dtype and shape, every NumPy
scalar type, and registered :class:`~mosaic.messages.Record` and
:class:`~mosaic.messages.Message` instances nested anywhere. ``bytearray`` and ``memoryview``
are sent as ``bytes``. Anything else raises :class:`~mosaic.errors.CodecError`. Pickle is never
used: decoding a frame never runs code named by the frame.

:func:`encode_message` / :func:`decode_message` wrap one message in the envelope
``[PROTOCOL_VERSION, correlation_id, tag, {field: value}]``. Decoding arbitrary bytes raises only
subclasses of :class:`~mosaic.errors.CodecError`.

Non-native values use msgpack extension types. Flat values (big ints, plain NumPy arrays and
scalars) are one extension whose payload holds the raw bytes. Containers (tuples, records, object
and structured arrays) are an ordinary msgpack array whose first element is a *head* extension
saying what to rebuild; the list hook rebuilds them bottom-up, so decoding never recurses into a
nested unpack and msgpack's own depth and length limits bound every frame.
"""

from __future__ import annotations

import math
import re
import struct
import threading
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Literal, cast

import msgpack  # type: ignore[import-untyped]
import numpy as np

from mosaic.errors import (
    CodecError,
    FrameTooLarge,
    MalformedFrame,
    ProtocolVersionMismatch,
    UnknownMessageType,
)
from mosaic.messages._base import _REGISTRY, _SCHEMAS, Message, _Typed, lookup, schema

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "decode_message",
    "encode_message",
    "pack",
    "unpack",
]

BytesLike = bytes | bytearray | memoryview
"""What the decoders accept (any object with the buffer protocol works, a ZeroMQ frame too)."""

PROTOCOL_VERSION = 1
"""Envelope version. Frames with another version are refused with ProtocolVersionMismatch."""

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""Frames larger than this are refused with FrameTooLarge before they are parsed."""

# Flat extensions: the payload is the whole value.
_EXT_BIGINT = 1  # two's complement, big-endian
_EXT_NDARRAY = 2  # flags, ndim, len(descr), descr, shape (u64 each), raw data
_EXT_SCALAR = 3  # len(descr), descr, raw data
# Head extensions: first element of a msgpack array whose other elements are the content.
_HEAD_TUPLE = 16  # [head, *items]
_HEAD_TYPED = 17  # payload: type tag; [head, {field: value}]
_HEAD_OBJECT_ARRAY = 18  # payload: flags, ndim, shape; [head, *elements in memory order]
_HEAD_STRUCT_ARRAY = 19  # payload: flags, ndim, shape; [head, dtype spec, raw data]
_HEAD_STRUCT_SCALAR = 20  # [head, dtype spec, raw data]
_HEADS = frozenset(
    (_HEAD_TUPLE, _HEAD_TYPED, _HEAD_OBJECT_ARRAY, _HEAD_STRUCT_ARRAY, _HEAD_STRUCT_SCALAR)
)

_TUPLE_HEAD = msgpack.ExtType(_HEAD_TUPLE, b"")
_STRUCT_SCALAR_HEAD = msgpack.ExtType(_HEAD_STRUCT_SCALAR, b"")

# Kinds whose raw bytes are the value: bool, ints, uints, floats, complex, datetime, timedelta,
# unicode, bytes and void. Object ('O') and NumPy's variable-width strings ('T') hold pointers.
_RAW_KINDS = frozenset("biufcmMUSV")
_MAX_NDIM = 64
_SHAPE_STRUCTS = tuple(struct.Struct(f"<{n}Q") for n in range(_MAX_NDIM + 1))
_DTYPE_CACHE_SIZE = 256
# Array headers (dtype, shape, layout) seen before, both ways: the hot loop sends the same few.
_HEADER_CACHE_SIZE = 1024
# A thread keeps its packer; after a frame this large it gets a fresh one so that the grown
# buffer is released.
_PACKER_KEEP_BYTES = 1 << 20
_BIG_ARRAY_BYTES = 1 << 16


# -- encoding ---------------------------------------------------------------------------------

_local = threading.local()


def _new_packer() -> msgpack.Packer:
    # strict_types: tuple, bool-vs-int and float subclasses (np.float64) must reach _default.
    return msgpack.Packer(default=_default, strict_types=True, use_bin_type=True)


def _pack(obj: Any) -> bytes:
    # Take the thread's packer out while it is in use, so that a nested call (a finaliser that
    # sends a message, say) gets its own packer instead of corrupting this one's buffer.
    packer = _local.__dict__.pop("packer", None) or _new_packer()
    try:
        out: bytes = packer.pack(obj)
    except CodecError:
        raise
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise CodecError(f"cannot encode value: {exc}") from exc
    if len(out) <= _PACKER_KEEP_BYTES:
        _local.packer = packer
    return out


def pack(obj: Any) -> bytes:
    """Encode ``obj`` as msgpack bytes that :func:`unpack` turns back into an equal value.

    Types are preserved exactly (see the module docstring). Raises
    :class:`~mosaic.errors.CodecError` naming the type of a value that cannot be encoded, or when
    containers nest deeper than msgpack's limit (about 1000 levels). Thread-safe.
    """
    return _pack(obj)


def _default(obj: Any) -> Any:
    """Packer fallback for every value msgpack does not encode natively (strict types)."""
    kind = type(obj)
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        encoder = _resolve_encoder(kind)
    return encoder(obj)


def _resolve_encoder(kind: type) -> Callable[[Any], Any]:
    if issubclass(kind, np.generic):
        encoder: Callable[[Any], Any] = _encode_scalar
    elif issubclass(kind, _Typed) and _REGISTRY.get(kind.__name__) is kind:
        encoder = _encode_typed
    else:
        raise CodecError(
            f"cannot encode a value of type {kind.__module__}.{kind.__qualname__}; "
            "supported: None, bool, int, float, str, bytes, list, tuple, dict, NumPy arrays "
            "and scalars, and registered mosaic records and messages"
        )
    _ENCODERS[kind] = encoder
    return encoder


def _encode_bigint(value: int) -> msgpack.ExtType:
    # Reached only for ints outside msgpack's 64-bit range.
    size = (value.bit_length() + 8) // 8
    return msgpack.ExtType(_EXT_BIGINT, value.to_bytes(size, "big", signed=True))


def _encode_tuple(value: tuple[Any, ...]) -> list[Any]:
    return [_TUPLE_HEAD, *value]


_HEADERS: dict[tuple[np.dtype[Any], tuple[int, ...], bool], bytes] = {}
# Plain (raw-bytes) dtypes only: a structured or object dtype is never a key.
_DESCR_CACHE: dict[np.dtype[Any], bytes] = {}


def _descr(dtype: np.dtype[Any]) -> bytes:
    """Return the ``dtype.str`` of a plain dtype; raise CodecError for one that holds pointers."""
    descr = _DESCR_CACHE.get(dtype)
    if descr is None:
        if dtype.fields is not None or dtype.kind not in _RAW_KINDS:
            raise CodecError(f"cannot encode NumPy values of dtype {dtype}")
        descr = dtype.str.encode("ascii")
        if len(_DESCR_CACHE) < _DTYPE_CACHE_SIZE:
            _DESCR_CACHE[dtype] = descr
    return descr


def _shape_header(fortran: bool, shape: tuple[int, ...]) -> bytes:
    return bytes((fortran, len(shape))) + _SHAPE_STRUCTS[len(shape)].pack(*shape)


def _ext(code: int, data: bytes) -> msgpack.ExtType:
    # ExtType's own constructor re-validates code and data in Python; ours are valid by
    # construction and this runs for every array on the hot path.
    return tuple.__new__(msgpack.ExtType, (code, data))


def _encode_ndarray(array: np.ndarray[Any, Any]) -> Any:
    dtype = array.dtype
    flags = array.flags
    # Keep Fortran layout; anything else non-contiguous is sent in C order.
    fortran = not flags.c_contiguous and flags.f_contiguous
    key = (dtype, array.shape, fortran)
    header = _HEADERS.get(key)
    if header is None:
        if dtype.fields is not None:
            return _encode_struct_array(array, fortran)
        if dtype.kind == "O":
            return _encode_object_array(array, fortran)
        descr = _descr(dtype)
        ndim = array.ndim
        header = bytes((fortran, ndim, len(descr))) + descr
        header += _SHAPE_STRUCTS[ndim].pack(*array.shape)
        if len(_HEADERS) < _HEADER_CACHE_SIZE:
            _HEADERS[key] = header
    if array.nbytes < _BIG_ARRAY_BYTES:
        return _ext(_EXT_NDARRAY, header + array.tobytes("F" if fortran else "C"))
    # Large array: join a byte view instead of concatenating a copy (one copy fewer).
    flat = array.T if fortran else np.ascontiguousarray(array)
    return _ext(_EXT_NDARRAY, b"".join((header, flat.reshape(-1).view(np.uint8).data)))


def _encode_struct_array(array: np.ndarray[Any, Any], fortran: bool) -> list[Any]:
    if array.dtype.hasobject:
        raise CodecError(f"cannot encode a structured array with object fields ({array.dtype})")
    return [
        _ext(_HEAD_STRUCT_ARRAY, _shape_header(fortran, array.shape)),
        _dtype_spec(array.dtype),
        array.tobytes("F" if fortran else "C"),
    ]


def _encode_object_array(array: np.ndarray[Any, Any], fortran: bool) -> list[Any]:
    elements = array.ravel("F" if fortran else "C").tolist() if array.ndim else [array[()]]
    return [_ext(_HEAD_OBJECT_ARRAY, _shape_header(fortran, array.shape)), *elements]


def _encode_scalar(value: np.generic) -> Any:
    dtype = value.dtype
    if dtype.fields is not None:
        if dtype.hasobject:
            raise CodecError(f"cannot encode a structured scalar with object fields ({dtype})")
        return [_STRUCT_SCALAR_HEAD, _dtype_spec(dtype), value.tobytes()]
    descr = _descr(dtype)
    # An empty np.str_ / np.bytes_ has itemsize 0 yet tobytes() pads it to one character.
    raw = value.tobytes() if dtype.itemsize else b""
    return _ext(_EXT_SCALAR, bytes((len(descr),)) + descr + raw)


def _dtype_spec(dtype: np.dtype[Any]) -> Any:
    """Describe a dtype with packable values: its ``str`` when plain, a dict when structured."""
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return [_dtype_spec(base), list(shape)]
    if dtype.fields is None:
        if dtype.kind not in _RAW_KINDS:
            raise CodecError(f"cannot encode a structured field of dtype {dtype}")
        return dtype.str
    names = list(dtype.names or ())
    formats, offsets, titles = [], [], []
    for name in names:
        field = dtype.fields[name]
        formats.append(_dtype_spec(field[0]))
        offsets.append(field[1])
        titles.append(field[2] if len(field) > 2 else None)
    return {
        "names": names,
        "formats": formats,
        "offsets": offsets,
        "titles": titles,
        "itemsize": dtype.itemsize,
        "aligned": dtype.isalignedstruct,
    }


# Per class: (tag, field names, getter returning the field values as a tuple).
_TypedSpec = tuple[str, tuple[str, ...], Callable[[Any], tuple[Any, ...]], msgpack.ExtType]
_TYPED_SPECS: dict[type, _TypedSpec] = {}


def _typed_spec(kind: type) -> _TypedSpec:
    spec = _TYPED_SPECS.get(kind)
    if spec is not None:
        return spec
    if not (issubclass(kind, _Typed) and _REGISTRY.get(kind.__name__) is kind):
        raise CodecError(f"{kind.__qualname__} is not a registered mosaic message or record")
    try:
        names = schema(kind).names
    except TypeError as exc:
        raise CodecError(str(exc)) from exc
    getter: Callable[[Any], tuple[Any, ...]]
    if not names:
        getter = _no_fields
    elif len(names) == 1:
        getter = _single_field(names[0])
    else:
        getter = attrgetter(*names)
    tag = kind.__name__
    spec = (tag, names, getter, _ext(_HEAD_TYPED, tag.encode("utf-8")))
    _TYPED_SPECS[kind] = spec
    return spec


def _no_fields(obj: Any) -> tuple[Any, ...]:
    return ()


def _single_field(name: str) -> Callable[[Any], tuple[Any, ...]]:
    # attrgetter with one name returns the value itself, not a 1-tuple.
    get = attrgetter(name)

    def getter(obj: Any) -> tuple[Any, ...]:
        return (get(obj),)

    return getter


def _encode_typed(value: Any) -> list[Any]:
    _, names, getter, head = _TYPED_SPECS.get(type(value)) or _typed_spec(type(value))
    return [head, dict(zip(names, getter(value), strict=True))]


_MESSAGE_SPECS: dict[type, _TypedSpec] = {}

_ENCODERS: dict[type, Callable[[Any], Any]] = {
    int: _encode_bigint,
    tuple: _encode_tuple,
    np.ndarray: _encode_ndarray,
}


def encode_message(message: Message, correlation_id: int = 0) -> bytes:
    """Encode ``message`` in the envelope ``[PROTOCOL_VERSION, correlation_id, tag, fields]``.

    ``correlation_id`` pairs a response with its request: an int in ``[0, 2**64)``. Raises
    :class:`~mosaic.errors.CodecError` if ``message`` is not a registered message, the id is out
    of range, or a field holds a value :func:`pack` cannot encode. Thread-safe.
    """
    kind = type(message)
    spec = _MESSAGE_SPECS.get(kind)
    if spec is None:
        if not isinstance(message, Message):
            raise CodecError(f"cannot send {kind.__qualname__}: it is not a mosaic Message")
        spec = _MESSAGE_SPECS[kind] = _typed_spec(kind)
    if type(correlation_id) is not int or not 0 <= correlation_id < 1 << 64:
        raise CodecError(f"correlation_id must be an int in [0, 2**64), got {correlation_id!r}")
    tag, names, getter, _ = spec
    fields = dict(zip(names, getter(message), strict=True))
    return _pack([PROTOCOL_VERSION, correlation_id, tag, fields])


# -- decoding ---------------------------------------------------------------------------------

_DTYPE_CACHE: dict[bytes, np.dtype[Any]] = {}


# What ``dtype.str`` looks like for the raw kinds: byte order, kind, item size, datetime unit.
_DESCR_PATTERN = re.compile(r"[<>|][biufcmMUSV][0-9]{1,10}(\[[0-9]{0,10}[a-zA-Z]{1,2}\])?")


def _plain_dtype(descr: bytes) -> np.dtype[Any]:
    dtype = _DTYPE_CACHE.get(descr)
    if dtype is None:
        text = descr.decode("ascii")
        # Only canonical ``dtype.str`` text reaches NumPy's parser: no aliases, no deprecated
        # spellings (which would warn), no structured or object dtypes.
        if not _DESCR_PATTERN.fullmatch(text):
            raise MalformedFrame(f"not a plain dtype description: {text[:40]!r}")
        dtype = np.dtype(text)
        if dtype.str != text or dtype.fields is not None or dtype.kind not in _RAW_KINDS:
            raise MalformedFrame(f"array dtype {text!r} cannot be carried as raw bytes")
        if len(_DTYPE_CACHE) < _DTYPE_CACHE_SIZE:
            _DTYPE_CACHE[descr] = dtype
    return dtype


def _spec_dtype(spec: Any) -> np.dtype[Any]:
    """Rebuild a dtype from :func:`_dtype_spec` output; refuses anything that holds objects."""
    kind = type(spec)
    if kind is str:
        dtype = _plain_dtype(spec.encode("ascii"))
    elif kind is list and len(spec) == 2 and type(spec[1]) is list:
        shape = tuple(spec[1])
        if not all(type(dim) is int for dim in shape):
            raise MalformedFrame("subarray shape must hold ints")
        dtype = np.dtype((_spec_dtype(spec[0]), shape))
    elif kind is dict and spec.keys() == _STRUCT_KEYS:
        formats = spec["formats"]
        if type(formats) is not list:
            raise MalformedFrame("structured dtype formats must be a list")
        dtype = np.dtype(
            {
                "names": spec["names"],
                "formats": [_spec_dtype(item) for item in formats],
                "offsets": spec["offsets"],
                "titles": spec["titles"],
                "itemsize": spec["itemsize"],
            },
            align=spec["aligned"] is True,
        )
    else:
        raise MalformedFrame("malformed dtype description")
    if dtype.hasobject:
        raise MalformedFrame("dtype holds objects")
    return dtype


_STRUCT_KEYS = frozenset(("names", "formats", "offsets", "titles", "itemsize", "aligned"))


def _read_shape(data: bytes) -> tuple[int, tuple[int, ...], int]:
    """Return (Fortran flag, shape, length read) of a head's ``_shape_header`` payload."""
    flags, ndim = data[0], data[1]
    if flags > 1 or ndim > _MAX_NDIM:
        raise MalformedFrame("malformed array header")
    shape: tuple[int, ...] = _SHAPE_STRUCTS[ndim].unpack_from(data, 2)
    return flags, shape, 2 + 8 * ndim


def _array_from_bytes(
    data: bytes, offset: int, dtype: np.dtype[Any], shape: tuple[int, ...], fortran: int
) -> np.ndarray[Any, Any]:
    count = math.prod(shape)
    if count * dtype.itemsize != len(data) - offset:
        raise MalformedFrame("array data does not match its shape and dtype")
    order: _Order = "F" if fortran else "C"
    if count == 0 or dtype.itemsize == 0:
        return np.zeros(shape, dtype, order=order)
    # copy(): the result must own writable memory, not borrow the frame's immutable bytes.
    return np.ndarray(shape, dtype, data, offset, None, order).copy(order)


def _decode_bigint(data: bytes) -> int:
    if not data:
        raise MalformedFrame("empty big integer")
    return int.from_bytes(data, "big", signed=True)


_Order = Literal["C", "F"]
# Header bytes -> (dtype, shape, memory order, data size in bytes).
_ParsedHeader = tuple[np.dtype[Any], tuple[int, ...], _Order, int]
_PARSED_HEADERS: dict[bytes, _ParsedHeader] = {}


def _decode_ndarray(data: bytes) -> np.ndarray[Any, Any]:
    end = 3 + data[2] + 8 * data[1]
    header = data[:end]
    parsed = _PARSED_HEADERS.get(header)
    if parsed is None:
        parsed = _parse_array_header(header)
    dtype, shape, order, nbytes = parsed
    if len(data) - end != nbytes:
        raise MalformedFrame("array data does not match its shape and dtype")
    if nbytes == 0:
        return np.zeros(shape, dtype, order=order)
    # copy(): the result must own writable memory, not borrow the frame's immutable bytes.
    return np.ndarray(shape, dtype, data, end, None, order).copy(order)


def _parse_array_header(header: bytes) -> _ParsedHeader:
    fortran, ndim, size = header[0], header[1], header[2]
    if fortran > 1 or ndim > _MAX_NDIM or len(header) != 3 + size + 8 * ndim:
        raise MalformedFrame("malformed array header")
    dtype = _plain_dtype(header[3 : 3 + size])
    shape: tuple[int, ...] = _SHAPE_STRUCTS[ndim].unpack_from(header, 3 + size)
    order: _Order = "F" if fortran else "C"
    parsed = (dtype, shape, order, math.prod(shape) * dtype.itemsize)
    if len(_PARSED_HEADERS) < _HEADER_CACHE_SIZE:
        _PARSED_HEADERS[header] = parsed
    return parsed


_EMPTY_SCALARS: dict[str, np.generic] = {"U": np.str_(""), "S": np.bytes_(b""), "V": np.void(b"")}


def _decode_scalar(data: bytes) -> np.generic:
    size = data[0]
    dtype = _plain_dtype(data[1 : 1 + size])
    if len(data) - 1 - size != dtype.itemsize:
        raise MalformedFrame("scalar data does not match its dtype")
    if dtype.itemsize == 0:
        return _EMPTY_SCALARS[dtype.kind]
    if dtype.kind == "V":  # a void scalar would be a view of the frame's bytes
        return cast(np.generic, np.frombuffer(data, dtype, 1, 1 + size).copy()[0])
    return cast(np.generic, np.frombuffer(data, dtype, 1, 1 + size)[0])


_EXT_DECODERS: dict[int, Callable[[bytes], Any]] = {
    _EXT_BIGINT: _decode_bigint,
    _EXT_NDARRAY: _decode_ndarray,
    _EXT_SCALAR: _decode_scalar,
}


class _Head:
    """A decoded head extension, waiting for the list hook to rebuild its array."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def _build_tuple(data: bytes, items: list[Any]) -> tuple[Any, ...]:
    if data:
        raise MalformedFrame("malformed tuple head")
    del items[0]
    return tuple(items)


def _build_typed(data: bytes, items: list[Any]) -> Any:
    if len(items) != 2:
        raise MalformedFrame("malformed record")
    return _from_fields(lookup(data.decode("utf-8")), items[1])


def _from_fields(cls: type[_Typed], fields: Any) -> Any:
    try:
        decode = (_SCHEMAS.get(cls) or schema(cls)).decode
    except TypeError as exc:  # the class itself is broken (not a frozen slots dataclass, say)
        raise UnknownMessageType(f"{cls.__name__} cannot be decoded on this side: {exc}") from exc
    return decode(fields)


def _build_object_array(data: bytes, items: list[Any]) -> np.ndarray[Any, Any]:
    fortran, shape, pos = _read_shape(data)
    count = math.prod(shape)
    if pos != len(data) or count != len(items) - 1:
        raise MalformedFrame("object array elements do not match its shape")
    array = np.empty(shape, dtype=object, order="F" if fortran else "C")
    # A view in memory order, so that the array itself keeps owning its memory.
    flat = (array.T if fortran else array).reshape(-1)
    for index in range(count):
        flat[index] = items[index + 1]
    return array


def _build_struct_array(data: bytes, items: list[Any]) -> np.ndarray[Any, Any]:
    fortran, shape, pos = _read_shape(data)
    if pos != len(data) or len(items) != 3 or type(items[2]) is not bytes:
        raise MalformedFrame("malformed structured array")
    return _array_from_bytes(items[2], 0, _spec_dtype(items[1]), shape, fortran)


def _build_struct_scalar(data: bytes, items: list[Any]) -> np.generic:
    if data or len(items) != 3 or type(items[2]) is not bytes:
        raise MalformedFrame("malformed structured scalar")
    array = _array_from_bytes(items[2], 0, _spec_dtype(items[1]), (), 0)
    return cast(np.generic, array[()])


_BUILDERS: dict[int, Callable[[bytes, list[Any]], Any]] = {
    _HEAD_TUPLE: _build_tuple,
    _HEAD_TYPED: _build_typed,
    _HEAD_OBJECT_ARRAY: _build_object_array,
    _HEAD_STRUCT_ARRAY: _build_struct_array,
    _HEAD_STRUCT_SCALAR: _build_struct_scalar,
}


_TUPLE_MARK = _Head(_HEAD_TUPLE, b"")


class _Hooks:
    """Per-call unpack hooks. Counts heads so that a head anywhere but first is caught."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = 0

    def ext(self, code: int, data: bytes) -> Any:
        if code == _EXT_NDARRAY:  # the common case first
            return _decode_ndarray(data)
        if code == _HEAD_TUPLE and not data:
            self.open += 1
            return _TUPLE_MARK
        decoder = _EXT_DECODERS.get(code)
        if decoder is not None:
            return decoder(data)
        if code in _HEADS:
            self.open += 1
            return _Head(code, data)
        raise MalformedFrame(f"unknown extension type {code}")

    def array(self, items: list[Any]) -> Any:
        if items:
            head = items[0]
            if head is _TUPLE_MARK:
                self.open -= 1
                del items[0]
                return tuple(items)
            if type(head) is _Head:
                self.open -= 1
                return _BUILDERS[head.code](head.data, items)
        return items


def _unpack(data: Any, max_bytes: int) -> Any:
    try:
        size = len(data) if type(data) is bytes else memoryview(data).nbytes
    except TypeError:
        raise MalformedFrame(f"a frame must be bytes, got {type(data).__name__}") from None
    if size > max_bytes:
        raise FrameTooLarge(
            f"frame of {size} bytes exceeds the limit of {max_bytes} bytes; raise max_bytes "
            "on the receiving side or send less per message"
        )
    hooks = _Hooks()
    try:
        # Length limits default to the frame's size, so a header cannot claim more elements
        # than the frame could hold; msgpack refuses nesting deeper than about 1000 levels.
        obj = msgpack.unpackb(
            data,
            ext_hook=hooks.ext,
            list_hook=hooks.array,
            raw=False,
            strict_map_key=False,
        )
    except CodecError:
        raise
    except Exception as exc:
        # Deliberately broad: the contract is that decoding any bytes whatsoever raises only
        # CodecError, and msgpack, NumPy and the hooks each have their own exception types.
        raise MalformedFrame(f"not a valid mosaic frame: {_reason(exc)}") from exc
    if hooks.open:
        raise MalformedFrame("an extension head appears outside the first position of an array")
    return obj


def _reason(exc: BaseException) -> str:
    try:  # str() of an exception about hostile data can itself fail (a huge int, say)
        text = str(exc)
    except Exception:  # noqa: BLE001 - any failure just means no text
        text = "?"
    return f"{type(exc).__name__}: {text[:200]}"


def unpack(data: BytesLike, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Any:
    """Decode bytes made by :func:`pack`.

    Raises :class:`~mosaic.errors.FrameTooLarge` if ``data`` is longer than ``max_bytes`` (before
    parsing), :class:`~mosaic.errors.MalformedFrame` for anything that is not a valid encoding,
    and :class:`~mosaic.errors.UnknownMessageType` / :class:`~mosaic.errors.MessageFieldError`
    for a nested record this side does not know or whose fields do not fit. Nothing else.
    Decoded arrays are writable and own their memory. Thread-safe.
    """
    return _unpack(data, max_bytes)


def decode_message(
    frame: BytesLike, *, max_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> tuple[int, Message]:
    """Decode one envelope made by :func:`encode_message`; return ``(correlation_id, message)``.

    ``frame`` may be any bytes-like object (``bytes``, ``memoryview``, a ZeroMQ frame). Raises
    exactly one of these, and nothing else, whatever the bytes:

    - :class:`~mosaic.errors.FrameTooLarge`: longer than ``max_bytes``, checked before parsing;
    - :class:`~mosaic.errors.MalformedFrame`: not msgpack, trailing bytes, not an envelope, a
      correlation id outside ``[0, 2**64)``, bad extension payloads;
    - :class:`~mosaic.errors.ProtocolVersionMismatch`;
    - :class:`~mosaic.errors.UnknownMessageType`: a type tag this side has not registered;
    - :class:`~mosaic.errors.MessageFieldError`: missing, unknown or mistyped fields, named in
      the error message.

    Thread-safe.
    """
    envelope = _unpack(frame, max_bytes)
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
    return correlation_id, _from_fields(cls, fields)
