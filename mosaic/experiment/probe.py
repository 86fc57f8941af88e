"""What only building an environment tells: does it build (wrapped), and can its spaces travel?

Loading an experiment file checks every name it holds without building anything.
``mosaic experiment-check`` goes one step further with :func:`probe_environments`: it builds
each environment entry once, as a run would (one copy, wrapped in its ``wrappers``), reads its
spaces, and closes it. A space that mosaic's codec cannot carry (Graph, Sequence, OneOf, a
space class of one's own) would otherwise fail the run only when it starts, and so would a
space the agent's learner cannot learn in (a Discrete action space for TD3, say): a brain or
muscle class that defines ``space_problem(who, observation_space, action_space)`` is asked
about every env agent mapped to its agent. An environment with ``record_video`` is also made
for recording and renders one frame.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import gymnasium

from mosaic.agents.context import Slot
from mosaic.core.config_problems import Loc, Problem
from mosaic.core.errors import CodecError
from mosaic.core.imports import ImportPathError, resolve_class
from mosaic.core.spaces import SUPPORTED_SPACES, space_problem, space_to_dict
from mosaic.environments.factory import WrapperError, make_any
from mosaic.environments.video import VideoError, episode_video
from mosaic.experiment.schema import AgentConfig, EnvironmentConfig, Experiment, ExperimentFile
from mosaic.messages import pack
from mosaic.messages.run_config import VideoPlan, WrapperPlan

__all__ = ["probe_environments"]

_SPACE_HINT = ("mosaic's messages carry "
               + ", ".join(s for s in SUPPORTED_SPACES if s not in ("Dict", "Tuple"))
               + " spaces, and Dict and Tuple of them; wrap the environment so that it uses "
               "them (with a gymnasium ObservationWrapper in wrappers:, say)")


_LEARNER_HINT = ("pick a learner for these spaces, or wrap the environment (wrappers:) so that its "
                 "spaces are the ones this learner takes")


def probe_environments(experiment: Experiment) -> list[Problem]:
    """Build every distinct environment entry of ``experiment`` (top level, phases, sweep
    points) once and report, at its key path, what fails: building or wrapping it, and each
    observation or action space the codec cannot carry, naming the space, the env agent and the
    agent mapped to it; and, at the agent's ``brain`` or ``muscle``, each env agent whose spaces
    that class refuses. Environments are closed again; nothing is kept.
    """
    problems: list[Problem] = []
    seen: set[str] = set()
    for loc, environment, agents in _entries(experiment):
        key = repr((environment.env, environment.params,
                    [(w.class_path, w.params) for w in environment.wrappers],
                    environment.record_video is not None,
                    [(agent_loc, agent.brain, agent.muscle) for agent_loc, agent in agents]))
        if key in seen:
            continue
        seen.add(key)
        problems.extend(_probe(loc, environment, agents))
    return problems


#: The agents an environment entry plays with, each with its key path.
_Agents = list[tuple[Loc, AgentConfig]]


def _entries(experiment: Experiment) -> Iterator[tuple[Loc, EnvironmentConfig, _Agents]]:
    settings: list[ExperimentFile] = [experiment, *(p.settings for p in experiment.points)]
    for file in settings:
        agents: _Agents = [(("agents", i), agent) for i, agent in enumerate(file.agents)]
        for index, environment in enumerate(file.environments):
            yield ("environments", index), environment, agents
        for number, phase in enumerate(file.phases or []):
            phase_agents: _Agents = agents if not phase.agents else [
                (("phases", number, "agents", i), agent) for i, agent in enumerate(phase.agents)]
            for index, environment in enumerate(phase.environments or []):
                yield ("phases", number, "environments", index), environment, phase_agents


def _probe(loc: Loc, environment: EnvironmentConfig, agents: _Agents) -> list[Problem]:
    wrappers = tuple(WrapperPlan(w.class_path, dict(w.params)) for w in environment.wrappers)
    # Wrapped for recording as a run wraps it, in a scratch folder removed at once: building
    # and rendering one frame writes no video.
    scratch = tempfile.TemporaryDirectory(prefix="mosaic-check-") if environment.record_video \
        else contextlib.nullcontext(None)
    with scratch as folder:
        video = None if folder is None else VideoPlan(folder, 1)
        return _probe_made(loc, environment, agents, wrappers, video)


def _probe_made(loc: Loc, environment: EnvironmentConfig, agents: _Agents,
                wrappers: tuple[WrapperPlan, ...], video: VideoPlan | None) -> list[Problem]:
    try:
        made = make_any(environment.env, environment.params, wrappers=wrappers, video=video,
                        name=environment.uid)
    except VideoError as error:
        return [Problem((*loc, "record_video"), str(error),
                        "record an environment that renders rgb_array frames, or remove "
                        "record_video")]
    except WrapperError as error:
        name = environment.wrappers[error.index].name
        return [Problem((*loc, "wrappers", error.index, name), f"{name} cannot wrap "
                        f"{environment.env}: {error.reason}",
                        "check the wrapper's parameters and what it expects of the environment")]
    except Exception as error:  # the environment's own code may raise anything
        return [Problem((*loc, "env"), f"building {environment.env} failed: "
                        f"{type(error).__name__}: {error}",
                        "check the environment's params; experiment-check builds each "
                        "environment once")]
    try:
        problems = _render_problem(loc, made) if video is not None else []
        for slot, (observation, action) in made.slots.items():
            who = _who(slot, environment, agents)
            for what, space in (("observation", observation), ("action", action)):
                reason = _codec_problem(space)
                if reason is not None:
                    problems.append(Problem((*loc, "env"), f"the {what} space of {who} in "
                                            f"{environment.env} cannot be carried by mosaic's "
                                            f"messages: {reason}", _SPACE_HINT))
        return problems + _learner_problems(environment, made.slots, agents)
    finally:
        # A probe's close must not hide what it found.
        with contextlib.suppress(Exception):
            made.close()


def _render_problem(loc: Loc, made: Any) -> list[Problem]:
    """What keeps a recorded environment from rendering its first frame (pygame missing, say)."""
    recorder = episode_video(made)
    try:
        made.reset(0)
        if recorder is not None:
            recorder.render()
    except Exception as error:  # the environment's own rendering may raise anything
        return [Problem((*loc, "record_video"), f"rendering a frame failed: "
                        f"{type(error).__name__}: {error}",
                        "install what the environment renders with (pygame for Gymnasium's "
                        "classic control: pip install 'gymnasium[classic-control]')")]
    return []


def _mapped(slot: str, environment: EnvironmentConfig,
            agents: _Agents) -> tuple[Loc, AgentConfig] | None:
    """The agent that acts for the env agent ``slot``, with its key path (``None``: unknown)."""
    mapping = environment.policy_mapping
    if mapping is None:
        return agents[0] if len(agents) == 1 else None
    return next(((loc, agent) for loc, agent in agents if agent.uid == mapping.get(slot)), None)


def _who(slot: str, environment: EnvironmentConfig, agents: _Agents) -> str:
    mapped = _mapped(slot, environment, agents)
    return (f"env agent '{slot}' (agent '{mapped[1].uid}')" if mapped is not None
            else f"env agent '{slot}'")


def _learner_problems(environment: EnvironmentConfig,
                      slots: Mapping[str, tuple[gymnasium.Space[Any], gymnasium.Space[Any]]],
                      agents: _Agents) -> list[Problem]:
    """Each env agent whose spaces its agent's brain or muscle refuses (the class's
    ``space_problem``), at that agent's ``brain`` or ``muscle``: the brain's reason if it has
    one, else the muscle's, once per env agent."""
    problems = []
    refused: set[Loc] = set()
    shared: dict[Loc, tuple[AgentConfig, dict[str, Slot]]] = {}
    for slot, (observation, action) in slots.items():
        mapped = _mapped(slot, environment, agents)
        if mapped is None:
            continue
        agent_loc, agent = mapped
        shared.setdefault(agent_loc, (agent, {}))[1][slot] = Slot(slot, observation, action)
        who = f"env agent '{slot}' of {environment.env}"
        for part, learner in _learners(agent):
            check = getattr(learner, "space_problem", None)
            reason = check(who, observation, action) if callable(check) else None
            if reason is not None:
                problems.append(Problem((*agent_loc, part), str(reason), _LEARNER_HINT))
                refused.add(agent_loc)
                break
    # Then all the env agents of one agent at once, for a learner that keeps one network for
    # them: they must agree (the first of brain and muscle that asks answers).
    for agent_loc, (agent, mine) in shared.items():
        if agent_loc in refused:
            continue
        for part, learner in _learners(agent):
            check = getattr(learner, "slots_problem", None)
            if not callable(check):
                continue
            reason = check(mine)
            if reason is not None:
                problems.append(Problem((*agent_loc, part), f"in {environment.env}: {reason}",
                                        _LEARNER_HINT))
            break
    return problems


def _learners(agent: AgentConfig) -> Iterator[tuple[str, type[Any]]]:
    """The agent's brain and muscle classes, with their keys: those that resolve (one that does
    not was reported when the file was loaded; a self-play agent has no muscle of its own, it
    plays another agent's, checked there)."""
    for part, spec in (("brain", agent.brain), ("muscle", agent.muscle)):
        if spec is None:
            continue
        try:
            yield part, resolve_class(spec.class_path, spec.base)
        except ImportPathError:
            continue


def _codec_problem(space: gymnasium.Space[Any]) -> str | None:
    reason = space_problem(space)
    if reason is not None:
        return reason
    try:
        pack(space_to_dict(space))
        pack(space.sample())
    except CodecError as error:
        return f"{space}: {error}"
    except Exception as error:  # a space of one's own may fail to sample: not the codec's fault
        return f"{space} cannot be sampled ({type(error).__name__}: {error})"
    return None
