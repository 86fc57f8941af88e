"""Encoding values: the thread's msgpack packer and an encoder per type msgpack lacks.

Big ints, tuples, NumPy arrays and scalars, and registered records and messages each have an
encoder, found by exact type and cached; any other type raises CodecError.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from mosaic.core.errors import CodecError
from mosaic.messages._base import _REGISTRY, _Typed, schema
from mosaic.messages._dtypes import dtype_descr, dtype_spec
from mosaic.messages._wire import (
    EXT_BIGINT,
    EXT_NDARRAY,
    EXT_SCALAR,
    HEAD_OBJECT_ARRAY,
    HEAD_STRUCT_ARRAY,
    HEAD_STRUCT_SCALAR,
    HEAD_TUPLE,
    HEAD_TYPED,
    HEADER_CACHE_SIZE,
    MAX_BIGINT_BYTES,
    SHAPE_STRUCTS,
)

_TUPLE_HEAD = msgpack.ExtType(HEAD_TUPLE, b"")
_STRUCT_SCALAR_HEAD = msgpack.ExtType(HEAD_STRUCT_SCALAR, b"")

# A thread keeps its packer; after a frame this large it gets a fresh one so that the grown
# buffer is released.
_PACKER_KEEP_BYTES = 1 << 20
_BIG_ARRAY_BYTES = 1 << 16

_local = threading.local()


def _new_packer() -> msgpack.Packer:
    # strict_types: tuple, bool-vs-int and float subclasses (np.float64) must reach _default.
    return msgpack.Packer(default=_default, strict_types=True, use_bin_type=True)


def encode_value(obj: Any) -> bytes:
    """Pack ``obj`` with this thread's packer; CodecError for a value that cannot be encoded."""
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


def _default(obj: Any) -> Any:
    """Packer fallback for every value msgpack does not encode natively (strict types)."""
    kind = type(obj)
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        encoder = _resolve_encoder(kind)
    return encoder(obj)


def _resolve_encoder(kind: type) -> Callable[[Any], Any]:
    if issubclass(kind, np.generic):
        encoder: Callable[[Any], Any] = _number_encoder(kind) or _encode_scalar
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
    if size > MAX_BIGINT_BYTES:
        raise CodecError(f"an integer of {value.bit_length()} bits is too large to send; "
                         f"at most {MAX_BIGINT_BYTES * 8} bits")
    return msgpack.ExtType(EXT_BIGINT, value.to_bytes(size, "big", signed=True))


def _encode_tuple(value: tuple[Any, ...]) -> list[Any]:
    return [_TUPLE_HEAD, *value]


_HEADERS: dict[tuple[np.dtype[Any], tuple[int, ...], bool], bytes] = {}


def _shape_header(fortran: bool, shape: tuple[int, ...]) -> bytes:
    return bytes((fortran, len(shape))) + SHAPE_STRUCTS[len(shape)].pack(*shape)


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
        descr = dtype_descr(dtype)
        ndim = array.ndim
        header = bytes((fortran, ndim, len(descr))) + descr
        header += SHAPE_STRUCTS[ndim].pack(*array.shape)
        if len(_HEADERS) < HEADER_CACHE_SIZE:
            _HEADERS[key] = header
    if array.nbytes < _BIG_ARRAY_BYTES:
        return _ext(EXT_NDARRAY, header + array.tobytes("F" if fortran else "C"))
    # Large array: join a byte view instead of concatenating a copy (one copy fewer).
    flat = array.T if fortran else np.ascontiguousarray(array)
    return _ext(EXT_NDARRAY, b"".join((header, flat.reshape(-1).view(np.uint8).data)))


def _encode_struct_array(array: np.ndarray[Any, Any], fortran: bool) -> list[Any]:
    if array.dtype.hasobject:
        raise CodecError(f"cannot encode a structured array with object fields ({array.dtype})")
    return [
        _ext(HEAD_STRUCT_ARRAY, _shape_header(fortran, array.shape)),
        dtype_spec(array.dtype),
        array.tobytes("F" if fortran else "C"),
    ]


def _encode_object_array(array: np.ndarray[Any, Any], fortran: bool) -> list[Any]:
    elements = array.ravel("F" if fortran else "C").tolist() if array.ndim else [array[()]]
    return [_ext(HEAD_OBJECT_ARRAY, _shape_header(fortran, array.shape)), *elements]


def _encode_scalar(value: np.generic) -> Any:
    dtype = value.dtype
    if dtype.fields is not None:
        if dtype.hasobject:
            raise CodecError(f"cannot encode a structured scalar with object fields ({dtype})")
        return [_STRUCT_SCALAR_HEAD, dtype_spec(dtype), value.tobytes()]
    descr = dtype_descr(dtype)
    # An empty np.str_ / np.bytes_ has itemsize 0 yet tobytes() pads it to one character.
    raw = value.tobytes() if dtype.itemsize else b""
    return _ext(EXT_SCALAR, bytes((len(descr),)) + descr + raw)


# Kinds whose scalar type fixes the dtype (bool, ints, floats, complex): the header can be built
# once per type. Strings, bytes, void and datetimes carry a size or unit that varies by value.
_NUMBER_KINDS = frozenset("biufc")
#: How many encodings of integer scalars each integer type keeps (see _number_encoder).
_KNOWN_INTEGERS = 4096


def _number_encoder(kind: type) -> Callable[[Any], Any] | None:
    """An encoder for scalars of NumPy number type ``kind`` with its header built once, or None."""
    try:
        dtype = np.dtype(kind)
    except TypeError:
        return None
    if dtype.kind not in _NUMBER_KINDS:
        return None
    descr = dtype_descr(dtype)
    head = bytes((len(descr),)) + descr

    def encode_number(value: Any) -> Any:
        # Builtin dtypes are singletons: an identity test keeps the output that of
        # _encode_scalar for any value whose dtype is not the type's own.
        if value.dtype is not dtype:
            return _encode_scalar(value)
        return _ext(EXT_SCALAR, head + value.tobytes())

    if dtype.kind not in "biu":
        return encode_number
    # A scalar's tobytes() builds an array first: most of what encoding one costs. Integers
    # and bools equal as values are equal bit for bit (unlike floats: 0.0 and -0.0), so
    # their encodings are kept, for the few values a run sends over and over (actions).
    known: dict[Any, Any] = {}

    def encode_integer(value: Any) -> Any:
        if value.dtype is not dtype:
            return _encode_scalar(value)
        ext = known.get(value)
        if ext is None:
            ext = _ext(EXT_SCALAR, head + value.tobytes())
            if len(known) < _KNOWN_INTEGERS:
                known[value] = ext
        return ext

    return encode_integer


# Per class: (tag, field names, function returning the {field: value} map, head extension).
TypedSpec = tuple[str, tuple[str, ...], Callable[[Any], dict[str, Any]], msgpack.ExtType]
_TYPED_SPECS: dict[type, TypedSpec] = {}


def typed_spec(kind: type) -> TypedSpec:
    """The cached encoding spec of registered class ``kind``; CodecError for any other class."""
    spec = _TYPED_SPECS.get(kind)
    if spec is not None:
        return spec
    if not (issubclass(kind, _Typed) and _REGISTRY.get(kind.__name__) is kind):
        raise CodecError(f"{kind.__qualname__} is not a registered mosaic message or record")
    try:
        names = schema(kind).names
    except TypeError as exc:
        raise CodecError(str(exc)) from exc
    tag = kind.__name__
    spec = (tag, names, _field_map(kind, names), _ext(HEAD_TYPED, tag.encode("utf-8")))
    _TYPED_SPECS[kind] = spec
    return spec


def _field_map(kind: type, names: tuple[str, ...]) -> Callable[[Any], dict[str, Any]]:
    """Generate ``obj -> {field: obj.field, ...}`` for one class.

    Every message sent builds this map; a dict display compiled once per class costs about a
    quarter of ``dict(zip(names, attrgetter(*names)(obj)))``. Field names are identifiers
    (dataclasses refuse anything else), so they can be spelled in the source.
    """
    items = ", ".join(f"{name!r}: obj.{name}" for name in names)
    namespace: dict[str, Any] = {}
    source = f"def field_map(obj):\n    return {{{items}}}\n"
    exec(compile(source, f"<mosaic fields {kind.__qualname__}>", "exec"), namespace)
    field_map: Callable[[Any], dict[str, Any]] = namespace["field_map"]
    return field_map


def _encode_typed(value: Any) -> list[Any]:
    _, _, field_map, head = _TYPED_SPECS.get(type(value)) or typed_spec(type(value))
    return [head, field_map(value)]


_ENCODERS: dict[type, Callable[[Any], Any]] = {
    int: _encode_bigint,
    tuple: _encode_tuple,
    np.ndarray: _encode_ndarray,
}
