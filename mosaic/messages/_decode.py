"""Decoding frames: the unpack hooks that rebuild extension values, bounded by the frame's size.

Decoding any bytes whatsoever raises only subclasses of CodecError. Containers are rebuilt
bottom-up by the list hook, so decoding never recurses into a nested unpack and msgpack's own
depth and length limits bound every frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, cast

import msgpack
import numpy as np

from mosaic.core.errors import CodecError, FrameTooLarge, MalformedFrame, UnknownMessageType
from mosaic.messages._base import _SCHEMAS, _Typed, lookup, schema
from mosaic.messages._dtypes import plain_dtype, spec_dtype
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
    HEADS,
    MAX_BIGINT_BYTES,
    MAX_NDIM,
    SHAPE_STRUCTS,
)


def _read_shape(data: bytes) -> tuple[int, tuple[int, ...], int]:
    """Return (Fortran flag, shape, length read) of a head's ``_shape_header`` payload."""
    flags, ndim = data[0], data[1]
    if flags > 1 or ndim > MAX_NDIM:
        raise MalformedFrame("malformed array header")
    shape: tuple[int, ...] = SHAPE_STRUCTS[ndim].unpack_from(data, 2)
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
    if len(data) > MAX_BIGINT_BYTES:
        raise MalformedFrame(f"big integer of {len(data)} bytes; at most {MAX_BIGINT_BYTES}")
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
    if fortran > 1 or ndim > MAX_NDIM or len(header) != 3 + size + 8 * ndim:
        raise MalformedFrame("malformed array header")
    dtype = plain_dtype(header[3 : 3 + size])
    shape: tuple[int, ...] = SHAPE_STRUCTS[ndim].unpack_from(header, 3 + size)
    order: _Order = "F" if fortran else "C"
    parsed = (dtype, shape, order, math.prod(shape) * dtype.itemsize)
    if len(_PARSED_HEADERS) < HEADER_CACHE_SIZE:
        _PARSED_HEADERS[header] = parsed
    return parsed


_EMPTY_SCALARS: dict[str, np.generic] = {"U": np.str_(""), "S": np.bytes_(b""), "V": np.void(b"")}


def _decode_scalar(data: bytes) -> np.generic:
    size = data[0]
    dtype = plain_dtype(data[1 : 1 + size])
    if len(data) - 1 - size != dtype.itemsize:
        raise MalformedFrame("scalar data does not match its dtype")
    if dtype.itemsize == 0:
        return _EMPTY_SCALARS[dtype.kind]
    if dtype.kind == "V":  # a void scalar would be a view of the frame's bytes
        return cast(np.generic, np.frombuffer(data, dtype, 1, 1 + size).copy()[0])
    return cast(np.generic, np.frombuffer(data, dtype, 1, 1 + size)[0])


_EXT_DECODERS: dict[int, Callable[[bytes], Any]] = {
    EXT_BIGINT: _decode_bigint,
    EXT_NDARRAY: _decode_ndarray,
    EXT_SCALAR: _decode_scalar,
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
    return from_fields(lookup(data.decode("utf-8")), items[1])


def from_fields(cls: type[_Typed], fields: Any) -> Any:
    """Build ``cls`` from its decoded field map (its schema checks names and types)."""
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
    return _array_from_bytes(items[2], 0, spec_dtype(items[1]), shape, fortran)


def _build_struct_scalar(data: bytes, items: list[Any]) -> np.generic:
    if data or len(items) != 3 or type(items[2]) is not bytes:
        raise MalformedFrame("malformed structured scalar")
    array = _array_from_bytes(items[2], 0, spec_dtype(items[1]), (), 0)
    return cast(np.generic, array[()])


_BUILDERS: dict[int, Callable[[bytes, list[Any]], Any]] = {
    HEAD_TUPLE: _build_tuple,
    HEAD_TYPED: _build_typed,
    HEAD_OBJECT_ARRAY: _build_object_array,
    HEAD_STRUCT_ARRAY: _build_struct_array,
    HEAD_STRUCT_SCALAR: _build_struct_scalar,
}


_TUPLE_MARK = _Head(HEAD_TUPLE, b"")


class _Hooks:
    """Per-call unpack hooks. Counts heads so that a head anywhere but first is caught."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = 0

    def ext(self, code: int, data: bytes) -> Any:
        if code == EXT_NDARRAY:  # the common case first
            return _decode_ndarray(data)
        if code == HEAD_TUPLE and not data:
            self.open += 1
            return _TUPLE_MARK
        decoder = _EXT_DECODERS.get(code)
        if decoder is not None:
            return decoder(data)
        if code in HEADS:
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


def decode_frame(data: Any, max_bytes: int) -> Any:
    """Decode one frame of at most ``max_bytes``; raises only CodecError subclasses."""
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
    except Exception:  # any failure just means no text
        text = "?"
    return f"{type(exc).__name__}: {text[:200]}"
