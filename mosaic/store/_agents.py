"""Each agent's return in an episode, and each run's mean returns per agent.

An agent's return in an episode is the sum of the returns of the env agents it plays there (the
environment's ``policy_mapping``, which the store keeps per run in ``runs.agents``). In a
zero-sum game (self-play, two players) the episode's total return is 0 whatever happens, so a
run of several agents is read per agent. :func:`~mosaic.core.agent_returns.agent_returns` is
that definition: the run counts its progress with it (the summary of ``mosaic
experiment-start``, ``Results``), the readers of the store (``runs list``, ``runs show``,
``runs_frame``, the dashboard) through :func:`agent_means`, and the curves of the dashboard and
``runs plot`` per episode.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa

from mosaic.core.agent_returns import agent_returns
from mosaic.store import schema

__all__ = ["AgentMeans", "agent_means", "agent_returns", "several_agents"]


def several_agents(agents: Mapping[str, Mapping[str, str]] | None) -> bool:
    """Whether a run's mapping (``{environment: {env agent: agent}}``) names two agents or
    more: then its returns are read per agent."""
    if not agents:
        return False
    return len({agent for mapping in agents.values() for agent in mapping.values()}) > 1


@dataclass(frozen=True)
class AgentMeans:
    """One run's mean return per agent: over the last ``recent`` training episodes each agent
    played (``recent_means``), and over all of them (``means``)."""

    recent_means: dict[str, float] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)


def agent_means(conn: sa.Connection, ids: Collection[int], recent: int) -> dict[int, AgentMeans]:
    """The per-agent means of those runs in ``ids`` that have several agents (see
    :func:`several_agents`), by run id; a run of one agent, or one recorded before the store
    kept its mapping, is left out. Training episodes only, in the order they ended.

    The means over all episodes are summed in the database, env agent by env agent (an
    agent's episodes in an environment are those in which its env agents have a return): a
    run of 100,000 episodes costs a few hundredths of a second, where decoding every episode's
    returns took 0.35 s. The last ``recent`` episodes of each environment go through
    :func:`agent_returns`.
    """
    if not ids:
        return {}
    r, e = schema.runs, schema.episodes
    mappings: dict[int, dict[str, dict[str, str]]] = {
        row.id: row.agents
        for row in conn.execute(sa.select(r.c.id, r.c.agents).where(r.c.id.in_(list(ids))))
        if several_agents(row.agents)
    }
    if not mappings:
        return {}
    training = (e.c.run_id.in_(list(mappings)), e.c.evaluation == sa.false())
    slots = sorted({slot for agents in mappings.values() for mapping in agents.values()
                    for slot in mapping})
    values = [e.c.returns[slot].as_float() for slot in slots]
    totals = conn.execute(
        sa.select(e.c.run_id, e.c.environment,
                  *(sa.func.sum(value) for value in values),
                  *(sa.func.count(value) for value in values))
        .where(*training).group_by(e.c.run_id, e.c.environment)
    ).all()
    sums: dict[int, dict[str, list[float]]] = {run: {} for run in mappings}
    for run_id, environment, *found in totals:
        by_slot = mappings[run_id].get(environment, {})
        counts: dict[str, int] = {}
        for index, slot in enumerate(slots):
            agent = by_slot.get(slot)
            if agent is None or not found[len(slots) + index]:
                continue
            total = sums[run_id].setdefault(agent, [0.0, 0])
            total[0] += float(found[index])
            counts[agent] = max(counts.get(agent, 0), int(found[len(slots) + index]))
        for agent, count in counts.items():
            sums[run_id][agent][1] += count
    # An agent's last `recent` episodes are among the last `recent` of each environment; each
    # is read through the index of a run's episodes by environment.
    window = max(recent, 1)
    lasts: dict[int, dict[str, deque[float]]] = {run: {} for run in mappings}
    for run_id, agents in mappings.items():
        rows: list[tuple[int, str, dict[str, float] | None]] = []
        for environment in agents:
            rows += [(row_id, environment, returns) for row_id, returns in conn.execute(
                sa.select(e.c.id, e.c.returns)
                .where(e.c.run_id == run_id, e.c.environment == environment,
                       e.c.evaluation == sa.false())
                .order_by(e.c.id.desc()).limit(window))]
        for _, environment, returns in sorted(rows, key=lambda row: row[0]):
            for agent, value in agent_returns(returns or {}, agents.get(environment)).items():
                lasts[run_id].setdefault(agent, deque(maxlen=window)).append(value)
    return {
        run: AgentMeans(
            {agent: sum(seen) / len(seen) for agent, seen in sorted(lasts[run].items())},
            {agent: total / count for agent, (total, count) in sorted(sums[run].items())
             if count},
        )
        for run in mappings
    }
