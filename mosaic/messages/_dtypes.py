"""NumPy dtypes on the wire: how a dtype is described, and how a received description is checked.

A plain dtype travels as its ``dtype.str``, a structured one as a dict of packable values
(:func:`dtype_spec`). On the way in only canonical descriptions of raw-bytes kinds reach NumPy's
parser, and a dtype that holds objects is refused with MalformedFrame.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from mosaic.core.errors import CodecError, MalformedFrame

# Kinds whose raw bytes are the value: bool, ints, uints, floats, complex, datetime, timedelta,
# unicode, bytes and void. Object ('O') and NumPy's variable-width strings ('T') hold pointers.
_RAW_KINDS = frozenset("biufcmMUSV")
_DTYPE_CACHE_SIZE = 256


# -- encoding ---------------------------------------------------------------------------------

# Plain (raw-bytes) dtypes only: a structured or object dtype is never a key.
_DESCR_CACHE: dict[np.dtype[Any], bytes] = {}


def dtype_descr(dtype: np.dtype[Any]) -> bytes:
    """Return the ``dtype.str`` of a plain dtype; raise CodecError for one that holds pointers."""
    descr = _DESCR_CACHE.get(dtype)
    if descr is None:
        if dtype.fields is not None or dtype.kind not in _RAW_KINDS:
            raise CodecError(f"cannot encode NumPy values of dtype {dtype}")
        descr = dtype.str.encode("ascii")
        if len(_DESCR_CACHE) < _DTYPE_CACHE_SIZE:
            _DESCR_CACHE[dtype] = descr
    return descr


def dtype_spec(dtype: np.dtype[Any]) -> Any:
    """Describe a dtype with packable values: its ``str`` when plain, a dict when structured."""
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return [dtype_spec(base), list(shape)]
    if dtype.fields is None:
        if dtype.kind not in _RAW_KINDS:
            raise CodecError(f"cannot encode a structured field of dtype {dtype}")
        return dtype.str
    names = list(dtype.names or ())
    formats, offsets, titles = [], [], []
    for name in names:
        field = dtype.fields[name]
        formats.append(dtype_spec(field[0]))
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


# -- decoding ---------------------------------------------------------------------------------

_DTYPE_CACHE: dict[bytes, np.dtype[Any]] = {}


# What ``dtype.str`` looks like for the raw kinds: byte order, kind, item size, datetime unit.
_DESCR_PATTERN = re.compile(r"[<>|][biufcmMUSV][0-9]{1,10}(\[[0-9]{0,10}[a-zA-Z]{1,2}\])?")


def plain_dtype(descr: bytes) -> np.dtype[Any]:
    """The plain dtype ``descr`` names; MalformedFrame unless it is canonical raw-bytes text."""
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


def spec_dtype(spec: Any) -> np.dtype[Any]:
    """Rebuild a dtype from :func:`dtype_spec` output; refuses anything that holds objects."""
    kind = type(spec)
    if kind is str:
        dtype = plain_dtype(spec.encode("ascii"))
    elif kind is list and len(spec) == 2 and type(spec[1]) is list:
        shape = tuple(spec[1])
        if not all(type(dim) is int for dim in shape):
            raise MalformedFrame("subarray shape must hold ints")
        dtype = np.dtype((spec_dtype(spec[0]), shape))
    elif kind is dict and spec.keys() == _STRUCT_KEYS:
        formats = spec["formats"]
        if type(formats) is not list:
            raise MalformedFrame("structured dtype formats must be a list")
        dtype = np.dtype(
            {
                "names": spec["names"],
                "formats": [spec_dtype(item) for item in formats],
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
