"""The LLM worker's HTTP client against hostile and flaky endpoints, through the worker as the
launcher runs it (a subprocess speaking the JSON-lines protocol): ``--timeout`` bounds the whole
action, body and retries included, and HTTP 429, 5xx and refused connections are retried with
backoff, counted, and logged. The retry schedule itself is also checked on a fake clock."""

from __future__ import annotations

import itertools
import re
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mosaic.core.errors import ConfigError
from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.driver.handle import OperatorProcessHandle
from mosaic.operators.driver.launcher import OperatorLauncher
from mosaic.operators.evaluation.schema import load_evaluation
from workers._bounded_http import RequestFailed, retry_after_seconds
from workers._retry import Retry, RetryPolicy, with_retries

from . import worker
from .llm_server import LLMTestServer, Reply, SilentServer, refused_port

pytestmark = pytest.mark.timeout(30)

#: ``--timeout`` of the workers here, and the most a step may take beyond it.
TIMEOUT = 3.0
SLACK = 1.0


def llm(base_url: str, *args: str) -> list[str]:
    return worker("llm_worker", "--base-url", base_url, "--model", "m", "--fallback",
                  "first-legal", "--timeout", f"{TIMEOUT:g}", *args)


def started(start: Callable[..., OperatorProcessHandle], argv: list[str],
            operator_id: str = "w") -> OperatorProcessHandle:
    handle = start(argv, operator_id)
    handle.ping(timeout=30)  # imported and serving: the steps below time the request alone
    return handle


def act(handle: OperatorProcessHandle) -> tuple[dict[str, Any], float]:
    """One action among [2, 3] and its wall time, as the driver sees it."""
    began = time.monotonic()
    reply = handle.select_action(0, legal_actions=[2, 3], timeout=30)
    return reply, time.monotonic() - began


def stderr_with(handle: OperatorProcessHandle, *texts: str, timeout: float = 5.0) -> str:
    """The worker's stderr once it holds every one of ``texts`` (it is read in a thread)."""
    deadline = time.monotonic() + timeout
    while True:
        tail = handle.stderr_tail()
        if all(text in tail for text in texts):
            return tail
        assert time.monotonic() < deadline, f"the worker never logged {texts!r}:\n{tail}"
        time.sleep(0.02)


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(default=Reply("I choose 3")) as s:
        yield s


# -- hostile endpoints: the whole exchange ends by --timeout -----------------------------------


HOSTILE: dict[str, Callable[[], Any]] = {
    # Status line and headers at once, then the body a byte every 2 s (about 50 bytes): each
    # read is quick, so only a bound on the whole exchange ends it.
    "body-trickle": lambda: LLMTestServer(default=Reply("2", body_trickle=2.0)),
    "stall-after-headers": lambda: LLMTestServer(default=Reply("2", stall=True)),
    "trickle-from-status-line": lambda: LLMTestServer(default=Reply("2", trickle=1.0)),
    "accepts-never-answers": SilentServer,
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_endpoint_is_cut_off_at_the_timeout(start: Callable, kind: str) -> None:
    with HOSTILE[kind]() as hostile:
        handle = started(start, llm(hostile.base_url))
        reply, took = act(handle)
    assert TIMEOUT - 0.1 <= took <= TIMEOUT + SLACK, f"{kind}: the step took {took:.2f} s"
    account = reply["llm"]
    assert reply["action"] == 2  # first-legal
    assert (account["source"], account["reason"], account["retries"]) == ("fallback", "timeout", 0)
    assert account["error"] == f"request failed: timed out after {TIMEOUT:g} s"
    log = stderr_with(handle, "LLM call failed (timeout), using the first-legal fallback: "
                              f"request failed: timed out after {TIMEOUT:g} s")
    assert "Traceback" not in log


def test_the_next_action_after_a_cut_off_request_comes_from_the_model(
    start: Callable, server: LLMTestServer,
) -> None:
    server.add(Reply("2", stall=True))
    handle = started(start, llm(server.base_url))
    first, took = act(handle)
    assert first["llm"]["reason"] == "timeout" and took <= TIMEOUT + SLACK
    second, took = act(handle)
    assert (second["action"], second["llm"]["source"]) == (3, "model")
    assert took <= TIMEOUT + SLACK  # a fresh exchange, not one waiting on the cut one


def test_sigterm_during_a_stalled_request_exits_0_promptly(
    start: Callable, server: LLMTestServer,
) -> None:
    server.default = Reply("2", stall=True)
    handle = started(start, llm(server.base_url, "--timeout", "30"))
    handle.send_select_action(0, legal_actions=[2, 3])
    deadline = time.monotonic() + 10
    while not server.requests:
        assert time.monotonic() < deadline, "the worker never sent its request"
        time.sleep(0.02)
    time.sleep(0.2)  # in the body's wait
    began = time.monotonic()
    handle.process.send_signal(signal.SIGTERM)
    assert handle.process.wait(timeout=5) == 0
    assert time.monotonic() - began < 2.0
    assert "Traceback" not in stderr_with(handle, "SIGTERM: exiting")


# -- retries ------------------------------------------------------------------------------------


def test_refused_connections_are_retried_then_the_fallback_is_played(start: Callable) -> None:
    handle = started(start, llm(f"http://127.0.0.1:{refused_port()}/v1",
                                "--retry-backoff", "0.2"))
    reply, took = act(handle)
    account = reply["llm"]
    assert (account["source"], account["reason"], account["retries"]) == (
        "fallback", "connection", 2)
    assert reply["tokens"]["requests"] == 3
    assert "ConnectError" in account["error"] and "ConnectionRefusedError" in account["error"]
    assert account["error"].endswith("(after 2 retries, none left)")
    # The waits (0.1-0.2 s and 0.2-0.4 s) are in the log; the bound is the step's deadline, which
    # holds on a loaded machine too.
    assert took <= TIMEOUT + SLACK
    log = stderr_with(handle, "LLM request failed (connection), retry 1 of 2 in ",
                      "LLM call failed (connection), using the first-legal fallback")
    assert "retry 2 of 2" not in log  # the second retry is at debug level
    assert "Traceback" not in log


def test_a_retry_that_would_not_fit_in_the_timeout_is_not_made(start: Callable) -> None:
    handle = started(start, llm(f"http://127.0.0.1:{refused_port()}/v1",
                                "--retry-backoff", "10"))
    reply, took = act(handle)
    account = reply["llm"]
    assert (account["reason"], account["retries"]) == ("connection", 0)
    assert took < TIMEOUT  # the 10 s wait was not begun
    assert re.search(r"\(no retry: the next wait \([\d.]+ s\) does not fit in the 3 s timeout\)$",
                     account["error"]), account["error"]
    assert "Traceback" not in stderr_with(handle, "LLM call failed (connection)")


@pytest.mark.parametrize("retry_after", [None, "1"])
def test_429_then_200_is_one_retry_and_the_model_answers(
    start: Callable, server: LLMTestServer, retry_after: str | None,
) -> None:
    server.add(Reply("slow down", status=429, retry_after=retry_after))
    handle = started(start, llm(server.base_url, "--retry-backoff", "0.2"))
    reply, took = act(handle)
    account = reply["llm"]
    assert reply["action"] == 3
    assert (account["source"], account["reason"], account["retries"]) == ("model", None, 1)
    assert reply["tokens"]["requests"] == 2 and len(server.requests) == 2
    how = "backoff" if retry_after is None else "Retry-After"
    log = stderr_with(handle, "LLM request failed (http 429), retry 1 of 2 in ",
                      f"({how}): HTTP 429 Too Many Requests")
    if retry_after is None:
        assert took <= TIMEOUT + SLACK  # a wait of 0.1 to 0.2 s, as the log says
    else:
        assert "retry 1 of 2 in 1.00 s (Retry-After)" in log
        assert 1.0 <= took <= TIMEOUT + SLACK  # the server's second, honoured
    assert "Traceback" not in log and "LLM call failed" not in log


def test_a_retry_after_past_the_deadline_falls_back_at_once(
    start: Callable, server: LLMTestServer,
) -> None:
    server.add(Reply("slow down", status=429, retry_after="30"))
    handle = started(start, llm(server.base_url))
    reply, took = act(handle)
    account = reply["llm"]
    assert (account["source"], account["reason"], account["http_status"], account["retries"]) == (
        "fallback", "http", 429, 0)
    assert account["error"].endswith(
        "(no retry: its Retry-After of 30 s does not fit in the 3 s timeout)")
    assert took < 1.0 and len(server.requests) == 1
    assert "Traceback" not in stderr_with(handle, "LLM call failed (http)")


def test_500_twice_then_200_is_two_retries(start: Callable, server: LLMTestServer) -> None:
    server.add(Reply("on fire", status=500), Reply("still on fire", status=503))
    handle = started(start, llm(server.base_url, "--retry-backoff", "0.2"))
    reply, took = act(handle)
    account = reply["llm"]
    assert (reply["action"], account["source"], account["retries"]) == (3, "model", 2)
    assert reply["tokens"]["requests"] == 3 and took < 1.5
    log = stderr_with(handle, "LLM request failed (http 500), retry 1 of 2",
                      "LLM request failed (http 503), retry 2 of 2")
    assert "Traceback" not in log


ON_FIRE = 'HTTP 500 Internal Server Error: {"error": {"message": "on fire"}}'


def test_when_the_retries_run_out_the_fallback_says_so(
    start: Callable, server: LLMTestServer,
) -> None:
    server.default = Reply("on fire", status=500)
    handle = started(start, llm(server.base_url, "--retry-backoff", "0.2", "--max-retries", "3"))
    reply, took = act(handle)
    account = reply["llm"]
    assert (account["source"], account["reason"], account["http_status"], account["retries"]) == (
        "fallback", "http", 500, 3)
    assert account["error"] == f"{ON_FIRE} (after 3 retries, none left)"
    assert len(server.requests) == 4 and took <= TIMEOUT + SLACK
    log = stderr_with(handle, "LLM call failed (http), using the first-legal fallback: HTTP 500")
    assert "Traceback" not in log
    # No retries at all with --max-retries 0.
    server.requests.clear()
    handle = started(start, llm(server.base_url, "--max-retries", "0"), "none")
    reply, _ = act(handle)
    assert reply["llm"]["retries"] == 0 and len(server.requests) == 1
    assert reply["llm"]["error"] == ON_FIRE


def test_a_4xx_other_than_429_is_not_retried(start: Callable, server: LLMTestServer) -> None:
    server.add(Reply("who are you", status=401))
    handle = started(start, llm(server.base_url))
    reply, _ = act(handle)
    assert (reply["llm"]["http_status"], reply["llm"]["retries"]) == (401, 0)
    assert len(server.requests) == 1


def test_the_jitter_comes_from_the_operator_seed(start: Callable, server: LLMTestServer) -> None:
    server.default = Reply("on fire", status=500)

    def waits(seed: int, operator_id: str) -> list[str]:
        handle = started(start, llm(server.base_url, "--retry-backoff", "0.1", "--seed",
                                    str(seed), "--log-level", "DEBUG"), operator_id)
        for _ in range(2):
            act(handle)
        log = stderr_with(handle, "LLM call failed (http)")
        found = re.findall(r"retry \d of 2 in ([\d.]+) s \(backoff\)", log)
        assert len(found) == 4, log
        return found

    first, again, other = waits(7, "a"), waits(7, "b"), waits(8, "c")
    assert first == again and first != other


# -- settings and proxies, through the launcher ----------------------------------------------


def launch_llm(server: LLMTestServer, launcher: OperatorLauncher | None = None,
               **settings: Any) -> OperatorProcessHandle:
    config = OperatorConfig.single_agent(
        "llm_r", "llm", "llm_worker", "LLM", "gymnasium", "CartPole-v1",
        {"base_url": server.base_url, "model": "m", "timeout": TIMEOUT, **settings})
    return (launcher or OperatorLauncher()).launch(config)


def test_the_retry_settings_reach_the_worker(server: LLMTestServer) -> None:
    server.default = Reply("on fire", status=500)
    with launch_llm(server, max_retries=1, retry_backoff=0.1, fallback="first-legal") as handle:
        handle.reset(0)
        step = handle.step(timeout=30)[0]
    assert (step["llm"]["reason"], step["llm"]["retries"]) == ("http", 1)
    assert len(server.requests) == 2


def test_bad_retry_settings_are_refused_where_they_are_written(tmp_path: Path) -> None:
    path = tmp_path / "e.yml"
    path.write_text("uid: e\noperators:\n  - id: llm\n    type: llm\n    env: CartPole-v1\n"
                    "    settings:\n      base_url: http://127.0.0.1:8000/v1\n      model: m\n"
                    "      max_retries: -1\n      retry_backoff: -2\nseeds: [1]\n")
    with pytest.raises(ConfigError) as caught:
        load_evaluation(path)
    where = {problem.location: problem.message for problem in caught.value.problems}
    assert set(where) == {"operators[0].settings.max_retries",
                          "operators[0].settings.retry_backoff"}, where
    assert "a whole number >= 0" in where["operators[0].settings.max_retries"]


def test_the_proxy_variables_are_honoured_when_kept(server: LLMTestServer) -> None:
    server.default = Reply("1")  # CartPole: 0 or 1
    # The loopback server is the proxy: a request for llm.invalid reaches it only through the
    # proxy (llm.invalid resolves nowhere).
    proxy = server.base_url.removesuffix("/v1")
    launcher = OperatorLauncher(extra_env={"HTTP_PROXY": proxy, "http_proxy": proxy,
                                           "NO_PROXY": "", "no_proxy": ""})
    config = OperatorConfig.single_agent(
        "llm_p", "llm", "llm_worker", "LLM", "gymnasium", "CartPole-v1",
        {"base_url": "http://llm.invalid/v1", "model": "m", "timeout": TIMEOUT,
         "keep_proxy_env": True})
    with launcher.launch(config) as handle:
        handle.reset(0)
        step = handle.step(timeout=30)[0]
    assert step["llm"]["source"] == "model", step.get("llm_error")
    assert server.headers[-1]["Host"] == "llm.invalid"


# -- the schedule, on a fake clock -------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def failing(*failures: RequestFailed, took: float = 0.0, fake: FakeTime
            ) -> tuple[Callable[[float], str], list[float]]:
    """An attempt that raises ``failures`` in turn (each after ``took`` seconds), then
    answers ``ok``; and the list of the seconds each try was given."""
    given: list[float] = []
    queue = list(failures)

    def attempt(seconds_left: float) -> str:
        given.append(seconds_left)
        fake.now += took
        if queue:
            raise queue.pop(0)
        return "ok"

    return attempt, given


def http(status: int, retry_after: float | None = None) -> RequestFailed:
    return RequestFailed("http", f"HTTP {status}", status, retry_after)


def run(attempt: Callable[[float], str], fake: FakeTime, timeout: float = 10.0,
        policy: RetryPolicy | None = None, seed: int = 0) -> tuple[str, list[Retry]]:
    heard: list[Retry] = []
    result = with_retries(attempt, timeout=timeout, policy=policy or RetryPolicy(),
                          rng=np.random.default_rng(seed), on_retry=heard.append,
                          clock=fake.clock, sleep=fake.sleep)
    return result, heard


def test_backoff_doubles_with_jitter_and_each_try_gets_the_time_left() -> None:
    fake = FakeTime()
    attempt, given = failing(http(500), http(502), http(503), took=1.0, fake=fake)
    result, heard = run(attempt, fake, timeout=30, policy=RetryPolicy(3, 1.0))
    assert result == "ok" and [r.number for r in heard] == [1, 2, 3]
    for retry, base in zip(heard, (1.0, 2.0, 4.0), strict=True):
        assert base / 2 <= retry.wait <= base and not retry.retry_after
    assert fake.slept == [r.wait for r in heard]
    assert given[0] == 30 and all(b < a for a, b in itertools.pairwise(given))
    assert given[-1] == pytest.approx(30 - 3 - sum(fake.slept))


def test_retry_after_is_honoured_and_the_deadline_bounds_it() -> None:
    fake = FakeTime()
    attempt, _ = failing(http(429, retry_after=2.5), fake=fake)
    assert run(attempt, fake)[1][0].wait == 2.5
    fake = FakeTime()
    attempt, _ = failing(http(429, retry_after=9.5), fake=fake)  # 9.5 + 1 (a tenth) > 10
    with pytest.raises(RequestFailed) as caught:
        run(attempt, fake)
    assert fake.slept == [] and caught.value.status == 429
    assert "no retry: its Retry-After of 9.5 s does not fit in the 10 s timeout" in str(
        caught.value)


def test_what_is_not_retried() -> None:
    for failure in (http(400), http(404), RequestFailed("timeout", "request failed: slow")):
        fake = FakeTime()
        attempt, given = failing(failure, fake=fake)
        with pytest.raises(RequestFailed) as caught:
            run(attempt, fake, timeout=7)
        assert len(given) == 1 and caught.value.reason == failure.reason
    assert str(caught.value) == "request failed: timed out after 7 s"  # the whole time given


def test_a_timeout_after_retries_says_how_many() -> None:
    fake = FakeTime()
    attempt, _ = failing(RequestFailed("connection", "refused"), RequestFailed("timeout", "t"),
                         fake=fake)
    with pytest.raises(RequestFailed, match=r"^request failed: timed out after 10 s "
                                            r"\(after 1 retry\)$"):
        run(attempt, fake)


def test_the_same_seed_waits_the_same() -> None:
    def waits(seed: int) -> list[float]:
        fake = FakeTime()
        attempt, _ = failing(http(500), http(500), fake=fake)
        return [r.wait for r in run(attempt, fake, seed=seed)[1]]

    assert waits(3) == waits(3) != waits(4)


def test_retry_after_headers_are_read_as_seconds_or_dates() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0 and retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds("-3") == 0.0
    date = format_datetime(now + timedelta(seconds=12), usegmt=True)
    assert retry_after_seconds(date, now=now.timestamp()) == pytest.approx(12)
    past = format_datetime(now - timedelta(hours=1), usegmt=True)
    assert retry_after_seconds(past, now=now.timestamp()) == 0.0
    for unreadable in (None, "", "soon", "nan", "inf"):
        assert retry_after_seconds(unreadable) is None
