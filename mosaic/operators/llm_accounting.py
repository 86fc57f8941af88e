"""Where an LLM operator's actions came from: the model, or a fallback, and why.

The LLM worker puts an ``llm`` field in each ``step`` and ``action_selected`` reply (see
``workers/llm_worker.py``): ``source`` (``model`` or ``fallback``), ``reason`` (``http``,
``timeout``, ``connection``, ``bad_response`` or ``no_action``), ``http_status``, ``error``, the
request's ``prompt_tokens`` and ``completion_tokens``, the ``retries`` it took (HTTP 429, 5xx or
a failed connection tried again), and the ``endpoint``. Any worker that
sends the field in that shape is accounted for the same way. Script mode, Manual mode and
:class:`~mosaic.operators.OperatorMuscle` keep a :class:`FallbackTally` per operator, store each
action's account as metrics (:func:`account_metrics`) and fail an operator whose fallback share
exceeds ``max_fallback_fraction`` (:data:`DEFAULT_MAX_FALLBACK_FRACTION` unless set), checked at
the end of every episode over all its actions so far.

A BDI worker's ``bdi`` account (``source`` ``plan`` or ``fallback``, ``reason`` ``no_action``
or ``cycle_limit``: see :mod:`mosaic.operators.bdi`) is taken by :func:`bdi_account_of` and
kept in a tally of its own (``kind`` ``bdi``), held to the same ``max_fallback_fraction``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_MAX_FALLBACK_FRACTION",
    "FallbackTally",
    "account_metrics",
    "account_of",
    "bdi_account_of",
]

#: A run whose share of fallback actions is above this fails (``max_fallback_fraction``).
DEFAULT_MAX_FALLBACK_FRACTION = 0.5


def account_of(reply: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``llm`` account of a worker reply, or None when it has none (or a malformed one)."""
    account = reply.get("llm")
    if isinstance(account, Mapping) and account.get("source") in ("model", "fallback"):
        return dict(account)
    return None


def bdi_account_of(reply: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``bdi`` account of a worker reply, or None when it has none (or a malformed one)."""
    account = reply.get("bdi")
    if isinstance(account, Mapping) and account.get("source") in ("plan", "fallback"):
        return dict(account)
    return None


def _count(account: Mapping[str, Any], key: str) -> int:
    value = account.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def account_metrics(account: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The account of one action as named values for the ``metrics`` table.

    ``llm.fallback`` (1 or 0), ``llm.prompt_tokens``, ``llm.completion_tokens`` and
    ``llm.retries`` (the requests tried again for this action); ``llm.illegal_replies`` when
    the account has ``illegal_replies`` (the chess worker's answers without a legal move, asked
    again); on a fallback also ``llm.fallback.<reason>``, whose value is the HTTP status for
    ``http`` and 1 otherwise.
    """
    fallback = account.get("source") == "fallback"
    metrics: list[tuple[str, float]] = [
        ("llm.fallback", 1.0 if fallback else 0.0),
        ("llm.prompt_tokens", float(_count(account, "prompt_tokens"))),
        ("llm.completion_tokens", float(_count(account, "completion_tokens"))),
        ("llm.retries", float(_count(account, "retries"))),
    ]
    if "illegal_replies" in account:  # the chess worker's answers that were asked again
        metrics.append(("llm.illegal_replies", float(_count(account, "illegal_replies"))))
    if fallback:
        status = _count(account, "http_status")
        metrics.append((f"llm.fallback.{account.get('reason') or 'unknown'}",
                        float(status) if status else 1.0))
    return metrics


@dataclass
class FallbackTally:
    """The accounts of one operator's actions, added up: its LLM worker's (``kind`` ``llm``)
    or its BDI worker's (``bdi``, which has no tokens, retries or endpoint)."""

    kind: str = "llm"
    actions: int = 0
    fallbacks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None
    endpoint: str | None = None

    def add(self, account: Mapping[str, Any]) -> None:
        """Count one action's account (see :func:`account_of`)."""
        self.actions += 1
        self.prompt_tokens += _count(account, "prompt_tokens")
        self.completion_tokens += _count(account, "completion_tokens")
        self.retries += _count(account, "retries")
        if isinstance(account.get("endpoint"), str):
            self.endpoint = account["endpoint"]
        if account.get("source") != "fallback":
            return
        self.fallbacks += 1
        reason = str(account.get("reason") or "unknown")
        status = _count(account, "http_status")
        self.reasons[f"{reason} {status}" if status else reason] += 1
        if self.first_error is None:
            self.first_error = str(account.get("error") or reason)

    def counts(self) -> dict[str, int]:
        """Actions, fallbacks, tokens and retries, as a telemetry record holds them."""
        return {"actions": self.actions, "fallbacks": self.fallbacks,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "retries": self.retries}

    @property
    def share(self) -> float:
        """Fallbacks per accounted action (0 with none)."""
        return self.fallbacks / self.actions if self.actions else 0.0

    def exceeds(self, max_fraction: float) -> bool:
        """True when the share of fallbacks is above ``max_fraction``."""
        return self.actions > 0 and self.share > max_fraction

    def describe(self) -> str:
        """``3 of 18 actions were fallbacks (http 500: 3)``, with tokens and any retries."""
        text = f"{self.fallbacks} of {self.actions} actions were fallbacks"
        if self.reasons:
            text += " (" + ", ".join(f"{r}: {n}" for r, n in sorted(self.reasons.items())) + ")"
        if self.kind != "llm":
            return text
        text += f"; tokens {self.prompt_tokens} prompt, {self.completion_tokens} completion"
        return text + (f"; {self.retries} retries" if self.retries else "")

    def failure(self, max_fraction: float) -> str:
        """Why an operator whose share :meth:`exceeds` ``max_fraction`` fails: the share, the
        endpoint and the first error."""
        where = f"; endpoint {self.endpoint or 'unknown'}" if self.kind == "llm" else ""
        return (f"{self.fallbacks} of {self.actions} actions ({self.share:.0%}) came from the "
                f"fallback, more than max_fallback_fraction {max_fraction:g}{where}; first "
                f"error: {self.first_error}")
