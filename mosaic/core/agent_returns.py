"""Each agent's return in an episode: the one definition that a run's progress and every reader
of the store (:mod:`mosaic.store._agents`) use.

An agent's return in an episode is the sum of the returns of the env agents it plays there (the
environment's ``policy_mapping``). Here, below the store, so that a run's step loop counts with
it without loading the store's database library.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["agent_returns"]


def agent_returns(returns: Mapping[str, float],
                  mapping: Mapping[str, str] | None) -> dict[str, float]:
    """Each agent's return in an episode whose env agents returned ``returns``: the sum over
    the env agents ``mapping`` gives it (an env agent it does not name counts as itself)."""
    by_agent: dict[str, float] = {}
    for slot, value in returns.items():
        agent = slot if mapping is None else mapping.get(slot, slot)
        by_agent[agent] = by_agent.get(agent, 0.0) + float(value)
    return by_agent
