"""Direct calls into a component in a thread: its answers, its failures, its own loop, and the
watchdog that gives up on a call that overruns."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mosaic.core.errors import (
    CallAbandoned,
    ComponentDied,
    RemoteError,
    RequestTimeout,
    RunCancelled,
)
from mosaic.messages import (
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    PingRequest,
    PongResponse,
)
from mosaic.runtime import watchdog as watchdog_module
from mosaic.runtime.component import Component, handles
from mosaic.runtime.direct import DirectClient
from mosaic.runtime.placement import ThreadPlaced
from mosaic.runtime.watchdog import CHECK_INTERVAL_S, GRACE_S, Watchdog
from mosaic.transport import RequestClient

pytestmark = pytest.mark.timeout(60)


class Probe(Component):
    """Answers EnvironmentUpdateRequest as told by ``mode``, and PingRequest (over its socket)."""

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self.mode = "answer"
        self.kept = np.zeros(3)
        self.threads: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.log: list[str] = []

    @handles(EnvironmentUpdateRequest)
    def _update(self, request: EnvironmentUpdateRequest) -> EnvironmentUpdateResponse:
        self.threads.append(threading.get_ident())
        self.log.append("update in")
        if self.mode == "raise":
            raise RuntimeError("the probe broke")
        if self.mode == "exit":
            raise SystemExit(3)
        if self.mode == "hold":
            self.entered.set()
            self.release.wait(20)
        request.actions["a"][...] = -1  # writes into what it was handed
        self.log.append("update out")
        return EnvironmentUpdateResponse({"a": self.kept}, {"a": 1.0}, False, False, ("a",), {})

    @handles(PingRequest)
    def _ping(self, request: PingRequest) -> PongResponse:
        self.threads.append(threading.get_ident())
        self.log.append("ping")
        return PongResponse(self.uid)


class GivenUp:
    """Collects what a watchdog gave up with."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.done = threading.Event()

    def __call__(self, error: BaseException) -> None:
        self.errors.append(error)
        self.done.set()


@pytest.fixture
def probe(request: pytest.FixtureRequest) -> Iterator[tuple[Probe, ThreadPlaced, DirectClient,
                                                          GivenUp]]:
    component = Probe("probe")
    placed = ThreadPlaced(component, "probe", f"inproc://direct-{id(request)}")
    given_up = GivenUp()
    watchdog = Watchdog("caller", given_up)
    client = DirectClient(placed, {EnvironmentUpdateRequest}, watchdog, peer="the probe",
                          sender="caller")
    yield component, placed, client, given_up
    component.release.set()
    client.close()
    watchdog.close()
    placed.stop(5)


def update(client: DirectClient, timeout: float = 5.0, check: Any = None,
           actions: dict[str, Any] | None = None) -> EnvironmentUpdateResponse:
    return client.request(EnvironmentUpdateRequest(actions or {"a": np.ones(2)}),
                          EnvironmentUpdateResponse, timeout, check)


def test_a_direct_request_runs_in_the_callers_thread_and_others_go_over_the_socket(probe):
    component, _, client, _ = probe
    update(client)
    client.request(PingRequest(), PongResponse, 5)
    assert component.threads[0] == threading.get_ident()
    assert component.threads[1] != threading.get_ident()  # the component's own thread


def test_sent_then_received_direct_requests_run_when_received_in_turn(probe):
    component, _, client, _ = probe
    first = client.send(EnvironmentUpdateRequest({"a": np.ones(2)}))
    second = client.send(EnvironmentUpdateRequest({"a": np.ones(2)}))
    assert component.log == []
    client.receive(second, 5, EnvironmentUpdateResponse)
    client.receive(first, 5, EnvironmentUpdateResponse)
    assert component.log == ["update in", "update out"] * 2


def test_neither_side_can_change_what_the_other_keeps(probe):
    component, _, client, _ = probe
    actions = {"a": np.ones(2)}
    answer = update(client, actions=actions)
    assert (actions["a"] == 1).all()  # the component wrote -1 into its copy only
    component.kept[...] = 7  # the component changes what it answered with, afterwards
    assert (answer.observations["a"] == 0).all()


def test_a_handler_that_raises_is_answered_as_over_the_socket_and_the_component_carries_on(
        probe, caplog):
    component, placed, client, _ = probe
    component.mode = "raise"
    with caplog.at_level(logging.ERROR), \
            pytest.raises(RemoteError, match="the probe: RuntimeError: the probe broke"):
        update(client)
    assert "EnvironmentUpdateRequest failed: RuntimeError: the probe broke" in caplog.text
    component.mode = "answer"
    update(client)
    assert placed.alive()


def test_a_handler_that_exits_ends_the_components_thread_and_names_it(probe):
    component, placed, client, _ = probe
    component.mode = "exit"
    with pytest.raises(ComponentDied, match=r"probe 'probe' \(thread\) died: SystemExit: 3"):
        update(client)
    assert placed.wait(5)
    assert placed.exit_cause() == "SystemExit: 3"
    assert not placed.ended_in_order()
    component.mode = "answer"
    with pytest.raises(ComponentDied, match="SystemExit: 3"):
        update(client)
    assert len(component.threads) == 1  # an ended component gets no call


def test_a_direct_call_and_the_components_own_loop_take_turns(probe):
    """A message on the component's socket waits while a direct call is inside the component."""
    component, placed, client, _ = probe
    component.mode = "hold"
    caller = threading.Thread(target=update, args=(client,))
    caller.start()
    assert component.entered.wait(5)
    other = RequestClient(placed.endpoint, peer="probe")
    try:
        pinged = other.send(PingRequest())
        time.sleep(0.3)
        assert component.log == ["update in"]  # the ping waits for the call
        component.release.set()
        other.receive(pinged, 5, PongResponse)
    finally:
        other.close()
    caller.join(5)
    assert component.log == ["update in", "update out", "ping"]


def test_a_call_past_its_timeout_is_given_up_and_comes_back_abandoned(probe):
    component, _, client, given_up = probe
    component.mode = "hold"
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            update(client, timeout=0.3)
        except BaseException as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    started = time.monotonic()
    caller.start()
    assert given_up.done.wait(5)  # given up by the timeout, not left to hang
    assert time.monotonic() - started >= 0.3  # and not before it (a bound a busy machine keeps)
    [error] = given_up.errors
    assert isinstance(error, RequestTimeout)
    assert str(error) == "the probe did not answer within 0.3 s"
    assert caller.is_alive()  # a direct call cannot be interrupted
    component.release.set()
    caller.join(5)
    assert isinstance(outcome[0], CallAbandoned)
    with pytest.raises(CallAbandoned):
        update(client)  # the caller was given up on: it makes no more calls


def test_a_call_whose_check_raises_is_given_up_with_that_error(probe):
    component, _, client, given_up = probe
    component.mode = "hold"
    cancelled = threading.Event()

    def check() -> None:
        if cancelled.is_set():
            raise RunCancelled("cancelled")

    outcome: list[BaseException] = []

    def call() -> None:
        try:
            update(client, 60, check)
        except BaseException as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    assert component.entered.wait(5)
    cancelled.set()
    assert given_up.done.wait(10)  # about GRACE_S plus a look or two; wide for a busy machine
    assert isinstance(given_up.errors[0], RunCancelled)
    component.release.set()
    caller.join(5)
    assert isinstance(outcome[0], CallAbandoned)


def test_a_call_that_comes_back_soon_after_its_check_raised_is_not_given_up(
        probe, monkeypatch: pytest.MonkeyPatch):
    """A step that is only slow when the run is cancelled ends in order: the watchdog gives it
    GRACE_S to come back, and the caller learns of the cancel by its own ways. (The grace is
    widened here so that "soon" holds while a busy machine leaves the caller's thread waiting.)"""
    monkeypatch.setattr(watchdog_module, "GRACE_S", 5.0)
    component, _, client, given_up = probe
    component.mode = "hold"

    def check() -> None:
        component.release.set()  # the call comes back as soon as its check has raised
        raise RunCancelled("cancelled")

    answer = update(client, 60, check)
    assert (answer.observations["a"] == 0).all()
    time.sleep(GRACE_S + 2 * CHECK_INTERVAL_S)  # the watchdog has looked at it, more than once
    assert not given_up.errors
    update(client)


def test_each_call_gets_a_grace_of_its_own(probe, monkeypatch: pytest.MonkeyPatch):
    """A call whose check raises is given :data:`GRACE_S` from its own first failed check, not
    what is left of an earlier call's: the grace is over only that long after it began."""
    monkeypatch.setattr(watchdog_module, "GRACE_S", 1.5)  # wide: the first call must be back
    component, _, client, given_up = probe
    component.mode = "hold"

    def check_and_release() -> None:
        component.release.set()
        raise RunCancelled("cancelled")

    update(client, 60, check_and_release)  # its grace began: it came back within it
    component.release.clear()
    time.sleep(watchdog_module.GRACE_S + 2 * CHECK_INTERVAL_S)  # that grace is long over

    def check() -> None:
        raise RunCancelled("cancelled")

    outcome: list[BaseException] = []

    def call() -> None:
        try:
            update(client, 60, check)
        except BaseException as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    started = time.monotonic()
    caller.start()
    assert given_up.done.wait(10)
    assert time.monotonic() - started >= watchdog_module.GRACE_S  # a bound a busy machine keeps
    assert isinstance(given_up.errors[0], RunCancelled)
    component.release.set()
    caller.join(5)
    assert isinstance(outcome[0], CallAbandoned)


def test_calls_that_come_back_in_time_are_never_given_up(probe, monkeypatch: pytest.MonkeyPatch):
    """A check that would end any wait is only run on a call older than the check interval:
    a cancelled run's quick steps still end in order. (The grace is widened here, in case a busy
    machine holds one of these calls past the interval.)"""
    monkeypatch.setattr(watchdog_module, "GRACE_S", 5.0)
    _, _, client, given_up = probe

    def check() -> None:
        raise RunCancelled("cancelled")

    deadline = time.monotonic() + 4 * CHECK_INTERVAL_S
    while time.monotonic() < deadline:
        update(client, check=check)
    assert not given_up.errors


def test_a_component_stuck_in_a_call_given_up_on_counts_as_failed_and_is_not_waited_for():
    component = Probe("caller")
    component.mode = "hold"
    placed = ThreadPlaced(component, "orchestration", "inproc://direct-stuck")
    client = RequestClient(placed.endpoint, peer="caller")
    try:
        client.send(EnvironmentUpdateRequest({"a": np.ones(2)}))  # holds its thread
        assert component.entered.wait(5)
        assert placed.failure() is None
        component.stuck = "is held in a call given up on"
        assert placed.failure() == "is held in a call given up on"
        started = time.monotonic()
        assert placed.stop(30) is False
        assert time.monotonic() - started < 5
    finally:
        component.release.set()
        client.close()
        assert placed.wait(5)
