"""The wire format: exact round trips of values and envelopes, and every way decoding can fail."""

from __future__ import annotations

import contextlib
import enum
import math
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import hypothesis.extra.numpy as npst
import msgpack  # type: ignore[import-untyped]
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mosaic.core.errors import (
    CodecError,
    FrameTooLarge,
    MalformedFrame,
    MessageFieldError,
    ProtocolVersionMismatch,
    UnknownMessageType,
)
from mosaic.messages import (
    DEFAULT_MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    EnvironmentStartResponse,
    EnvironmentUpdateResponse,
    MuscleUpdateRequest,
    PingRequest,
    Record,
    SensorSpec,
    decode_message,
    encode_message,
    pack,
    unpack,
)
from mosaic.messages._wire import EXT_BIGINT
from mosaic.messages.codec import pack_each

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True, slots=True)
class CodecTestPoint(Record):
    """A record only these tests use: nested records must survive any container."""

    x: int
    label: str
    payload: Any = None


# -- exact comparison ---------------------------------------------------------------------------


def assert_identical(expected: Any, actual: Any, path: str = "value") -> None:
    """Fail unless ``actual`` equals ``expected`` with the same types, dtypes and bits throughout.

    Plain ``==`` would accept 1 for True, a list for a tuple, np.float64 for float and an array of
    another dtype; this helper does not. Decoded arrays must also be writable and own their memory.
    """
    assert type(actual) is type(expected), f"{path}: {type(actual)} is not {type(expected)}"
    if isinstance(expected, np.ndarray):
        _assert_same_array(expected, actual, path)
    elif isinstance(expected, np.generic):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.dtype.str == expected.dtype.str, f"{path}: byte order differs"
        if expected.dtype.itemsize:
            assert actual.tobytes() == expected.tobytes(), f"{path}: {actual!r} != {expected!r}"
        else:
            assert actual == expected, f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, float):
        # Bitwise: NaN equals NaN, and -0.0 differs from 0.0.
        assert struct.pack("<d", actual) == struct.pack("<d", expected), f"{path}: {actual!r}"
    elif isinstance(expected, dict):
        assert len(actual) == len(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for (key_e, value_e), (key_a, value_a) in zip(
            expected.items(), actual.items(), strict=True
        ):
            assert_identical(key_e, key_a, f"{path} key {key_e!r}")
            assert_identical(value_e, value_a, f"{path}[{key_e!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for index, (item_e, item_a) in enumerate(zip(expected, actual, strict=True)):
            assert_identical(item_e, item_a, f"{path}[{index}]")
    elif hasattr(type(expected), "__dataclass_fields__"):
        for name in type(expected).__dataclass_fields__:
            assert_identical(getattr(expected, name), getattr(actual, name), f"{path}.{name}")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _assert_same_array(expected: np.ndarray, actual: np.ndarray, path: str) -> None:
    assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.dtype.str == expected.dtype.str, f"{path}: dtype str differs"
    assert actual.dtype.isalignedstruct == expected.dtype.isalignedstruct, f"{path}: alignment"
    assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
    assert actual.flags.writeable, f"{path}: decoded array is read-only"
    assert actual.flags.owndata, f"{path}: decoded array borrows its memory"
    if expected.flags.f_contiguous and not expected.flags.c_contiguous:
        assert actual.flags.f_contiguous, f"{path}: Fortran layout lost"
    if expected.dtype.hasobject:
        flat = zip(expected.ravel(), actual.ravel(), strict=True)
        for index, (item_e, item_a) in enumerate(flat):
            assert_identical(item_e, item_a, f"{path}.flat[{index}]")
    else:
        assert actual.tobytes() == expected.tobytes(), f"{path}: contents differ"


def roundtrip(value: Any) -> Any:
    decoded = unpack(pack(value))
    assert_identical(value, decoded)
    return decoded


def test_assert_identical_can_fail() -> None:
    """The comparison helper is what makes the round-trip tests meaningful; it must be strict."""
    for expected, actual in [
        (True, 1),
        ((1,), [1]),
        (1.0, np.float64(1.0)),
        (0.0, -0.0),
        (np.float32(1), np.float64(1)),
        (np.arange(3, dtype="<i4"), np.arange(3, dtype=">i4")),
        ({1: "a", 2: "b"}, {2: "b", 1: "a"}),
        (np.zeros(2), np.frombuffer(bytes(16))),
    ]:
        with pytest.raises(AssertionError):
            assert_identical(expected, actual)


# -- strategies ---------------------------------------------------------------------------------

any_endianness = st.sampled_from(["<", ">"])
plain_dtypes = st.one_of(
    npst.boolean_dtypes(),
    npst.integer_dtypes(endianness="?"),
    npst.unsigned_integer_dtypes(endianness="?"),
    npst.floating_dtypes(endianness="?", sizes=(16, 32, 64, 128)),
    npst.complex_number_dtypes(endianness="?", sizes=(64, 128, 256)),
    npst.datetime64_dtypes(endianness="?"),
    npst.timedelta64_dtypes(endianness="?"),
    npst.unicode_string_dtypes(endianness="?"),
    npst.byte_string_dtypes(),
)
structured_dtypes = st.one_of(
    npst.array_dtypes(plain_dtypes, allow_subarrays=True, max_size=3),
    npst.nested_dtypes(plain_dtypes, max_leaves=4),
)
shapes = npst.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


@st.composite
def numpy_arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = draw(st.one_of(plain_dtypes, plain_dtypes, structured_dtypes))
    array = draw(npst.arrays(dtype, shapes))
    layout = draw(st.sampled_from(["as is", "fortran", "strided", "transposed"]))
    if layout == "fortran":
        array = np.asfortranarray(array)
    elif layout == "strided" and array.ndim:
        array = array[::2]
    elif layout == "transposed":
        array = array.T
    return array


numpy_scalars = npst.arrays(plain_dtypes, ()).map(lambda array: array[()])
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.binary(max_size=10),
    numpy_scalars,
)
hashable_keys = st.recursive(
    st.one_of(st.text(max_size=5), st.integers(), st.binary(max_size=5), st.none()),
    lambda inner: st.lists(inner, max_size=3).map(tuple),
    max_leaves=5,
)


@st.composite
def object_arrays(draw: st.DrawFn, elements: st.SearchStrategy[Any]) -> np.ndarray:
    shape = draw(npst.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    array = np.empty(shape, dtype=object)
    flat = array.reshape(-1)
    for index in range(flat.size):
        flat[index] = draw(elements)
    return np.asfortranarray(array) if draw(st.booleans()) else array


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(hashable_keys, children, max_size=4),
        st.builds(CodecTestPoint, st.integers(-5, 5), st.text(max_size=3), children),
        object_arrays(children),
    )


values = st.recursive(st.one_of(leaves, numpy_arrays()), _containers, max_leaves=12)


# -- round trips --------------------------------------------------------------------------------


@FAST
@given(leaves)
def test_scalars_roundtrip_with_their_types(value: Any) -> None:
    roundtrip(value)


@FAST
@given(numpy_arrays())
def test_arrays_of_any_dtype_and_shape_roundtrip(array: np.ndarray) -> None:
    roundtrip(array)


@FAST
@given(values)
def test_nested_values_roundtrip(value: Any) -> None:
    roundtrip(value)


@FAST
@given(st.dictionaries(hashable_keys, st.integers(), max_size=6))
def test_tuples_and_ints_as_dict_keys(mapping: dict[Any, int]) -> None:
    roundtrip(mapping)


@pytest.mark.parametrize(
    "value",
    [
        2**64 - 1,
        2**64,
        -(2**63),
        -(2**63) - 1,
        2**127 + 12345,  # 128-bit SeedSequence entropy
        -(2**300),
    ],
)
def test_ints_of_any_size(value: int) -> None:
    roundtrip(value)


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        np.float64(1.5),
        np.float32(1.5),
        np.float16(-0.0),
        np.longdouble(1) / 3,
        np.clongdouble(1 + 2j),
        True,
        np.bool_(True),
        7,
        np.int64(7),
        np.uint8(255),
        np.datetime64("2024-01-02T03:04:05.123456789", "ns"),
        np.datetime64("NaT"),
        np.timedelta64(-3, "ms"),
        np.str_("héllo"),
        np.str_(""),
        np.bytes_(b"\x00ab"),
        np.bytes_(b""),
        np.void(b"\x01\x02"),
        np.zeros((), dtype=[("a", "<i2"), ("b", ">f4", (2,))])[()],
    ],
    ids=repr,
)
def test_python_and_numpy_scalar_types_are_kept(value: Any) -> None:
    roundtrip(value)


def test_integer_scalars_encode_the_same_once_their_encodings_are_kept() -> None:
    from mosaic.messages._encode import _KNOWN_INTEGERS, _encode_scalar

    kinds: list[Any] = [np.int8, np.uint8, np.int32, np.int64, np.uint64, np.bool_]
    for kind in kinds:
        numbers = [kind(value) for value in (0, 1, True, False)]
        if kind is not np.bool_:
            info = np.iinfo(kind)
            numbers += [kind(info.min), kind(info.max)]
            numbers += [kind(value % (int(info.max) + 1)) for value in range(_KNOWN_INTEGERS + 8)]
        for value in numbers + numbers:  # the second time, from what was kept
            frame = pack(value)
            assert frame == msgpack.packb(_encode_scalar(value), use_bin_type=True)
            assert_identical(unpack(frame), value)
    # A scalar whose dtype is not its type's own (the other byte order) is not taken for one.
    swapped = np.array([258], dtype=">i8")[0]
    assert unpack(pack(swapped)) == 258 and type(unpack(pack(swapped))) is type(swapped)


def test_nested_tuples_stay_tuples() -> None:
    value = ((), ((1,), [2, (3,)]), {(1, (2, "x")): ((),)})
    assert unpack(pack(value)) == value
    roundtrip(value)


def test_arrays_in_every_layout() -> None:
    base = np.arange(24, dtype=">f8").reshape(2, 3, 4)
    for array in [
        base,
        np.asfortranarray(base),
        base[:, ::2, 1:],
        base.transpose(2, 0, 1),
        np.array(3.5),
        np.zeros((0, 5), dtype="<U3"),
        np.array([["a", "bc"]], dtype="S2"),
        np.array([1 + 2j], dtype=np.complex64),
        np.arange(4).astype("M8[s]"),
    ]:
        roundtrip(array)


def test_object_array_elements_are_encoded_one_by_one() -> None:
    array = np.empty((2, 2), dtype=object, order="F")
    array[0, 0] = (1, np.float32(2))
    array[1, 0] = [np.arange(3)]
    array[0, 1] = None
    array[1, 1] = {"k": CodecTestPoint(1, "p")}
    decoded = roundtrip(array)
    assert type(decoded[0, 0]) is tuple


def test_decoded_arrays_are_writable_and_independent() -> None:
    frame = pack(np.arange(4.0))
    first, second = unpack(frame), unpack(frame)
    first[0] = 99.0
    assert second[0] == 0.0
    assert first.flags.owndata and first.flags.writeable


def test_large_array_roundtrip() -> None:
    array = np.random.default_rng(0).standard_normal((300, 200))  # above the join threshold
    roundtrip(array)
    roundtrip(np.asfortranarray(array))
    roundtrip(array[::3, ::2])
    roundtrip(np.array("x" * 20_000))  # 0-d, 80 kB
    roundtrip(np.ones((400, 50, 2), dtype=">c16").transpose(1, 2, 0))


def test_records_and_messages_nest_anywhere() -> None:
    value = {
        "point": CodecTestPoint(1, "a", (CodecTestPoint(2, "b"),)),
        "message": PingRequest(),
        "specs": [SensorSpec("agent_0", {"type": "Discrete", "n": 2})],
    }
    roundtrip(value)


def test_bytearray_and_memoryview_travel_as_bytes() -> None:
    assert unpack(pack(bytearray(b"ab"))) == b"ab"
    assert type(unpack(pack(memoryview(b"cd")))) is bytes


class _Colour(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (1 + 2j, "complex"),
        (object(), "object"),
        (OrderedDict(a=1), "OrderedDict"),
        (_Colour.RED, "_Colour"),
        (np.ma.masked_array([1, 2]), "MaskedArray"),
        ({"nested": [{"deep": {3.0}}]}, "set"),
    ],
)
def test_unsupported_types_raise_codec_error_naming_the_type(value: Any, type_name: str) -> None:
    with pytest.raises(CodecError, match=type_name):
        pack(value)


def test_arrays_holding_pointers_are_refused() -> None:
    with pytest.raises(CodecError):
        pack(np.zeros(2, dtype=[("a", "O")]))
    with pytest.raises(CodecError):
        pack(np.array(["a"], dtype=np.dtypes.StringDType()))


def test_nesting_beyond_the_limit_raises_codec_error() -> None:
    value: Any = ()
    for _ in range(2000):
        value = (value,)
    with pytest.raises(CodecError):
        pack(value)


@FAST
@given(st.lists(values, max_size=20))
def test_pack_each_gives_the_encodings_one_after_another(items: list[Any]) -> None:
    assert pack_each(items) == b"".join(pack(item) for item in items)


@pytest.mark.parametrize("count", [0, 15, 16, (1 << 16) - 1, 1 << 16])
def test_pack_each_past_each_size_of_msgpacks_array_header(count: int) -> None:
    items = [(index, np.int8(index % 100)) for index in range(count)]
    assert pack_each(items) == b"".join(pack(item) for item in items)


def test_pack_each_raises_the_error_of_a_value_it_cannot_encode() -> None:
    with pytest.raises(CodecError, match="object"):
        pack_each([1, object()])


def test_packing_is_thread_safe() -> None:
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for step in range(200):
                value = {"seed": seed, "step": (step,), "array": np.full(3, seed * 1000 + step)}
                assert_identical(value, unpack(pack(value)))
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors


# -- envelope -----------------------------------------------------------------------------------


def _step_response() -> EnvironmentUpdateResponse:
    return EnvironmentUpdateResponse(
        observations={"agent_0": np.arange(4.0)},
        rewards={"agent_0": 1.0},
        terminated=False,
        truncated=True,
        acting=("agent_0",),
        legal_actions={},
    )


def test_envelope_layout_is_version_id_tag_fields() -> None:
    frame = encode_message(PingRequest(), correlation_id=42)
    assert msgpack.unpackb(frame) == [PROTOCOL_VERSION, 42, "PingRequest", {}]
    assert decode_message(frame) == (42, PingRequest())


def test_message_roundtrip_keeps_correlation_id() -> None:
    message = _step_response()
    correlation_id, decoded = decode_message(encode_message(message, 2**64 - 1))
    assert correlation_id == 2**64 - 1
    assert_identical(message, decoded)
    assert isinstance(decoded, EnvironmentUpdateResponse)
    assert decoded.is_terminal


def test_frames_may_be_any_bytes_like_object() -> None:
    frame = encode_message(_step_response(), 3)
    for view in (bytearray(frame), memoryview(frame)):
        correlation_id, message = decode_message(view)
        assert correlation_id == 3
        assert_identical(_step_response(), message)
    with pytest.raises(MalformedFrame, match="bytes"):
        decode_message("not bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize("correlation_id", [-1, 2**64, 1.0, True, None])
def test_bad_correlation_id_is_refused(correlation_id: Any) -> None:
    with pytest.raises(CodecError, match="correlation_id"):
        encode_message(PingRequest(), correlation_id)


def test_only_messages_can_be_sent() -> None:
    with pytest.raises(CodecError, match="CodecTestPoint"):
        encode_message(CodecTestPoint(1, "a"))  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="dict"):
        encode_message({"not": "a message"})  # type: ignore[arg-type]


def test_unencodable_field_value_raises_codec_error() -> None:
    with pytest.raises(CodecError, match="set"):
        encode_message(EnvironmentStartResponse("env", (SensorSpec("a", {"x": {1}}),), ()))


# -- decode errors: one test per error type -----------------------------------------------------


def _frame(*envelope: Any) -> bytes:
    return msgpack.packb(list(envelope))


def test_frame_too_large_is_refused_before_parsing() -> None:
    frame = encode_message(_step_response())
    with pytest.raises(FrameTooLarge):
        decode_message(frame, max_bytes=len(frame) - 1)
    assert_identical(_step_response(), decode_message(frame, max_bytes=len(frame))[1])
    with pytest.raises(FrameTooLarge):
        decode_message(b"\xc1" * (DEFAULT_MAX_FRAME_BYTES + 1))  # not parsed: not Malformed
    with pytest.raises(FrameTooLarge):
        unpack(pack([1, 2, 3]), max_bytes=2)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\xc1",  # never-used msgpack byte
        encode_message(PingRequest()) + b"\x00",  # trailing bytes
        encode_message(PingRequest())[:-1],  # truncated
        msgpack.packb({"not": "an envelope"}),
        msgpack.packb([]),
        _frame(PROTOCOL_VERSION, 0, "PingRequest"),
        _frame(PROTOCOL_VERSION, 0, "PingRequest", {}, "extra"),
        _frame("1", 0, "PingRequest", {}),
        _frame(PROTOCOL_VERSION, "0", "PingRequest", {}),
        _frame(PROTOCOL_VERSION, -1, "PingRequest", {}),
        _frame(PROTOCOL_VERSION, 0, b"PingRequest", {}),
        _frame(PROTOCOL_VERSION, 0, "PingRequest", []),
        _frame(PROTOCOL_VERSION, 0, "PingRequest", {}, msgpack.ExtType(99, b"")),
        _frame(PROTOCOL_VERSION, 0, "PongResponse", {"uid": msgpack.ExtType(2, b"\x00\x01")}),
        _frame(PROTOCOL_VERSION, 0, "PongResponse", {"uid": msgpack.ExtType(1, b"")}),
        _frame(PROTOCOL_VERSION, 0, "PongResponse", {"uid": [1, msgpack.ExtType(16, b"")]}),
        _frame(PROTOCOL_VERSION, 0, "PongResponse", {"uid": msgpack.ExtType(16, b"")}),
        _frame(PROTOCOL_VERSION, 0, "PongResponse", {"uid": [msgpack.ExtType(16, b"x")]}),
        b"\xdd\xff\xff\xff\xff",  # claims four billion elements
        b"\x91" * 100_000,  # nested far too deep
        b"\x94\x01\x00\xab\xffingRequest\x80",  # tag is not UTF-8
    ],
    ids=lambda frame: frame[:24].hex() or "empty",
)
def test_malformed_frames(frame: bytes) -> None:
    with pytest.raises(MalformedFrame):
        decode_message(frame)


def _array_ext(descr: bytes, shape: tuple[int, ...], data: bytes) -> bytes:
    header = bytes((0, len(shape), len(descr))) + descr + struct.pack(f"<{len(shape)}Q", *shape)
    return msgpack.packb(msgpack.ExtType(2, header + data))


def test_array_payload_must_match_its_header() -> None:
    assert_identical(np.zeros(4), unpack(_array_ext(b"<f8", (4,), bytes(32))))
    for frame in [
        _array_ext(b"<f8", (4,), bytes(24)),  # three elements of data for four
        _array_ext(b"<f8", (4,), bytes(40)),
        _array_ext(b"<f8", (2**40, 2**40), bytes(8)),
        _array_ext(b"|O", (1,), bytes(8)),  # object pointers can never come from a frame
        _array_ext(b"<i4,<f8", (1,), bytes(12)),  # structured dtypes take another route
        _array_ext(b"nonsense", (1,), bytes(8)),
    ]:
        with pytest.raises(MalformedFrame):
            unpack(frame)


def test_huge_numbers_in_odd_places_still_raise_codec_errors() -> None:
    large = 2**1000  # within the limit: let through to the checks of the envelope
    with pytest.raises(ProtocolVersionMismatch):
        decode_message(pack([large, 0, "PingRequest", {}]))
    with pytest.raises(MessageFieldError, match="unknown field"):
        decode_message(pack([PROTOCOL_VERSION, 0, "PingRequest", {large: 1}]))
    with pytest.raises(MalformedFrame, match="correlation id"):
        decode_message(pack([PROTOCOL_VERSION, large, "PingRequest", {}]))


def test_an_integer_beyond_1024_bits_is_neither_sent_nor_decoded() -> None:
    huge = 10**5000  # str() of this raises ValueError in Python; using it costs seconds
    with pytest.raises(CodecError, match="too large to send"):
        pack([PROTOCOL_VERSION, 0, "EnvironmentResetRequest", {"seed": huge}])
    raw = msgpack.ExtType(EXT_BIGINT, huge.to_bytes(huge.bit_length() // 8 + 1, "big", signed=True))
    for place in ([raw, 0, "PingRequest", {}],
                  [PROTOCOL_VERSION, 0, "EnvironmentResetRequest", {"seed": raw}]):
        with pytest.raises(MalformedFrame, match="big integer of"):
            decode_message(msgpack.packb(place))
    assert unpack(pack(-(2**1000))) == -(2**1000)  # a large one still round-trips


def test_protocol_version_mismatch() -> None:
    with pytest.raises(ProtocolVersionMismatch, match=f"version {PROTOCOL_VERSION + 1}"):
        decode_message(_frame(PROTOCOL_VERSION + 1, 0, "PingRequest", {}))
    with pytest.raises(ProtocolVersionMismatch):
        decode_message(_frame(0, 0, "PingRequest", {}, "future layouts may differ"))


def test_unknown_message_type() -> None:
    with pytest.raises(UnknownMessageType, match="NoSuchMessage"):
        decode_message(_frame(PROTOCOL_VERSION, 0, "NoSuchMessage", {}))
    with pytest.raises(UnknownMessageType, match="record"):
        decode_message(_frame(PROTOCOL_VERSION, 0, "SensorSpec", {"uid": "a", "space": {}}))
    nested = [msgpack.ExtType(17, b"NoSuchRecord"), {}]
    with pytest.raises(UnknownMessageType, match="NoSuchRecord"):
        decode_message(_frame(PROTOCOL_VERSION, 0, "PongResponse", {"uid": nested}))


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({}, "missing field 'uid'"),
        ({"uid": "a", "extra": 1}, "unknown field.*'extra'"),
        ({"uid": 3}, r"PongResponse\.uid: expected str, got int"),
        ({"uid": None}, r"PongResponse\.uid"),
    ],
)
def test_message_field_errors_name_the_field(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(MessageFieldError, match=match):
        decode_message(_frame(PROTOCOL_VERSION, 0, "PongResponse", fields))


def test_nested_record_fields_are_validated() -> None:
    spec = [msgpack.ExtType(17, b"SensorSpec"), {"uid": 1, "space": {}}]
    fields = {"environment_uid": "e", "sensors": [spec], "actuators": []}
    with pytest.raises(MessageFieldError, match=r"SensorSpec\.uid"):
        decode_message(_frame(PROTOCOL_VERSION, 0, "EnvironmentStartResponse", fields))


def test_decoded_list_fields_become_tuples() -> None:
    fields = {"run_uid": "r", "killed": ["a", "b"]}
    _, message = decode_message(
        _frame(PROTOCOL_VERSION, 0, "AgentConductorShutdownResponse", fields)
    )
    assert message.killed == ("a", "b")  # type: ignore[attr-defined]


# -- fuzzing: anything at all decodes to a message or raises a CodecError ----------------------


def _decode_or_codec_error(frame: bytes) -> None:
    with contextlib.suppress(CodecError):
        decode_message(frame)
    with contextlib.suppress(CodecError):
        unpack(frame)


def _rich_frame() -> bytes:
    structured = np.zeros(2, dtype=[("a", "<i4"), ("b", ">f8", (2,))])
    objects = np.array([None, (1, "x"), 2**70], dtype=object)
    experience = {
        (1, "k"): [np.arange(6.0).reshape(2, 3), np.float32(1), np.str_("s")],
        "s": structured,
        "o": objects,
        "p": CodecTestPoint(1, "a", (np.bool_(True), -(2**100))),
    }
    return encode_message(MuscleUpdateRequest("muscle", experience), 5)


RICH_FRAME = _rich_frame()


def test_rich_frame_roundtrips() -> None:
    _, message = decode_message(RICH_FRAME)
    assert isinstance(message, MuscleUpdateRequest)
    assert encode_message(message, 5) == RICH_FRAME


def test_every_truncation_of_a_valid_frame_raises_codec_error() -> None:
    for end in range(len(RICH_FRAME)):
        with pytest.raises(CodecError):
            decode_message(RICH_FRAME[:end])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_codec_errors(frame: bytes) -> None:
    _decode_or_codec_error(frame)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(RICH_FRAME) - 1), st.integers(0, 255)), max_size=6))
def test_mutated_frames_only_raise_codec_errors(edits: list[tuple[int, int]]) -> None:
    frame = bytearray(RICH_FRAME)
    for position, byte in edits:
        frame[position] = byte
    _decode_or_codec_error(bytes(frame))


ext_codes = st.sampled_from([1, 2, 3, 16, 17, 18, 19, 20, 0, 99])
hostile_values = st.recursive(
    st.one_of(
        st.none(),
        st.integers(-(2**63), 2**64 - 1),
        st.text(max_size=5),
        st.binary(max_size=30),
        st.builds(msgpack.ExtType, ext_codes, st.binary(max_size=40)),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(-9, 9)), inner, max_size=3),
    ),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(hostile_values)
def test_hostile_msgpack_structures_only_raise_codec_errors(value: Any) -> None:
    """Well-formed msgpack holding our extension codes with arbitrary payloads and positions."""
    try:
        frame = msgpack.packb(value)
    except (ValueError, TypeError):  # e.g. timestamp ext (-1) with a payload msgpack refuses
        return
    _decode_or_codec_error(frame)
    _decode_or_codec_error(msgpack.packb([PROTOCOL_VERSION, 0, "MuscleUpdateRequest", value]))
    fields = {"muscle_uid": "m", "experience": value}
    _decode_or_codec_error(msgpack.packb([PROTOCOL_VERSION, 0, "MuscleUpdateRequest", fields]))


def test_nan_payload_survives_bit_for_bit() -> None:
    value = struct.unpack("<d", b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]
    assert math.isnan(value)
    roundtrip(value)
