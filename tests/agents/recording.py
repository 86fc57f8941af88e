"""Test doubles shared by the learner tests."""

from __future__ import annotations

from typing import Any

from mosaic.agents import MuscleContext


class Recording:
    """Mixed into a muscle class: remembers every action it takes and experience it returns."""

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)  # type: ignore[misc]
        self.actions: list[Any] = []
        self.experience: list[Any] = []

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        action = super().act(slot, observation, legal_actions)  # type: ignore[misc]
        self.actions.append(action)
        return action

    def feedback(self, *args: Any) -> Any:
        experience = super().feedback(*args)  # type: ignore[misc]
        if experience is not None:
            self.experience.append(experience)
        return experience


class Refusing:
    """Mixed into a brain class: fails the test if any experience arrives (test mode)."""

    def learn(self, muscle: str, experience: Any) -> Any:
        raise AssertionError("a test-mode muscle sent experience")
