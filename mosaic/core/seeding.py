"""Every seed in a run is derived from the run seed, in the style of NumPy's SeedSequence.

A derived seed depends only on the run seed and the component's position in the experiment
file (never on placement, timing or process ids), so the same file and seed give the same
trajectory whether components run in threads or processes.

Every derived seed fits in 31 bits (``0 <= seed < 2**31``): environments backed by C++
libraries (OpenSpiel's, behind PettingZoo's hanabi, say) take a signed 32-bit seed only.
"""

from __future__ import annotations

import numpy as np

# Purposes keep the streams of different component kinds apart.
(_ENVIRONMENT, _EPISODE, _BRAIN, _MUSCLE, _PHASE, _COPY, _EVALUATION, _OPERATOR,
 _ROLLOUT) = range(9)


#: Seeds are unsigned 64-bit integers: what every seed mosaic derives fits, and what NumPy and
#: Gymnasium take in constant time.
SEED_LIMIT = 2**64


def check_seed(seed: int | None, what: str = "seed") -> int | None:
    """``seed`` if it is None or within 0 .. 2**64 - 1; else :class:`ValueError` saying so.

    Components check the seeds that reach them from the wire: a seed of a thousand digits
    costs seconds in a random generator's set-up.
    """
    if seed is not None and not 0 <= seed < SEED_LIMIT:
        shown = seed if abs(seed) < 2**128 else f"a {seed.bit_length()}-bit integer"
        raise ValueError(f"{what} must be within 0 and 2**64 - 1, got {shown}")
    return seed


#: Every seed :func:`_derive` returns is below this: what a signed 32-bit integer holds.
DERIVED_SEED_LIMIT = 2**31


def _derive(run_seed: int, *key: int) -> int:
    sequence = np.random.SeedSequence(run_seed, spawn_key=key)
    # Masking the high bit keeps the other 31 bits of the stream as they were.
    return int(sequence.generate_state(1, np.uint32)[0]) & (DERIVED_SEED_LIMIT - 1)


def phase_seed(run_seed: int, phase_index: int) -> int:
    """Seed of a run's phase: the run seed for the first phase, a derived one for later phases
    (so a test phase does not replay the training episodes)."""
    return run_seed if phase_index == 0 else _derive(run_seed, _PHASE, phase_index)


def environment_seed(run_seed: int, environment_index: int) -> int:
    """Seed for environment ``environment_index``'s own construction."""
    return _derive(run_seed, _ENVIRONMENT, environment_index)


def episode_seed(run_seed: int, environment_index: int, episode: int,
                 copy: int | None = None) -> int:
    """Reset seed of ``episode`` (0-based) in environment ``environment_index``, or in its copy
    ``copy`` for an environment with ``copies:``."""
    if copy is None:
        return _derive(run_seed, _EPISODE, environment_index, episode)
    return _derive(run_seed, _EPISODE, environment_index, episode, copy)


def brain_seed(run_seed: int, agent_index: int) -> int:
    """Seed of agent ``agent_index``'s brain."""
    return _derive(run_seed, _BRAIN, agent_index)


def muscle_seed(run_seed: int, agent_index: int, environment_index: int) -> int:
    """Seed of agent ``agent_index``'s muscle in environment ``environment_index``."""
    return _derive(run_seed, _MUSCLE, agent_index, environment_index)


def copy_seed(seed: int, copy: int) -> int:
    """Seed of copy ``copy`` of a component seeded with ``seed`` (an environment's copies, or a
    muscle's instance per copy)."""
    return _derive(seed, _COPY, copy)


def rollout_seed(seed: int, worker: int) -> int:
    """Seed of the muscle of rollout worker ``worker`` (from 0) of a muscle seeded with
    ``seed``: the first worker's is ``seed`` itself, so one worker acts as the environment's
    muscle would in the per-step loop."""
    return seed if worker == 0 else _derive(seed, _ROLLOUT, worker)


def evaluation_episode_seed(run_seed: int, environment_index: int, round_: int,
                            episode: int) -> int:
    """Reset seed of evaluation episode ``episode`` (0-based) of evaluation round ``round_``
    (0-based) in environment ``environment_index``: apart from every training episode's."""
    return _derive(run_seed, _EVALUATION, environment_index, round_, episode)


def evaluation_seed(seed: int) -> int:
    """Seed of the greedy instance of a muscle seeded with ``seed``, which plays the evaluation
    episodes: its random numbers leave the training instance's untouched."""
    return _derive(seed, _EVALUATION)


def operator_seed(run_seed: int, operator_index: int) -> int:
    """Seed of operator ``operator_index`` of an evaluation (Script or Manual mode): the
    source of its own randomness, apart from every environment's seeds and other operators'."""
    return _derive(run_seed, _OPERATOR, operator_index)


def operator_episode_seed(seed: int, episode: int) -> int:
    """Seed of the actions of an operator seeded with ``seed`` in its ``episode``-th episode
    (0-based), whatever seed the environment is reset with."""
    return _derive(seed, _OPERATOR, episode)
