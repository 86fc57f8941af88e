"""``pack`` of a tuple of the same kinds of arrays step after step, from a checked template.

A copies loop digests every batch as ``pack((uid, observations, actions, rewards, terminated,
truncated, acted))``: a string and arrays whose dtypes and shapes do not change from one batch
to the next. Their encoding is then fixed bytes (msgpack's headers, the codec's array headers,
the string) around each array's raw bytes, and :class:`TemplatePacker` keeps those fixed bytes
per signature (the string, and each array's dtype and shape) and joins them with the arrays'
``tobytes()``. It learns a template from :func:`~mosaic.messages.codec.pack` itself and uses it
only if filling it in gives ``pack``'s bytes, so its output is ``pack``'s by construction: a
digest over it is the digest over ``pack``. Anything else (another type, a non-contiguous or
object array, more signatures than it keeps) is packed by ``pack``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mosaic.messages.codec import pack

__all__ = ["TemplatePacker"]

#: A template: the fixed bytes before each array's raw bytes, then the bytes after the last.
_Template = list[bytes]
_NDARRAY = np.ndarray
_UNUSABLE: _Template = []


class TemplatePacker:
    """``pack(value)`` for tuples of strings and plain C-contiguous arrays (see the module),
    about a third of its cost for a copies loop's digest. Not thread-safe: one per loop."""

    def __init__(self, max_templates: int = 16) -> None:
        self.max_templates = max_templates
        self._templates: dict[tuple[Any, ...], _Template] = {}

    def pack(self, value: tuple[Any, ...]) -> bytes:
        """Exactly ``pack(value)``."""
        key = _signature(value)
        if key is None:
            return pack(value)
        template = self._templates.get(key)
        if template is None:
            if len(self._templates) >= self.max_templates:
                return pack(value)
            template = self._templates[key] = _learn(value)
        if template is _UNUSABLE:
            return pack(value)
        parts = [template[0]]
        index = 1
        for item in value:
            if type(item) is _NDARRAY:
                parts.append(item.tobytes())
                parts.append(template[index])
                index += 1
        return b"".join(parts)


def _signature(value: Any) -> tuple[Any, ...] | None:
    """What fixes the encoding of ``value`` but its arrays' contents; None for a value the
    templates do not cover."""
    if type(value) is not tuple:
        return None
    key: list[Any] = []
    for item in value:
        kind = type(item)
        if kind is _NDARRAY:
            dtype = item.dtype
            if dtype.hasobject or dtype.fields is not None or not item.flags.c_contiguous:
                return None
            key.append((dtype, item.shape))
        elif kind is str:
            key.append(item)
        else:
            return None
    return tuple(key)


def _learn(value: tuple[Any, ...]) -> _Template:
    """The template of ``value``'s signature, checked against ``pack``; ``_UNUSABLE`` if the
    encoding is not fixed bytes around each array's raw bytes."""
    whole = pack(value)
    encodings = [pack(item) for item in value]
    head = len(whole) - sum(len(encoding) for encoding in encodings)
    if head < 0 or whole[head:] != b"".join(encodings):
        return _UNUSABLE
    template: _Template = []
    fixed = whole[:head]
    raws = []
    for item, encoding in zip(value, encodings, strict=True):
        if type(item) is not _NDARRAY:
            fixed += encoding
            continue
        raw = item.tobytes()
        if raw and not encoding.endswith(raw):
            return _UNUSABLE
        template.append(fixed + encoding[:len(encoding) - len(raw)])
        raws.append(raw)
        fixed = b""
    template.append(fixed)
    filled = [template[0]]
    for raw, after in zip(raws, template[1:], strict=True):
        filled += [raw, after]
    return template if b"".join(filled) == whole else _UNUSABLE
