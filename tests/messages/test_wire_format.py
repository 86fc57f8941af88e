"""The bytes of a frame are pinned: a change to them must come with a new PROTOCOL_VERSION."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from mosaic.messages import EnvironmentUpdateResponse, SensorSpec
from mosaic.messages.codec import PROTOCOL_VERSION, decode_message, encode_message

# A step message that uses every extension the step loop sends: a float32 array, NumPy scalars
# (int64, float64 and bool), a tuple, a 71-bit integer and a nested record. Made by mosaic with
# protocol version 2 (version 1 had no ``infos``); peers of that version read exactly these bytes.
_FRAME_V2 = bytes.fromhex(
    "940207b9456e7669726f6e6d656e74557064617465526573706f6e736587ac6f62736572766174696f6e7382a7"
    "6167656e745f30c71e020002033c6634010000000000000002000000000000000000003f000080bfa76167656e"
    "745f31c70c03033c6938fdffffffffffffffa77265776172647382a76167656e745f30cb3ff0000000000000a7"
    "6167656e745f31cbbfe0000000000000aa7465726d696e61746564c2a97472756e6361746564c3a6616374696e"
    "6793c70010a76167656e745f30a76167656e745f31ad6c6567616c5f616374696f6e7382a76167656e745f3093"
    "c70010c70503037c623101c70901400000000000000000a76167656e745f3192c70a1153656e736f7253706563"
    "82a3756964a76167656e745f31a5737061636581a16e02a5696e666f7381a76167656e745f3082aa69735f7375"
    "6363657373c3a470726f62c70c03033c6638000000000000d03f"
)


def _message() -> EnvironmentUpdateResponse:
    return EnvironmentUpdateResponse(
        observations={"agent_0": np.array([[0.5, -1.0]], dtype=np.float32),
                      "agent_1": np.int64(-3)},
        rewards={"agent_0": 1.0, "agent_1": -0.5},
        terminated=False,
        truncated=True,
        acting=("agent_0", "agent_1"),
        legal_actions={"agent_0": (np.bool_(True), 2**70),
                       "agent_1": SensorSpec("agent_1", {"n": 2})},
        infos={"agent_0": {"is_success": True, "prob": np.float64(0.25)}},
    )


@pytest.mark.skipif(sys.byteorder != "little", reason="the pinned frame holds little-endian data")
def test_a_step_message_encodes_to_the_pinned_bytes_of_its_protocol_version():
    assert PROTOCOL_VERSION == 2, "a new protocol version needs a new pinned frame"
    assert encode_message(_message(), 7) == _FRAME_V2


@pytest.mark.skipif(sys.byteorder != "little", reason="the pinned frame holds little-endian data")
def test_the_pinned_bytes_decode_to_the_same_message():
    correlation_id, decoded = decode_message(_FRAME_V2)
    assert correlation_id == 7
    assert isinstance(decoded, EnvironmentUpdateResponse)
    expected = _message()
    observation = decoded.observations["agent_0"]
    assert observation.dtype == np.float32 and observation.shape == (1, 2)
    np.testing.assert_array_equal(observation, expected.observations["agent_0"])
    assert type(decoded.observations["agent_1"]) is np.int64
    assert decoded.observations["agent_1"] == -3
    assert decoded.rewards == expected.rewards
    assert (decoded.terminated, decoded.truncated, decoded.acting) == (False, True,
                                                                        ("agent_0", "agent_1"))
    flag, big = decoded.legal_actions["agent_0"]
    assert type(flag) is np.bool_ and flag and big == 2**70
    assert decoded.legal_actions["agent_1"] == SensorSpec("agent_1", {"n": 2})
    info = decoded.infos["agent_0"]
    assert info == {"is_success": True, "prob": 0.25} and type(info["prob"]) is np.float64
