"""Retrying a failed request: which failures are worth another try, how long to wait between
tries, and when to give up.

A failure is retried when the server was busy or broken (HTTP 429 or 5xx) or could not be reached
(``connection``: refused, reset, unreachable, the exchange broke off). A timeout is not: each try
may run until the deadline, so a timeout means the time is spent. Other statuses (400, 401, 404,
...) would come back the same and are not retried either.

The *n*-th retry waits ``backoff * 2**(n - 1)`` seconds (at most :data:`MAX_BACKOFF_S`) times a
random factor from 0.5 to 1 drawn from the caller's generator, so a seeded worker waits the same
in every run, or the ``Retry-After`` the answer gave. Everything, waits included, ends by the
deadline ``timeout`` seconds after the first try started: a retry is made only when at least
:data:`MIN_ATTEMPT_SHARE` of ``timeout`` is left after its wait, and each try gets the time that
is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from workers._bounded_http import RequestFailed

__all__ = ["MAX_BACKOFF_S", "MIN_ATTEMPT_SHARE", "Retry", "RetryPolicy", "is_retryable",
           "with_retries"]

T = TypeVar("T")

#: The longest computed wait between two tries (a ``Retry-After`` may ask for more).
MAX_BACKOFF_S = 8.0
#: A retry needs at least this share of the timeout left after its wait.
MIN_ATTEMPT_SHARE = 0.1


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``max_retries`` retries after the first try; the first waits about ``backoff``
    seconds, each next one twice as long (see the module docstring)."""

    max_retries: int = 2
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {self.max_retries}")
        if not self.backoff >= 0:
            raise ValueError(f"the retry backoff must be >= 0 seconds; got {self.backoff}")

    def wait(self, retry: int, failure: RequestFailed, rng: np.random.Generator) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first) after ``failure``."""
        if failure.retry_after is not None:
            return failure.retry_after
        jitter = 0.5 + 0.5 * float(rng.random())
        return min(MAX_BACKOFF_S, self.backoff * 2.0 ** (retry - 1)) * jitter


@dataclass(frozen=True)
class Retry:
    """One retry about to be made: its ``number`` (1 for the first) of ``of``, the ``wait``
    before it, whether that wait is the server's ``Retry-After``, and the ``failure`` it
    retries."""

    number: int
    of: int
    wait: float
    retry_after: bool
    failure: RequestFailed


def is_retryable(failure: RequestFailed) -> bool:
    """True for HTTP 429 and 5xx and for connection failures."""
    if failure.reason == "http":
        return failure.status is not None and (failure.status == 429 or 500 <= failure.status < 600)
    return failure.reason == "connection"


def with_retries(
    attempt: Callable[[float], T],
    *,
    timeout: float,
    policy: RetryPolicy,
    rng: np.random.Generator,
    on_retry: Callable[[Retry], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``attempt(seconds_left)``'s result, retried as :class:`RetryPolicy` says.

    ``on_retry`` hears of each retry before its wait. Raises the last :class:`RequestFailed`,
    its message saying how many retries came before it and why no other was made: a timeout
    reads ``timed out after <timeout> s``, the whole time given.
    """
    deadline = clock() + timeout
    retries = 0
    while True:
        try:
            return attempt(max(0.0, deadline - clock()))
        except RequestFailed as failure:
            if failure.reason == "timeout":
                raise _final(failure, f"request failed: timed out after {timeout:g} s",
                             _after(retries)) from failure
            if not is_retryable(failure):
                raise _final(failure, str(failure), _after(retries)) from failure
            if retries >= policy.max_retries:
                raise _final(failure, str(failure), _after(retries, policy.max_retries)) \
                    from failure
            wait = policy.wait(retries + 1, failure, rng)
            if clock() + wait > deadline - MIN_ATTEMPT_SHARE * timeout:
                asked = (f"its Retry-After of {round(wait, 1):g} s"
                         if failure.retry_after is not None else f"the next wait ({wait:.2g} s)")
                why = (f"{'no further retry' if retries else 'no retry'}: {asked} does not fit "
                       f"in the {timeout:g} s timeout")
                raise _final(failure, str(failure), _after(retries), why) from failure
            retries += 1
            on_retry(Retry(retries, policy.max_retries, wait, failure.retry_after is not None,
                           failure))
            sleep(wait)


def _after(retries: int, allowed: int | None = None) -> str:
    if retries == 0:
        return ""
    text = f"after {retries} {'retry' if retries == 1 else 'retries'}"
    return text + (", none left" if allowed is not None and retries >= allowed else "")


def _final(failure: RequestFailed, message: str, *notes: str) -> RequestFailed:
    told = [note for note in notes if note]
    if told:
        message += f" ({'; '.join(told)})"
    return RequestFailed(failure.reason, message, failure.status, failure.retry_after)
