"""How the store keeps an observation or an action: the codec's bytes, zstd-compressed when large.

A value whose encoding reaches :data:`COMPRESS_ABOVE` bytes (in practice one holding a NumPy
image, or several arrays) is stored as :data:`MARKER` followed by one zstd frame of those bytes,
when that is smaller; anything else is stored as the codec's bytes, as every store held before
compression existed. The reader tells the two apart by the first byte: ``0xc1`` is the one byte
msgpack never uses, so no plain value starts with it. Compressing the encoded value, rather than
each array inside it, leaves the codec alone and compresses the arrays of a mapping together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import zstandard

Encode = Callable[[Any], bytes]
Decode = Callable[[bytes], Any]

#: Encoded values of at least this many bytes are compressed (when that makes them smaller).
COMPRESS_ABOVE = 4096
#: ``0xc1`` (never used by msgpack) and the format of what follows: 1 is one zstd frame.
MARKER = b"\xc1\x01"
# zstd's default level: images compress several times over at a few hundred MB/s, which keeps
# the writer thread ahead of the step loop; higher levels gain little on them for much more time.
_LEVEL = 3


def compressing(encode: Encode, above: int | None = COMPRESS_ABOVE) -> Encode:
    """``encode`` followed by zstd compression of results of at least ``above`` bytes.

    ``above=None`` returns ``encode`` itself. The function returned keeps one compressor and must
    be used by one thread at a time (the writer thread).
    """
    if above is None:
        return encode
    compressor = zstandard.ZstdCompressor(level=_LEVEL)

    def encode_value(value: Any) -> bytes:
        data = encode(value)
        if len(data) < above:
            return data
        packed = MARKER + compressor.compress(data)
        return packed if len(packed) < len(data) else data

    return encode_value


def decompressing(decode: Decode) -> Decode:
    """``decode`` of a stored value, compressed or not.

    The function returned keeps one decompressor and must be used by one thread at a time.
    Raises ``zstandard.ZstdError`` for a damaged frame, and whatever ``decode`` raises.
    """
    decompressor = zstandard.ZstdDecompressor()

    def decode_value(data: bytes) -> Any:
        if data[: len(MARKER)] == MARKER:
            data = decompressor.decompress(data[len(MARKER):])
        return decode(data)

    return decode_value
