"""The log limiter: a flood of one event becomes a few lines and a count, never a flood."""

from __future__ import annotations

import logging

import pytest

from mosaic.core.log_limit import MAX_KINDS, OTHER, LogLimiter


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def limited(caplog):
    clock = Clock()
    logger = logging.getLogger("tests.log_limit")
    limiter = LogLimiter(logger, "srv", "bad things", burst=3, window=60.0, clock=clock)
    caplog.set_level(logging.ERROR, logger="tests.log_limit")
    return limiter, clock, caplog


def summaries(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "more bad things" in r.getMessage()]


def test_the_first_of_each_kind_pass_and_the_rest_are_counted(limited):
    limiter, clock, caplog = limited
    assert [limiter.allow("A") for _ in range(5)] == [True] * 3 + [False] * 2
    assert [limiter.allow("B") for _ in range(4)] == [True] * 3 + [False]
    assert limiter.held == 3
    limiter.flush()  # the window is not over: nothing yet
    assert summaries(caplog) == []
    clock.now += 60
    limiter.flush()
    assert summaries(caplog) == ["srv: 3 more bad things in the last 60 s, not logged one by one "
                                 "(A: 2, B: 1)"]
    assert limiter.held == 0
    assert limiter.allow("A")  # a new window lets the first ones through again


def test_the_next_event_after_the_window_summarises_the_last(limited):
    limiter, clock, caplog = limited
    for _ in range(10):
        limiter.allow("A")
    clock.now += 61
    assert limiter.allow("A")
    [summary] = summaries(caplog)
    assert "7 more bad things in the last 61 s" in summary


def test_a_forced_flush_summarises_at_once_and_a_quiet_one_logs_nothing(limited):
    limiter, _clock, caplog = limited
    limiter.flush(force=True)
    for _ in range(4):
        limiter.allow("A")
    limiter.flush(force=True)
    limiter.flush(force=True)
    assert len(summaries(caplog)) == 1


def test_kinds_beyond_the_limit_share_one_count(limited):
    limiter, _clock, caplog = limited
    for index in range(MAX_KINDS + 100):
        for _ in range(5):
            limiter.allow(f"kind-{index}")
    # MAX_KINDS kinds and OTHER get their burst; everything else is held under at most them.
    assert limiter.held == (MAX_KINDS + 100) * 5 - (MAX_KINDS + 1) * 3
    limiter.flush(force=True)
    [summary] = summaries(caplog)
    assert f"{OTHER}: " in summary
    assert summary.count(": ") == MAX_KINDS + 2  # one per kind, and the name
