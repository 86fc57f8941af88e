"""LLM worker: asks an OpenAI-compatible chat-completions endpoint for each action.

Each action is a ``POST {base_url}/chat/completions`` request (through httpx, see
``workers/_bounded_http.py``) with a system prompt and a user message holding the observation
(as JSON, floats rounded to 4 digits, at most 4000 characters) and the legal actions (with names
from ``--action-names`` when given). ``--timeout`` bounds the whole action, retries included,
connection to last byte: a server that trickles its answer, stalls after its headers or never
answers is cut off on time. A request that got HTTP 429 or 5xx or could not connect is retried
up to ``--max-retries`` times (default 2), after about ``--retry-backoff`` seconds (default 0.5),
doubling each time, with jitter from the worker's seed stream, or after the ``Retry-After`` the
server asked for; a retry that would not fit in ``--timeout`` is not made (see
``workers/_retry.py``). The API key is read from the environment variable named by
``--api-key-env`` (default ``OPENAI_API_KEY``) and sent as a bearer token when set. The standard
proxy variables are honoured (the launcher removes them unless ``keep_proxy_env`` is set).

Parsing the reply: ``<think>...</think>`` blocks are dropped, then the first integer in the text
that is a legal action is the action ("I pick 3" -> 3; "Action 7 is illegal, so 2" -> 2 when 7 is
not legal). When there is no such integer, or the request fails, the ``--fallback`` action is
used: ``random`` (uniform over the legal actions, from the operator's own seed stream; the
default), ``first-legal``, or ``noop``.

Every ``step`` and ``action_selected`` reply carries ``llm``, the account of that action::

    {"source": "model" | "fallback", "reason": null | "http" | "timeout" | "connection"
     | "bad_response" | "no_action", "http_status": 500 | null, "error": null | "...",
     "prompt_tokens": 12, "completion_tokens": 3, "retries": 0,
     "endpoint": "http://.../chat/completions"}

``reason`` says why the fallback was played: an HTTP error status (``http_status`` holds it),
no complete answer within ``--timeout``, a failed connection, a body that is not a chat
completion, or a completion that names no legal action; for the first three, after the retries
(``error`` says how many, and why no other was made). ``retries`` is the number of retries this
action took, whatever its source. Token counts are the request's own ``usage`` (0 when the
endpoint sent none). The replies also carry ``tokens``, the cumulative ``prompt_tokens``,
``completion_tokens`` and ``total_tokens`` since the worker started and ``requests``, the number
of HTTP requests made (retries included), and ``llm_error`` (the error text) on a fallback.
The first fallback for each reason is logged as a warning, later ones at debug level; the first
retry for each reason at info level, later ones at debug level.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from mosaic.operators.protocol import to_jsonable
from mosaic.operators.worker.runtime import (
    BasePolicy,
    add_runtime_arguments,
    discrete_actions,
    noop_action,
    run_worker,
)
from workers._bounded_http import BoundedClient, RequestFailed
from workers._retry import Retry, RetryPolicy, with_retries

__all__ = ["LLMError", "LLMPolicy", "add_endpoint_arguments", "endpoint_options", "main",
           "new_usage", "parse_action", "parse_named_action"]

log = logging.getLogger("mosaic.worker.llm")

FALLBACKS = ("random", "first-legal", "noop")
MAX_OBSERVATION_CHARS = 4000
MAX_BODY_BYTES = 1 << 20
DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting in the environment {env}. Each turn you receive an observation and "
    "the list of legal actions. Reply with the number of the action you choose."
)

#: The spawn key of the retry jitter's stream, beside the fallback's stream of the same seed.
_JITTER_STREAM = 1

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_INTEGER = re.compile(r"-?\d+")


#: Why an action came from the fallback (the ``reason`` of the ``llm`` reply field).
FALLBACK_REASONS = ("http", "timeout", "connection", "bad_response", "no_action")


class LLMError(Exception):
    """The endpoint could not be asked, or its answer holds no legal action.

    ``reason`` is one of :data:`FALLBACK_REASONS`; ``status`` the HTTP status of an ``http``
    failure.
    """

    def __init__(self, reason: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


def parse_action(text: str, legal_actions: list[int]) -> int | None:
    """The first integer in ``text`` (outside ``<think>`` blocks) that is a legal action."""
    legal = set(legal_actions)
    for match in _INTEGER.finditer(_THINK.sub(" ", text)):
        value = int(match.group())
        if value in legal:
            return value
    return None


def parse_named_action(text: str, legal_actions: list[int], names: list[str]) -> int | None:
    """The legal action whose name (``names[action]``, case-insensitive, as whole words) comes
    first in ``text`` outside ``<think>`` blocks, the longest name at one place; else
    :func:`parse_action`'s number."""
    plain = _THINK.sub(" ", text).lower()
    found: list[tuple[int, int, int]] = []
    for action in legal_actions:
        if not 0 <= action < len(names):
            continue
        name = names[action].lower()
        match = re.search(r"\b" + re.escape(name) + r"\b", plain)
        if match:
            found.append((match.start(), -len(name), action))
    return min(found)[2] if found else parse_action(text, legal_actions)


def _observation_text(observation: Any) -> str:
    if isinstance(observation, np.ndarray) and observation.dtype.kind == "f":
        observation = np.round(observation, 4)
    text = json.dumps(to_jsonable(observation), separators=(",", ":"))
    if len(text) > MAX_OBSERVATION_CHARS:
        text = text[:MAX_OBSERVATION_CHARS] + " ...(truncated)"
    return text


class LLMPolicy(BasePolicy):
    """Chooses actions by asking a chat-completions endpoint (see the module docstring)."""

    reproducible = False

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        fallback: str = "random",
        temperature: float = 0.0,
        max_tokens: int = 64,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        env_name: str = "",
        action_names: list[str] | None = None,
        max_retries: int = 2,
        retry_backoff: float = 0.5,
    ) -> None:
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {FALLBACKS}; got {fallback!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds; got {timeout}")
        if not base_url.lower().startswith(("http://", "https://")):
            raise ValueError(f"the base URL must start with http:// or https://; got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.retry = RetryPolicy(max_retries, retry_backoff)
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.fallback = fallback
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.env_name = env_name or "unknown"
        self.action_names = action_names or []
        self.tokens = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                       "requests": 0}
        self._rng = np.random.default_rng()
        self._jitter = np.random.default_rng()
        self._account: dict[str, Any] | None = None
        self._warned: set[str] = set()
        self._warned_retry: set[str] = set()
        self._player: str | None = None
        self._http = BoundedClient()  # last: it reads the proxy variables and may refuse them

    def reset(self, seed: int | None) -> None:
        """Seed the random fallback and the retries' jitter (two streams, so that retries never
        shift the fallback's choices); None keeps the current streams."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._jitter = np.random.default_rng(
                np.random.SeedSequence(seed, spawn_key=(_JITTER_STREAM,)))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def init_agent(
        self, player_id: str, env_name: str | None, task: str | None, settings: dict[str, Any]
    ) -> None:
        """Remember the player and the game for the prompt."""
        self._player = player_id
        if task or env_name:
            self.env_name = task or env_name or self.env_name

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """Ask the endpoint; on any failure account for it and use the fallback.

        Raises ``ValueError`` only when the legal actions are unknown (no list and no
        ``Discrete`` space), since then there is nothing to offer the model.
        """
        self._account = None
        candidates = legal_actions if legal_actions is not None else discrete_actions(action_space)
        if not candidates:
            raise ValueError("the LLM worker needs legal actions or a Discrete action space")
        usage = new_usage()
        try:
            reply = self._complete(self._messages(observation, candidates), usage)
            action = self._parse(reply, candidates)
            if action is None:
                raise LLMError("no_action", f"no legal action in the reply {reply[:200]!r}")
        except LLMError as exc:
            return self._fall_back(exc, usage, candidates, legal_actions, action_space)
        self._account = self._accounted("model", usage, None)
        return action

    def reply_fields(self) -> dict[str, Any]:
        """``tokens`` and ``llm`` (see the module docstring); ``llm_error`` on a fallback."""
        fields: dict[str, Any] = {"tokens": dict(self.tokens)}
        if self._account is not None:
            fields["llm"] = dict(self._account)
            if self._account["error"] is not None:
                fields["llm_error"] = self._account["error"]
        return fields

    # -- shared with the workers built on this one (chess, BALROG-style) --

    def _parse(self, reply: str, candidates: list[int]) -> int | None:
        """The legal action ``reply`` names, or None: :func:`parse_action`."""
        return parse_action(reply, candidates)

    def _fall_back(self, error: LLMError, usage: dict[str, int], candidates: list[int],
                   legal_actions: list[int] | None, action_space: Any) -> Any:
        """Account for ``error`` (one warning per reason, later ones at debug level) and
        return the fallback action."""
        self._account = self._accounted("fallback", usage, error)
        if error.reason not in self._warned:  # one warning per reason, not one per step
            self._warned.add(error.reason)
            log.warning("LLM call failed (%s), using the %s fallback: %s; further %s "
                        "failures are logged at debug level", error.reason, self.fallback,
                        error, error.reason)
        else:
            log.debug("LLM call failed (%s): %s", error.reason, error)
        return self._fallback(candidates, legal_actions, action_space)

    def _accounted(self, source: str, usage: dict[str, int], error: LLMError | None
                   ) -> dict[str, Any]:
        return {
            "source": source,
            "reason": error.reason if error is not None else None,
            "http_status": error.status if error is not None else None,
            "error": str(error) if error is not None else None,
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "retries": usage["retries"],
            "endpoint": self.url,
        }

    def _describe(self, action: int) -> str:
        if 0 <= action < len(self.action_names):
            return f"{action} ({self.action_names[action]})"
        return str(action)

    def _messages(self, observation: Any, candidates: list[int]) -> list[dict[str, Any]]:
        player = f"You are {self._player}.\n" if self._player else ""
        user = (
            f"{player}Observation: {_observation_text(observation)}\n"
            f"Legal actions: {', '.join(self._describe(a) for a in candidates)}\n"
            "Answer with one action number."
        )
        system = self.system_prompt.replace("{env}", self.env_name)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _complete(self, messages: list[dict[str, Any]], usage: dict[str, int],
                  timeout: float | None = None) -> str:
        """The completion's text within ``timeout`` seconds (default ``--timeout``); the
        request's token counts and retries are added to ``usage``. Raises :class:`LLMError`."""
        body = json.dumps({
            "model": self.model, "messages": messages, "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"

        def attempt(seconds_left: float) -> bytes:
            self.tokens["requests"] += 1
            return self._http.post(self.url, body, headers, seconds_left, MAX_BODY_BYTES)

        def on_retry(retry: Retry) -> None:
            usage["retries"] += 1
            self._log_retry(retry)

        try:
            raw = with_retries(attempt, timeout=self.timeout if timeout is None else timeout,
                               policy=self.retry, rng=self._jitter, on_retry=on_retry)
        except RequestFailed as exc:
            raise LLMError(exc.reason, str(exc), exc.status) from exc
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise LLMError("bad_response", f"the response is not JSON: {raw[:200]!r}") from exc
        self._count_usage(payload, usage)
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError("bad_response",
                           f"the response is not a chat completion: {raw[:200]!r}") from exc
        if not isinstance(content, str):
            raise LLMError("bad_response", f"the completion has no text content: {content!r:.200}")
        return content

    def _log_retry(self, retry: Retry) -> None:
        failure = retry.failure
        kind = f"http {failure.status}" if failure.reason == "http" else failure.reason
        waited = "Retry-After" if retry.retry_after else "backoff"
        if kind not in self._warned_retry:  # one info line per kind, not one per retry
            self._warned_retry.add(kind)
            log.info("LLM request failed (%s), retry %d of %d in %.2f s (%s): %s; further "
                     "retries after %s are logged at debug level", kind, retry.number, retry.of,
                     retry.wait, waited, failure, kind)
        else:
            log.debug("LLM request failed (%s), retry %d of %d in %.2f s (%s): %s", kind,
                      retry.number, retry.of, retry.wait, waited, failure)

    def _count_usage(self, payload: Any, usage: dict[str, int]) -> None:
        counts = payload.get("usage") if isinstance(payload, dict) else None
        if not isinstance(counts, dict):
            return
        for key in ("prompt_tokens", "completion_tokens"):
            value = counts.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                usage[key] += value
                self.tokens[key] += value
        tokens = self.tokens
        tokens["total_tokens"] = tokens["prompt_tokens"] + tokens["completion_tokens"]

    def _fallback(
        self, candidates: list[int], legal_actions: list[int] | None, action_space: Any
    ) -> Any:
        if self.fallback == "random":
            return candidates[int(self._rng.integers(len(candidates)))]
        if self.fallback == "first-legal":
            return candidates[0]
        return noop_action(action_space, legal_actions if legal_actions else candidates)


def new_usage() -> dict[str, int]:
    """The counts of one action's requests: tokens and retries, all 0."""
    return {"prompt_tokens": 0, "completion_tokens": 0, "retries": 0}


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    return llm_parser("python -m workers.llm_worker",
                      "mosaic operator worker that asks an OpenAI-compatible chat-completions "
                      "endpoint for each action.")


def llm_parser(prog: str, description: str, system_prompt: str = DEFAULT_SYSTEM_PROMPT,
               action_words: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The command line of a worker that asks an endpoint for each action from a system prompt
    (default ``system_prompt``) and named actions (``action_words`` when none are given; the
    llm, vlm and BALROG-style workers)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_endpoint_arguments(parser)
    parser.add_argument("--system-prompt", default=system_prompt,
                        help="system prompt; {env} is replaced by the environment id")
    default = f" (default: {', '.join(action_words)})" if action_words else ""
    parser.add_argument("--action-names", default="",
                        help="comma-separated names of actions 0, 1, 2, ... for the prompt"
                             + default)
    add_runtime_arguments(parser)
    return parser


def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the endpoint, its retries and the fallback, which every LLM worker
    takes (read back with :func:`endpoint_options`)."""
    parser.add_argument("--base-url", required=True,
                        help="endpoint base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="model name sent in each request")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="name of the environment variable holding the API key")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds for a whole action, connection to last byte, retries "
                             "included (default 30)")
    parser.add_argument("--max-retries", type=int, default=2,
                        help="retries of a request that got HTTP 429 or 5xx or could not "
                             "connect, within --timeout (default 2; 0: none)")
    parser.add_argument("--retry-backoff", type=float, default=0.5,
                        help="seconds before the first retry, doubled for each next one, with "
                             "jitter; a Retry-After header overrides it (default 0.5)")
    parser.add_argument("--fallback", choices=FALLBACKS, default="random",
                        help="action used when the request fails or the reply has no legal "
                             "action (default random, from the operator's seed stream)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=64)


def endpoint_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :class:`LLMPolicy` that :func:`add_endpoint_arguments` gave,
    with the API key read from its environment variable."""
    api_key = os.environ.get(args.api_key_env) or None
    if api_key is None:
        log.info("$%s is not set; sending requests without an API key", args.api_key_env)
    return {"base_url": args.base_url, "model": args.model, "api_key": api_key,
            "timeout": args.timeout, "fallback": args.fallback,
            "temperature": args.temperature, "max_tokens": args.max_tokens,
            "max_retries": args.max_retries, "retry_backoff": args.retry_backoff}


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code."""
    args = build_parser().parse_args(argv)

    def make_policy() -> LLMPolicy:
        return LLMPolicy(
            **endpoint_options(args), system_prompt=args.system_prompt, env_name=args.env_id,
            action_names=[n.strip() for n in args.action_names.split(",") if n.strip()],
        )

    # MOSAIC's LLM worker, started without --interactive, plays its episodes by itself.
    return run_worker("llm_worker", args, make_policy, plays_alone=True)


if __name__ == "__main__":
    sys.exit(main())
