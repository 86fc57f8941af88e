"""Reply matching in both dialects, line by line, without a process (``ReplyRouter``)."""

from __future__ import annotations

from typing import Any

import pytest

from mosaic.operators import dialect as d
from mosaic.operators import protocol as p
from mosaic.operators.driver._routing import ReplyRouter


def step(index: int, *, done: bool = False, **extra: Any) -> dict[str, Any]:
    return {"type": "step", "step_index": index, "action": 0, "reward": 1.0,
            "terminated": done, "truncated": False, "episode_reward": index + 1.0, **extra}


def routed(router: ReplyRouter, line: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    result = router.route(line)
    assert result is not None, f"{line} was taken as unsolicited"
    return result


def test_a_worker_without_ids_is_matched_by_order_and_an_unended_step_owes_nothing_more() -> None:
    router = ReplyRouter()
    router.sent(1, {"cmd": "reset", "seed": 1})
    router.sent(2, {"cmd": "step"})
    router.sent(3, {"cmd": "step"})
    assert router.route({"type": "init", "run_id": "r"}) is None
    ready = {"type": "ready", "run_id": "r", "env_id": "E", "seed": 1, "observation_shape": None}
    assert routed(router, ready)[1] == 1
    assert routed(router, step(1, done=True))[1] == 2
    # No episode end came for step 2: the next line answers step 3, not step 2.
    reply, answers = routed(router, step(1))
    assert answers == 3 and reply["step_index"] == 0  # counted from 1, read from 0
    assert router.step_base == 1 and not router.echoes_ids


def test_a_worker_that_echoes_ids_answers_nothing_with_an_id_less_line_but_an_error() -> None:
    router = ReplyRouter()
    router.sent(1, {"cmd": "ping"})
    assert routed(router, {"type": "pong", "id": 1}) == ({"type": "pong", "id": 1}, 1)
    router.sent(2, {"cmd": "ping"})
    assert router.route({"type": "pong"}) is None
    assert router.unsolicited[-1] == {"type": "pong"}
    router.sent_raw(b"{not json\n")
    reply, answers = routed(router, {"type": "error", "message": "bad"})
    assert reply["type"] == "error" and answers is not None and answers < 0  # the raw line


def test_mosaic_episode_ends_and_agent_replies_are_read_in_mosaics_names() -> None:
    router = ReplyRouter()
    router.sent(None, {"cmd": "init_agent", "player_id": "player_1"})
    reply, _ = routed(router, {"type": "agent_initialized"})
    assert reply == {"type": "agent_ready", "player_id": "player_1"}
    assert router.route({"type": "agent_ready"}) is None  # nothing asked for it
    router.sent(None, {"cmd": "step"})
    router.route(step(0, done=True))
    end, _ = routed(router, {"type": "episode_done", "total_reward": 1.0, "num_steps": 1})
    assert end["type"] == "episode_end" and end["episode_length"] == 1
    assert (end["terminated"], end["truncated"]) == (True, False)  # from the last step
    assert router.end_spellings == {"episode_done"}
    assert d.to_native({"type": "episode_end", "episode_steps": 4, "episode_return": 2.5}) == {
        "type": "episode_end", "episode_steps": 4, "episode_return": 2.5, "episode_length": 4,
        "total_reward": 2.5}


@pytest.mark.parametrize("line", [{"status": "ok"}, {"type": "hello"},
                                  {"type": "step", "action": 1}])
def test_a_line_of_neither_dialect_says_so(line: dict[str, Any]) -> None:
    router = ReplyRouter()
    router.sent(1, {"cmd": "step"})
    with pytest.raises(p.ProtocolError, match="mosaic's operator protocol or MOSAIC's dialect"):
        router.route(line)


def test_the_ready_of_mosaics_human_worker_is_read() -> None:
    """It was refused: "'ready' is missing required field 'env_id'" (the human worker names its
    environment ``task`` and sends no ``observation_shape``)."""
    router = ReplyRouter()
    router.sent(None, {"cmd": "reset", "seed": 4})
    ready = {"type": "ready", "run_id": "r", "env_name": "minigrid",
             "task": "MiniGrid-Empty-8x8-v0", "seed": 4, "action_space": 7,
             "action_labels": ["left"], "episode_index": 0, "step_index": 0}
    reply, _ = routed(router, ready)
    assert reply["env_id"] == "MiniGrid-Empty-8x8-v0" and reply["observation_shape"] is None
    assert reply["action_labels"] == ["left"]  # the worker's own fields stay

