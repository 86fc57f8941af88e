"""LLM accounting against a real LLM worker and the loopback server: every action says whether
the model or the fallback chose it and why, runs with too many fallbacks fail, and ``--timeout``
bounds a whole request."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mosaic.operators.evaluation.schema import load_evaluation
from mosaic.operators.evaluation.script import format_comparison_table, run_script
from mosaic.store import StoreWriter
from tests.e2e.cli import REPO, query

from . import worker
from .llm_server import LLMTestServer, Reply

pytestmark = pytest.mark.timeout(90)

EXAMPLE = REPO / "examples" / "frozenlake_llm.yml"

#: What a broken endpoint sends, the fallback reason the worker gives, and a part of its error.
BROKEN = {
    "garbage": (Reply(raw=b"<html>this is not json</html>"), "bad_response", "not JSON"),
    "http-500": (Reply("server on fire", status=500), "http", "HTTP 500"),
    "no-action": (Reply("I would rather not say."), "no_action", "no legal action"),
}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(default=Reply("I choose 2", prompt_tokens=7, completion_tokens=3)) as s:
        yield s


def evaluation_file(folder: Path, server: LLMTestServer, **overrides: Any) -> Path:
    data: dict[str, Any] = {
        "uid": "llm-eval",
        "operators": [{
            "id": "llm", "type": "llm", "env": "FrozenLake-v1",
            "env_kwargs": {"is_slippery": False},
            "settings": {"base_url": server.base_url, "model": "test-model",
                         "fallback": "first-legal", "timeout": 5},
        }],
        "seeds": [1, 2],
        "max_steps": 4,
        "timeouts": {"step": 20, "reset": 30, "stop": 3},
        "telemetry": "telemetry.jsonl",
    }
    data.update(overrides)
    path = folder / "llm.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- the worker --------------------------------------------------------------------------------


def test_timeout_bounds_the_whole_request_against_a_trickling_server(
    start: Callable, caplog: pytest.LogCaptureFixture,
) -> None:
    # One byte every second: each socket read is quick, so only a bound on the whole request
    # ends it (the answer is about 100 bytes: without it the request would take minutes).
    with LLMTestServer(default=Reply("1", trickle=1.0)) as trickle, caplog.at_level(
            logging.DEBUG, logger="mosaic.operators.worker"):
        handle = start(worker("llm_worker", "--base-url", trickle.base_url, "--model", "m",
                              "--timeout", "2", "--fallback", "first-legal"), operator_id="slow")
        began = time.monotonic()
        first = handle.select_action(0, legal_actions=[2, 3], timeout=60)
        second = handle.select_action(0, legal_actions=[2, 3], timeout=60)
        took = time.monotonic() - began
        handle.stop()
    assert took < 30, f"two requests of at most 2 s each took {took:.1f} s"
    for reply in (first, second):
        assert reply["action"] == 2
        account = reply["llm"]
        assert (account["source"], account["reason"]) == ("fallback", "timeout")
        assert "timed out after 2 s" in account["error"] and account["endpoint"].startswith(
            trickle.base_url)
    relayed = [r for r in caplog.records if r.name == "mosaic.operators.worker.slow"
               and "LLM call failed" in r.getMessage()]
    # One warning for the first timeout (the second is at debug level, below the worker's
    # INFO), and the relayed line does not repeat its level.
    assert [r.levelno for r in relayed] == [logging.WARNING]
    assert relayed[0].getMessage().startswith("mosaic.worker.llm: LLM call failed (timeout)")


def test_every_reply_accounts_for_its_action(start: Callable, server: LLMTestServer) -> None:
    server.add(Reply("3", prompt_tokens=11, completion_tokens=1),
               *(broken for broken, _, _ in BROKEN.values()))
    handle = start(worker("llm_worker", "--base-url", server.base_url, "--model", "m",
                          "--fallback", "first-legal", "--max-retries", "0"))  # 1 reply each
    replies = [handle.select_action(0, legal_actions=[1, 2, 3], timeout=30) for _ in range(4)]
    accounts = [reply["llm"] for reply in replies]
    assert [(a["source"], a["reason"], a["http_status"]) for a in accounts] == [
        ("model", None, None), ("fallback", "bad_response", None), ("fallback", "http", 500),
        ("fallback", "no_action", None)]
    assert (accounts[0]["prompt_tokens"], accounts[0]["completion_tokens"]) == (11, 1)
    assert accounts[3]["prompt_tokens"] == 10  # the unparseable answer's tokens were spent too
    assert [r["action"] for r in replies] == [3, 1, 1, 1]
    assert accounts[0]["error"] is None and "llm_error" not in replies[0]


# -- Script mode -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_an_evaluation_of_a_broken_endpoint_fails_and_says_why(
    tmp_path: Path, server: LLMTestServer, kind: str,
) -> None:
    broken, reason, error = BROKEN[kind]
    server.default = broken
    config = load_evaluation(evaluation_file(tmp_path, server))
    with StoreWriter(tmp_path / "store.sqlite") as writer:
        result = run_script(config, telemetry_path=tmp_path / "t.jsonl", store=writer)

    llm = result.operators["llm"]
    assert not result.ok and llm.episodes_done == 1  # failed at the end of its first episode
    failure = llm.failure
    assert failure is not None and failure.cause == "fallbacks"
    assert server.base_url in failure.message and error in failure.message
    assert "4 of 4 actions (100%) came from the fallback" in failure.message
    assert llm.llm is not None and (llm.llm.actions, llm.llm.fallbacks) == (4, 4)

    records = lines(tmp_path / "t.jsonl")
    steps = [r for r in records if r["kind"] == "step"]
    assert len(steps) == 4
    assert {(r["llm"]["source"], r["llm"]["reason"]) for r in steps} == {("fallback", reason)}
    [episode] = [r for r in records if r["kind"] == "episode"]
    # A 500 is tried again twice (the default max_retries) before the fallback.
    retries = 2 * 4 if reason == "http" else 0
    assert episode["llm"] == {"actions": 4, "fallbacks": 4, "prompt_tokens": 10 * (
        reason == "no_action") * 4, "completion_tokens": 2 * (reason == "no_action") * 4,
        "retries": retries}
    [failed] = [r for r in records if r["kind"] == "failure"]
    assert failed["cause"] == "fallbacks"

    table = format_comparison_table(result)
    assert "fallbacks" in table.splitlines()[0] and " 4/4 " in table
    assert f"llm llm: 4 of 4 actions were fallbacks ({reason}" in table

    run_uid = f"{result.run_id}-llm"
    [(status, stored_error)] = query(tmp_path / "store.sqlite",
                                     "SELECT status, error FROM runs WHERE uid = ?", run_uid)
    assert status == "failed" and server.base_url in stored_error
    metrics = query(tmp_path / "store.sqlite",
                    "SELECT m.name, COUNT(*), SUM(m.value) FROM metrics m JOIN runs r "
                    "ON r.id = m.run_id WHERE r.uid = ? GROUP BY m.name", run_uid)
    totals = {name: (count, value) for name, count, value in metrics}
    assert totals["llm.fallback"] == (4, 4.0)
    expected = 500.0 * 4 if reason == "http" else 4.0
    assert totals[f"llm.fallback.{reason}"] == (4, expected)
    assert totals["llm.retries"] == (4, float(retries))


def test_an_evaluation_with_a_good_endpoint_counts_tokens_and_no_fallbacks(
    tmp_path: Path, server: LLMTestServer,
) -> None:
    # One bad answer in eight is within the default max_fallback_fraction of 0.5 (a 400: a 500
    # would be retried).
    server.add(Reply("bad request", status=400))
    config = load_evaluation(evaluation_file(tmp_path, server))
    result = run_script(config, telemetry_path=tmp_path / "t.jsonl")
    assert result.ok
    tally = result.operators["llm"].llm
    assert tally is not None
    assert (tally.actions, tally.fallbacks, tally.prompt_tokens) == (8, 1, 7 * 7)
    assert tally.first_error is not None and "HTTP 400" in tally.first_error
    assert " 1/8 " in format_comparison_table(result)


def test_max_fallback_fraction_is_settable_and_the_cli_exits_non_zero(
    tmp_path: Path, server: LLMTestServer,
) -> None:
    server.add(Reply("no idea"), Reply("no idea"))  # 2 of the 4 actions of the first episode
    tolerant = evaluation_file(tmp_path, server, max_fallback_fraction=0.5)
    assert load_evaluation(tolerant).max_fallback_fraction == 0.5
    assert run_script(load_evaluation(tolerant), telemetry_path=tmp_path / "a.jsonl").ok

    server.add(Reply("no idea"), Reply("no idea"))
    strict = evaluation_file(tmp_path, server, max_fallback_fraction=0.25)
    done = subprocess.run([sys.executable, "-m", "mosaic", "evaluate", str(strict)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "more than max_fallback_fraction 0.25" in done.stdout
    assert server.base_url in done.stdout and "no legal action" in done.stdout
    assert (tmp_path / "telemetry.jsonl").exists()  # relative to the file, not to REPO


def test_a_bad_max_fallback_fraction_is_rejected(tmp_path: Path, server: LLMTestServer) -> None:
    path = evaluation_file(tmp_path, server, max_fallback_fraction=1.5)
    done = subprocess.run([sys.executable, "-m", "mosaic", "evaluate", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "max_fallback_fraction" in done.stderr and "from 0 to 1" in done.stderr


# -- an OperatorMuscle in experiment-start -----------------------------------------------------


def experiment(folder: Path, server: LLMTestServer, **params: Any) -> Path:
    """``examples/frozenlake_llm.yml`` against the loopback server, 2 short episodes."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(episodes=2, max_steps=4)
    muscle = data["agents"][0]["muscle"]["params"]
    muscle["operator"]["settings"].update(base_url=server.base_url, fallback="first-legal")
    muscle.update(timeout=20, **params)
    path = folder / "frozenlake_llm.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def start_experiment(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mosaic", "experiment-start", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=80)


@pytest.mark.parametrize("kind", ["garbage", "http-500"])
def test_the_llm_example_fails_against_a_broken_endpoint(
    tmp_path: Path, server: LLMTestServer, kind: str,
) -> None:
    broken, reason, error = BROKEN[kind]
    server.default = broken
    done = start_experiment(experiment(tmp_path, server))
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output
    assert "came from the fallback, more than max_fallback_fraction 0.5" in output
    assert server.base_url in output and error in output
    # Each failure reason is warned about once, with one level prefix.
    assert output.count("LLM call failed") == 1 and "WARNING mosaic.worker" not in output
    assert "LLM fallbacks: frozenlake-llm" in output and ": 4 of 4 actions" in output
    store = tmp_path / "frozenlake_llm.sqlite"
    [(status, stored)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed" and server.base_url in stored
    totals = dict(query(store, "SELECT name, SUM(value) FROM metrics GROUP BY name"))
    assert totals["llm.fallback"] == 4.0
    assert f"llm.fallback.{reason}" in totals


def test_the_llm_example_finishes_and_reports_no_fallbacks(
    tmp_path: Path, server: LLMTestServer,
) -> None:
    done = start_experiment(experiment(tmp_path, server, max_fallback_fraction=0.2))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": 0 of 8 actions" in done.stdout
    totals = dict(query(tmp_path / "frozenlake_llm.sqlite",
                        "SELECT name, SUM(value) FROM metrics GROUP BY name"))
    assert totals["llm.fallback"] == 0.0 and totals["llm.prompt_tokens"] == 8 * 7
    assert totals["llm.completion_tokens"] == 8 * 3
