"""The wire format's vocabulary: extension type codes, the array header layout, and its limits.

The encoder (:mod:`mosaic.messages._encode`) and the decoder (:mod:`mosaic.messages._decode`)
both read the format from here, so that the two sides cannot drift apart.
"""

from __future__ import annotations

import struct

# Flat extensions: the payload is the whole value.
EXT_BIGINT = 1  # two's complement, big-endian
#: The longest big integer a frame may hold (1024 bits): 128-bit values round-trip with room to
#: spare, while a huge one, cheap to send, would cost every later operation on it dearly.
MAX_BIGINT_BYTES = 128
EXT_NDARRAY = 2  # flags, ndim, len(descr), descr, shape (u64 each), raw data
EXT_SCALAR = 3  # len(descr), descr, raw data
# Head extensions: first element of a msgpack array whose other elements are the content.
HEAD_TUPLE = 16  # [head, *items]
HEAD_TYPED = 17  # payload: type tag; [head, {field: value}]
HEAD_OBJECT_ARRAY = 18  # payload: flags, ndim, shape; [head, *elements in memory order]
HEAD_STRUCT_ARRAY = 19  # payload: flags, ndim, shape; [head, dtype spec, raw data]
HEAD_STRUCT_SCALAR = 20  # [head, dtype spec, raw data]
HEADS = frozenset(
    (HEAD_TUPLE, HEAD_TYPED, HEAD_OBJECT_ARRAY, HEAD_STRUCT_ARRAY, HEAD_STRUCT_SCALAR)
)

MAX_NDIM = 64
SHAPE_STRUCTS = tuple(struct.Struct(f"<{n}Q") for n in range(MAX_NDIM + 1))
# Array headers (dtype, shape, layout) seen before, both ways: the hot loop sends the same few.
HEADER_CACHE_SIZE = 1024
