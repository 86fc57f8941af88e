"""TemplatePacker gives pack's bytes, from a template for values it covers and from pack for the
rest, whatever the arrays hold."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mosaic.messages.codec import pack, unpack
from mosaic.messages.templates import TemplatePacker

pytestmark = pytest.mark.timeout(60)


def _batch(rng: np.random.Generator, copies: int) -> tuple[Any, ...]:
    """A copies loop's digest tuple: a uid, then observations, actions, rewards and ends."""
    return ("cartpole", rng.normal(size=(copies, 4)).astype(np.float32),
            rng.integers(0, 2, copies), rng.normal(size=copies), rng.random(copies) < 0.1,
            rng.random(copies) < 0.05, np.ones(copies, dtype=bool))


def test_batches_of_one_signature_pack_as_pack_does() -> None:
    packer, rng = TemplatePacker(), np.random.default_rng(3)
    for _ in range(200):
        value = _batch(rng, 16)
        assert packer.pack(value) == pack(value)
    assert len(packer._templates) == 1


@pytest.mark.parametrize("value", [
    ("a", np.zeros((0, 4), np.float32), np.arange(3, dtype=np.uint8)),  # an empty array
    ("big", np.arange(40_000, dtype=np.float64)),  # above the codec's large-array size
    (np.array(2.5), "scalar array first", np.array([[1, 2], [3, 4]], dtype=">i4")),
    ("only", "strings"),
    (),
    ("complex", np.arange(6, dtype=np.complex128).reshape(2, 3)),
    ("f16", np.linspace(0, 1, 7, dtype=np.float16), np.zeros(5, dtype=np.bool_)),
], ids=["empty", "big", "scalar-and-big-endian", "strings", "nothing", "complex", "float16"])
def test_every_covered_kind_packs_as_pack_does(value: tuple[Any, ...]) -> None:
    packer = TemplatePacker()
    assert packer.pack(value) == pack(value)
    assert packer.pack(value) == pack(value)  # from the template now


@pytest.mark.parametrize("value", [
    ("fortran", np.asfortranarray(np.arange(6.0).reshape(2, 3))),
    ("strided", np.arange(10.0)[::2]),
    ("objects", np.array([1, "a"], dtype=object)),
    ("structured", np.zeros(2, dtype=[("x", "<i4"), ("y", "<f8")])),
    ("a float", 1.5, np.zeros(2)),
    ("a subclass", np.ma.masked_array([1.0, 2.0])),
    ["a list", np.zeros(2)],
], ids=["fortran", "strided", "object", "structured", "float", "subclass", "list"])
def test_what_templates_do_not_cover_is_packed_by_pack(value: Any) -> None:
    packer = TemplatePacker()
    try:
        expected = pack(value)
    except Exception as error:  # the codec refuses it: so does the packer, alike
        with pytest.raises(type(error)):
            packer.pack(value)
        return
    assert packer.pack(value) == expected
    assert not packer._templates


def test_a_new_uid_or_shape_is_a_new_template_and_the_count_is_bounded() -> None:
    packer, rng = TemplatePacker(max_templates=3), np.random.default_rng(4)
    values = [_batch(rng, copies) for copies in (2, 3, 4, 5, 6)]
    values.append(("other", *values[0][1:]))
    for value in values * 2:
        assert packer.pack(value) == pack(value)
        assert unpack(packer.pack(value))[0] == value[0]
    assert len(packer._templates) == 3
