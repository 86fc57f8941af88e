"""VLM worker: sends each image observation, as an image, to an OpenAI-compatible vision
endpoint and asks for the action.

The observation is an image (an H x W x 3 or H x W x 4 array of 0-255 values, or H x W grey),
or a dict holding one under ``image``, ``pixels`` or ``rgb`` (its ``mission`` text, if any, is
put in the prompt). Each request's user message is OpenAI's vision form: a text part (the
mission and the legal actions, with ``--action-names``) and an ``image_url`` part holding the
image as a ``data:image/png;base64,...`` URL (encoded by Pillow: the ``images`` extra).
The reply's first action name or legal action number is the action. The endpoint options,
retries, fallback and the ``llm`` account of each reply are the LLM worker's
(``workers/llm_worker.py``).
"""

from __future__ import annotations

import argparse
import base64
import sys
from typing import Any

import numpy as np

from mosaic.operators.protocol import encode_png
from mosaic.operators.worker.runtime import run_worker
from workers.llm_worker import LLMPolicy, endpoint_options, llm_parser, parse_named_action

__all__ = ["VLMPolicy", "image_of", "main"]

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting in the environment {env}. Each turn you see an image of the "
    "environment and the list of legal actions. Reply with the action you choose."
)
IMAGE_KEYS = ("image", "pixels", "rgb")


def image_of(observation: Any) -> np.ndarray:
    """The image in ``observation`` as H x W x 3 or 4 uint8; ``ValueError`` when there is
    none."""
    if isinstance(observation, dict):
        key = next((k for k in IMAGE_KEYS if k in observation), None)
        if key is None:
            raise ValueError(f"the observation has no image under {', '.join(IMAGE_KEYS)}; "
                             f"its keys are {sorted(observation)}")
        observation = observation[key]
    image = np.asarray(observation)
    if image.ndim == 2:
        image = image[:, :, None].repeat(3, axis=2)
    if image.ndim != 3 or image.shape[2] not in (3, 4) or min(image.shape[:2]) < 1:
        raise ValueError(f"expected an image (H x W x 3 or 4, or H x W), got shape "
                         f"{image.shape}")
    if image.dtype.kind == "f" and image.size and float(np.nanmax(image)) <= 1.0:
        image = image * 255.0
    pixels: np.ndarray = np.clip(np.nan_to_num(image), 0, 255).astype(np.uint8)
    return pixels


class VLMPolicy(LLMPolicy):
    """Asks a vision chat-completions endpoint with the observation's image (see the module
    docstring)."""

    def __init__(self, *, system_prompt: str = DEFAULT_SYSTEM_PROMPT, **endpoint: Any) -> None:
        super().__init__(system_prompt=system_prompt, **endpoint)

    def _messages(self, observation: Any, candidates: list[int]) -> list[dict[str, Any]]:
        url = "data:image/png;base64," + base64.b64encode(
            encode_png(image_of(observation), level=6)).decode("ascii")
        mission = observation.get("mission") if isinstance(observation, dict) else None
        player = f"You are {self._player}." if self._player else ""
        lines = [*([player] if player else []), *([f"Your mission: {mission}"] if mission else []),
                 f"Legal actions: {', '.join(self._describe(a) for a in candidates)}",
                 "Answer with one action."]
        text = "\n".join(lines)
        system = self.system_prompt.replace("{env}", self.env_name)
        return [{"role": "system", "content": system},
                {"role": "user", "content": [{"type": "text", "text": text},
                                             {"type": "image_url", "image_url": {"url": url}}]}]

    def _parse(self, reply: str, candidates: list[int]) -> int | None:
        return parse_named_action(reply, candidates, self.action_names)


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    return llm_parser("python -m workers.vlm_worker",
                      "mosaic operator worker that sends each image observation to an "
                      "OpenAI-compatible vision chat-completions endpoint for the action.",
                      DEFAULT_SYSTEM_PROMPT)


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code."""
    args = build_parser().parse_args(argv)

    def make_policy() -> VLMPolicy:
        return VLMPolicy(
            **endpoint_options(args), system_prompt=args.system_prompt, env_name=args.env_id,
            action_names=[n.strip() for n in args.action_names.split(",") if n.strip()],
        )

    return run_worker("vlm_worker", args, make_policy, plays_alone=True)


if __name__ == "__main__":
    sys.exit(main())
