"""LLM worker: asks an OpenAI-compatible chat-completions endpoint for each action.

Each action is one ``POST {base_url}/chat/completions`` request (standard library ``urllib``,
``--timeout`` seconds per socket operation, no retries) with a system prompt and a user message
holding the observation (as JSON, floats rounded to 4 digits, at most 4000 characters) and the
legal actions (with names from ``--action-names`` when given). The API key is read from the
environment variable named by ``--api-key-env`` (default ``OPENAI_API_KEY``) and sent as a bearer
token when set.

Parsing the reply: ``<think>...</think>`` blocks are dropped, then the first integer in the text
that is a legal action is the action ("I pick 3" -> 3; "Action 7 is illegal, so 2" -> 2 when 7 is
not legal). When there is no such integer, or the request fails (HTTP error, timeout, connection
refused, a body that is not a chat completion), the reply carries ``llm_error`` with the reason
and the ``--fallback`` action is used: ``random`` (uniform over the legal actions, seeded by
reset; the default), ``first-legal``, or ``noop``.

Every ``step`` and ``action_selected`` reply carries ``tokens``: the cumulative
``prompt_tokens``, ``completion_tokens`` and ``total_tokens`` from the endpoint's ``usage``
fields since the worker started, and ``requests``, the number of requests made.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import urllib.error
import urllib.request
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

__all__ = ["LLMError", "LLMPolicy", "main", "parse_action"]

log = logging.getLogger("mosaic.worker.llm")

FALLBACKS = ("random", "first-legal", "noop")
MAX_OBSERVATION_CHARS = 4000
MAX_BODY_BYTES = 1 << 20
DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting in the environment {env}. Each turn you receive an observation and "
    "the list of legal actions. Reply with the number of the action you choose."
)

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_INTEGER = re.compile(r"-?\d+")


class LLMError(Exception):
    """The endpoint could not be asked, or its answer holds no legal action."""


def parse_action(text: str, legal_actions: list[int]) -> int | None:
    """The first integer in ``text`` (outside ``<think>`` blocks) that is a legal action."""
    legal = set(legal_actions)
    for match in _INTEGER.finditer(_THINK.sub(" ", text)):
        value = int(match.group())
        if value in legal:
            return value
    return None


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
    ) -> None:
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {FALLBACKS}; got {fallback!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
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
        self._last_error: str | None = None
        self._player: str | None = None

    def reset(self, seed: int | None) -> None:
        """Seed the random fallback; None keeps the current stream."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)

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
        """Ask the endpoint; on any failure record ``llm_error`` and use the fallback.

        Raises ``ValueError`` only when the legal actions are unknown (no list and no
        ``Discrete`` space), since then there is nothing to offer the model.
        """
        self._last_error = None
        candidates = legal_actions if legal_actions is not None else discrete_actions(action_space)
        if not candidates:
            raise ValueError("the LLM worker needs legal actions or a Discrete action space")
        try:
            reply = self._complete(self._messages(observation, candidates))
            action = parse_action(reply, candidates)
            if action is None:
                raise LLMError(f"no legal action in the reply {reply[:200]!r}")
            return action
        except LLMError as exc:
            self._last_error = str(exc)
            log.warning("LLM call failed, using the %s fallback: %s", self.fallback, exc)
            return self._fallback(candidates, legal_actions, action_space)

    def reply_fields(self) -> dict[str, Any]:
        """``tokens`` always; ``llm_error`` when the last action came from the fallback."""
        fields: dict[str, Any] = {"tokens": dict(self.tokens)}
        if self._last_error is not None:
            fields["llm_error"] = self._last_error
        return fields

    # -- internals --

    def _describe(self, action: int) -> str:
        if 0 <= action < len(self.action_names):
            return f"{action} ({self.action_names[action]})"
        return str(action)

    def _messages(self, observation: Any, candidates: list[int]) -> list[dict[str, str]]:
        player = f"You are {self._player}.\n" if self._player else ""
        user = (
            f"{player}Observation: {_observation_text(observation)}\n"
            f"Legal actions: {', '.join(self._describe(a) for a in candidates)}\n"
            "Answer with one action number."
        )
        system = self.system_prompt.replace("{env}", self.env_name)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _complete(self, messages: list[dict[str, str]]) -> str:
        body = json.dumps({
            "model": self.model, "messages": messages, "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        self.tokens["requests"] += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read(MAX_BODY_BYTES)
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace") if exc.fp is not None else ""
            raise LLMError(f"HTTP {exc.code} {exc.reason}: {detail.strip()[:200]}") from exc
        except urllib.error.URLError as exc:
            raise LLMError(f"request failed: {exc.reason}") from exc
        except (TimeoutError, OSError) as exc:
            raise LLMError(f"request failed: {type(exc).__name__}: {exc}") from exc
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise LLMError(f"the response is not JSON: {raw[:200]!r}") from exc
        self._count_usage(payload)
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"the response is not a chat completion: {raw[:200]!r}") from exc
        if not isinstance(content, str):
            raise LLMError(f"the completion has no text content: {content!r:.200}")
        return content

    def _count_usage(self, payload: Any) -> None:
        usage = payload.get("usage") if isinstance(payload, dict) else None
        if not isinstance(usage, dict):
            return
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
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


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.llm_worker",
        description="mosaic operator worker that asks an OpenAI-compatible chat-completions "
                    "endpoint for each action.",
    )
    parser.add_argument("--base-url", required=True,
                        help="endpoint base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="model name sent in each request")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="name of the environment variable holding the API key")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds per socket operation of a request (default 30)")
    parser.add_argument("--fallback", choices=FALLBACKS, default="random",
                        help="action used when the request fails or the reply has no legal "
                             "action (default random, seeded by reset)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--system-prompt", default=DEFAULT_SYSTEM_PROMPT,
                        help="system prompt; {env} is replaced by the environment id")
    parser.add_argument("--action-names", default="",
                        help="comma-separated names of actions 0, 1, 2, ... for the prompt")
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code."""
    args = build_parser().parse_args(argv)

    def make_policy() -> LLMPolicy:
        api_key = os.environ.get(args.api_key_env) or None
        if api_key is None:
            log.info("$%s is not set; sending requests without an API key", args.api_key_env)
        return LLMPolicy(
            args.base_url, args.model, api_key=api_key, timeout=args.timeout,
            fallback=args.fallback, temperature=args.temperature, max_tokens=args.max_tokens,
            system_prompt=args.system_prompt, env_name=args.env_id,
            action_names=[n.strip() for n in args.action_names.split(",") if n.strip()],
        )

    return run_worker("llm_worker", args, make_policy)


if __name__ == "__main__":
    sys.exit(main())
