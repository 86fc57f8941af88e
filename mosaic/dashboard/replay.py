"""Episode replay: a stored episode re-simulated from its seed and its stored actions, frame by
frame, and two digests that say whether it is the same episode.

* The **run check** hashes every stored step row of the run, in the order they were recorded,
  exactly as the run hashed them while it ran: equal to the run's stored digest, it proves the
  stored steps are the run's, complete and unaltered. It needs every step recorded
  (``record_steps: all``) and one environment instance per environment (no ``copies``).
* The **episode check** hashes the stored steps of the episode, and the same values from the
  re-simulation (the environment made again from the run's stored config with
  ``render_mode="rgb_array"``, reset on the episode's seed, stepped with the stored actions):
  equal digests mean every observation, reward and end flag came out the same.

Only Gymnasium environments are replayed (``gymnasium:<id>`` in the experiment file); one that
cannot render ``rgb_array``, an episode without a stored seed or without stored steps gives a
:class:`ReplayError` that says so.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from mosaic.core.errors import MosaicError
from mosaic.messages.codec import pack
from mosaic.operators.protocol import encode_png
from mosaic.store import Store, schema

__all__ = ["MAX_FRAMES", "Replay", "ReplayError", "replay_episode", "replayable", "run_check"]

#: The most steps of an episode replayed: frames are sent to the page all at once.
MAX_FRAMES = 2000


class ReplayError(MosaicError):
    """This episode cannot be replayed; the message says why."""


@dataclass(frozen=True)
class Replay:
    """One re-simulated episode: its frames (base64 PNGs unless asked otherwise, one before the
    first step and one after each), its stored and re-simulated actions and rewards, and both
    digests."""

    environment: str
    episode: int
    seed: int
    env: str
    frames: list[Any]
    actions: list[Any]
    rewards: list[float]
    stored_digest: str
    replayed_digest: str
    run_digest: str | None = None
    run_check: str = "not checked"
    mismatch_at: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """Whether the re-simulation reproduced the stored episode exactly."""
        return self.stored_digest == self.replayed_digest


def run_check(store: Store, run_id: int) -> tuple[str | None, str]:
    """The run's stored digest and what hashing its stored steps says about it: ``verified``,
    ``mismatch``, or why it cannot be checked."""
    r, s = schema.runs, schema.steps
    with store.reading() as conn:
        row = conn.execute(sa.select(r.c.digest, r.c.status).where(r.c.id == run_id)).one()
        copies = conn.execute(sa.select(sa.func.max(s.c.copy)).where(s.c.run_id == run_id)
                              ).scalar()
    if row.digest is None:
        return None, f"no digest stored (the run is {row.status})"
    if copies:
        return row.digest, "not checkable: environment copies are hashed as batches"
    ends = _episode_ends(store, run_id)
    if ends is None:
        return row.digest, "not checkable: the run continues a saved one (its chain starts there)"
    # The run's digest is a chain: each ended episode's digest seeds the next one's.
    digest = hashlib.blake2b(digest_size=16)
    seen = 0
    for step in _rows(store, run_id, None, None):
        digest.update(pack(step[:7]))
        seen += 1
        if step[7] in ends:
            digest = _chained(digest.digest())
    if seen == 0:
        return row.digest, "not checkable: the run recorded no steps"
    return row.digest, "verified" if digest.hexdigest() == row.digest else (
        "mismatch: the stored steps are not all of the run's (record_steps other than all?), "
        "or they were changed")


def replay_episode(store: Store, run_id: int, environment: str, episode: int,
                   render: Callable[[Any], Any] | None = None) -> Replay:
    """Re-simulate episode ``episode`` of ``environment`` in run ``run_id`` (see the module).

    Its frames are base64 PNGs, or what ``render`` makes of the environment after its reset
    and each step (``lambda env: env.render()``: the RGB arrays).
    Raises ReplayError when it cannot be replayed, StoreError when the store cannot be read.
    """
    frame = render or _frame
    spec, params, max_steps = _environment_spec(store, run_id, environment)
    seed = _episode_seed(store, run_id, environment, episode)
    stored = list(_rows(store, run_id, environment, episode))
    if not stored:
        raise ReplayError(f"episode {episode} of {environment} has no stored steps "
                          "(record_steps: all keeps them)")
    if len(stored) > MAX_FRAMES:
        raise ReplayError(f"episode {episode} has {len(stored)} steps; replay shows at most "
                          f"{MAX_FRAMES}")
    env = _make(spec, params)
    try:
        frames, actions, rewards = [], [], []
        stored_hash, replayed_hash = hashlib.blake2b(digest_size=16), hashlib.blake2b(
            digest_size=16)
        mismatch: int | None = None
        observation, _ = env.reset(seed=seed)
        frames.append(frame(env))
        for index, (env_uid, slot, stored_obs, action, reward, term, trunc, _) in enumerate(
                stored):
            stored_hash.update(pack((env_uid, slot, stored_obs, action, reward, term, trunc)))
            before = observation
            observation, new_reward, terminated, truncated, _ = env.step(action)
            truncated = bool(truncated) or (max_steps is not None and index + 1 >= max_steps)
            replayed = (env_uid, slot, before, action, float(new_reward), bool(terminated),
                        truncated)
            replayed_hash.update(pack(replayed))
            if mismatch is None and pack(replayed) != pack(
                    (env_uid, slot, stored_obs, action, reward, term, trunc)):
                mismatch = index
            frames.append(frame(env))
            actions.append(_plain(action))
            rewards.append(float(new_reward))
            if (terminated or truncated) and index + 1 < len(stored):
                break  # the re-simulation ended early: a mismatch is already recorded
    finally:
        env.close()
    return Replay(environment, episode, seed, spec, frames, actions, rewards,
                  stored_hash.hexdigest(), replayed_hash.hexdigest(), mismatch_at=mismatch)


def replayable(store: Store, run_id: int) -> list[str]:
    """The uids of the run's environments whose episodes :func:`replay_episode` may replay."""
    entries = _config(store, run_id).get("environments") or []
    return [str(e["uid"]) for e in entries if isinstance(e, dict) and "uid" in e
            and str(e.get("env", "")).startswith("gymnasium:") and not e.get("copies")]


def _config(store: Store, run_id: int) -> dict[str, Any]:
    r, x = schema.runs, schema.experiments
    with store.reading() as conn:
        config = conn.execute(sa.select(x.c.config).join(r, r.c.experiment_id == x.c.id)
                              .where(r.c.id == run_id)).scalar_one_or_none()
    return config if isinstance(config, dict) else {}


def _environment_spec(store: Store, run_id: int,
                      environment: str) -> tuple[str, dict[str, Any], int | None]:
    config = _config(store, run_id)
    if not config:
        raise ReplayError("the run's experiment stored no config to make its environment from")
    for entry in config.get("environments") or []:
        if isinstance(entry, dict) and entry.get("uid") == environment:
            spec = str(entry.get("env", ""))
            if not spec.startswith("gymnasium:"):
                raise ReplayError(f"{environment} is {spec!r}: replay takes Gymnasium "
                                  "environments (gymnasium:<id>)")
            if entry.get("copies"):
                raise ReplayError(f"{environment} ran {entry['copies']} copies at once; replay "
                                  "takes one environment instance")
            max_steps = config.get("max_steps")
            return spec, dict(entry.get("params") or {}), (
                int(max_steps) if isinstance(max_steps, int) else None)
    raise ReplayError(f"the run has no environment {environment!r}")


def _episode_seed(store: Store, run_id: int, environment: str, episode: int) -> int:
    e = schema.episodes
    with store.reading() as conn:
        seed = conn.execute(sa.select(e.c.seed).where(
            e.c.run_id == run_id, e.c.environment == environment, e.c.episode == episode,
            e.c.copy == 0, e.c.evaluation == sa.false())).scalar_one_or_none()
    if seed is None:
        raise ReplayError(f"episode {episode} of {environment} has no stored seed")
    return int(seed)


def _rows(store: Store, run_id: int, environment: str | None,
          episode: int | None) -> Any:
    """(environment, slot, observation, action, reward, terminated, truncated, row id) of
    stored steps, decoded, in the order they were recorded."""
    decode = store.value_decoder()
    s = schema.steps
    query = sa.select(s.c.environment, s.c.slot, s.c.observation, s.c.action, s.c.reward,
                      s.c.terminated, s.c.truncated, s.c.id).where(s.c.run_id == run_id)
    if environment is not None:
        query = query.where(s.c.environment == environment, s.c.episode == episode,
                            s.c.copy == 0)
    with store.reading() as conn:
        for row in conn.execution_options(yield_per=1000).execute(query.order_by(s.c.id)):
            yield (row[0], row[1], None if row[2] is None else decode(row[2]),
                   None if row[3] is None else decode(row[3]), row[4], bool(row[5]),
                   bool(row[6]), row[7])


def _episode_ends(store: Store, run_id: int) -> set[int] | None:
    """The ids of the step rows after which the run linked its digest chain: the last row of
    each training episode that ended. None for a run that continues a saved one (its first
    episode is not 0), whose chain starts from the saved run's."""
    s, e = schema.steps, schema.episodes
    with store.reading() as conn:
        first = conn.execute(sa.select(sa.func.min(s.c.episode)).where(s.c.run_id == run_id)
                             ).scalar()
        if first:
            return None
        ended = sa.select(e.c.environment, e.c.episode).where(
            e.c.run_id == run_id, e.c.evaluation.is_(False)).subquery()
        last = sa.select(sa.func.max(s.c.id)).join(
            ended, sa.and_(s.c.environment == ended.c.environment,
                           s.c.episode == ended.c.episode)
        ).where(s.c.run_id == run_id).group_by(s.c.environment, s.c.episode)
        return {row_id for (row_id,) in conn.execute(last)}


def _chained(chain: bytes) -> Any:
    """A digest that starts from ``chain``, as the simulation controller links episodes."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(chain)
    return digest


def _make(spec: str, params: dict[str, Any]) -> Any:
    from mosaic.environments.gymnasium_make import make_gymnasium

    try:
        return make_gymnasium(spec.partition(":")[2], params, "rgb_array")
    except Exception as exc:
        raise ReplayError(f"cannot make {spec} with render_mode='rgb_array': {exc}") from exc


def _frame(env: Any) -> str:
    return base64.b64encode(encode_png(env.render())).decode("ascii")


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value
