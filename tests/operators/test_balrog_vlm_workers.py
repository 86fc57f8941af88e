"""The BALROG-style worker plays BabyAI through ``mosaic evaluate`` (routed there by the game)
from words alone, against a fake model on loopback that reads them; the VLM worker sends each
observation as a PNG image that decodes to the observation's pixels."""

from __future__ import annotations

import base64
import io
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import minigrid  # noqa: F401  (registers the BabyAI and MiniGrid environments)
import numpy as np
import pytest
from PIL import Image

from mosaic.operators.driver.handle import OperatorProcessHandle
from tests.e2e.cli import run_mosaic
from workers.balrog_worker import describe

from . import worker
from .llm_server import LLMTestServer, Reply

pytestmark = pytest.mark.timeout(90)

GAME = "BabyAI-GoToRedBallNoDists-v0"


def navigator(body: dict[str, Any]) -> Reply:
    """A fake model that walks to the red ball from the sentences alone: straight on until the
    ball is beside or ahead, then turn to it; while it is not seen, along the walls."""
    text = body["messages"][-1]["content"]
    assert "Your mission: go to the red ball" in text
    assert "Actions: turn left, turn right, go forward, pick up, drop, toggle, done" in text
    seen = re.search(r"You see a red ball (.*)", text)
    if seen is None:
        blocked = "You see a wall 1 step forward" in text
        return Reply(f"I cannot see it, so: {'turn left' if blocked else 'go forward'}")
    where = seen.group(1)
    forward = re.search(r"(\d+) steps? forward", where)
    side = re.search(r"\d+ steps? (left|right)", where)
    if forward is None and side is not None:
        return Reply(f"turn {side.group(1)}")
    return Reply("go forward")


def test_the_balrog_worker_walks_to_the_ball_from_words_through_mosaic_evaluate(
        tmp_path: Path, process_tag: str) -> None:
    telemetry = tmp_path / "t.jsonl"
    with LLMTestServer(responder=navigator) as server:
        path = tmp_path / "babyai.yml"
        path.write_text(f"""\
uid: babyai-llm
seeds: [1, 2, 3]
max_steps: 25
operators:
  - id: balrog
    type: llm                     # routed to the BALROG-style worker by the game
    env: "minigrid:{GAME}"
    settings: {{base_url: "{server.base_url}", model: navigator, fallback: noop}}
""")
        result = run_mosaic("evaluate", str(path), "--telemetry", str(telemetry), timeout=80)
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in telemetry.read_text().splitlines()]
    steps = [r for r in records if r.get("kind") == "step"]
    episodes = [r for r in records if r.get("kind") == "episode"]
    assert len(episodes) == 3
    assert all(r["total_reward"] > 0 and r["terminated"] for r in episodes), episodes
    assert len(requests) == len(steps) > 3
    assert {s["llm"]["source"] for s in steps} == {"model"}  # every action was the model's
    system = requests[0]["messages"][0]["content"]
    assert f"navigation game in a grid world (minigrid:{GAME})" in system


def test_the_view_is_told_relative_to_the_agent() -> None:
    env = gym.make(GAME)
    try:
        observation, _ = env.reset(seed=0)  # the agent faces west; the ball is north-west
        lines = describe(observation)
    finally:
        env.close()
    assert lines == ["You see a red ball 3 steps right and 4 steps forward",
                     "You see a wall 2 steps left", "You see a wall 6 steps forward"]
    carrying = np.zeros((7, 7, 3), dtype=np.uint8)
    carrying[3, 6] = (5, 4, 0)  # a yellow key where the agent stands: it carries it
    carrying[3, 2] = (4, 1, 1)  # a closed green door 4 steps ahead
    assert describe({"image": carrying}) == ["You see a closed green door 4 steps forward",
                                             "You carry a yellow key"]


def test_the_vlm_worker_sends_the_image_and_reads_a_named_action(
        start: Callable[..., OperatorProcessHandle]) -> None:
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, size=(12, 9, 3), dtype=np.uint8)
    with LLMTestServer(default=Reply("I would rather jump")) as server:
        handle = start(worker("vlm_worker", "--base-url", server.base_url, "--model", "eyes",
                              "--action-names", "stay,jump,duck", "--fallback", "first-legal"))
        reply = handle.select_action({"pixels": image, "mission": "dodge"},
                                     legal_actions=[0, 1, 2], timeout=30)
        assert reply["action"] == 1 and reply["llm"]["source"] == "model"
        [body] = server.requests
        text, picture = body["messages"][-1]["content"]
        assert text["type"] == "text" and "Your mission: dodge" in text["text"]
        assert "0 (stay), 1 (jump), 2 (duck)" in text["text"]
        url = picture["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert np.array_equal(np.asarray(decoded.convert("RGB")), image)

        with pytest.raises(Exception, match="has no image under image, pixels, rgb"):
            handle.select_action({"position": [1, 2]}, legal_actions=[0, 1], timeout=30)


def test_a_vlm_worker_without_pillow_is_refused_where_the_file_is_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mosaic.core.errors import ConfigError
    from mosaic.operators.evaluation.schema import parse_evaluation

    monkeypatch.setitem(sys.modules, "PIL", None)  # what an install without Pillow imports
    with pytest.raises(ConfigError) as caught:
        parse_evaluation({"uid": "x", "seeds": [1], "operators": [
            {"id": "a", "type": "llm", "env": "CartPole-v1",
             "settings": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "worker": "vlm"}}]})
    assert ("operators[0].settings.worker: the vlm LLM worker needs PIL, which is not "
            "installed: pip install 'mosaic[images]'") in str(caught.value)
