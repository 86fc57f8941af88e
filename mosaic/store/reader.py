"""Reading a store: runs, their transitions and episodes, and decoded step rows.

Readers never write. A run still marked ``running`` whose process is gone is reported as
``interrupted``; that status is computed when reading and never stored.

This module opens a store and queries it. The records it returns are in
:mod:`mosaic.store._records`, the ``interrupted`` verdict in :mod:`mosaic.store._liveness`, and
the command line's text formatting in :mod:`mosaic.store._format`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.core.extras import require
from mosaic.core.run_states import RunStatus
from mosaic.store import schema
from mosaic.store._agents import AgentMeans, agent_means
from mosaic.store._format import format_run_detail, format_runs_table
from mosaic.store._frames import episodes_frame, metric_names, metrics_frame, run_phase, steps_frame
from mosaic.store._liveness import STALE_AFTER, run_status
from mosaic.store._records import (
    SEARCH_SOURCE,
    EpisodeStats,
    EpisodeSummary,
    RunDetail,
    RunSummary,
    SearchReport,
    StepRecord,
    Transition,
)
from mosaic.store._select import resolve_run, select_runs
from mosaic.store._values import Decode, decompressing
from mosaic.store._videos import VideoRecord, videos_of
from mosaic.store.url import describe_error, locate, open_engine

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SEARCH_SOURCE",
    "STALE_AFTER",
    "EpisodeStats",
    "EpisodeSummary",
    "RunDetail",
    "RunSummary",
    "StepRecord",
    "Store",
    "Transition",
    "format_run_detail",
    "format_runs_table",
    "open_store",
]

# How many of the first and of the last episodes a run detail shows.
EPISODES_SHOWN = 5
#: Over how many of its last episodes a run detail gives the mean return: where a learner
#: stands at the end, which the mean over all its episodes understates.
RECENT_EPISODES = 100


def open_store(
    url_or_path: str | Path | sa.URL,
    *,
    decode: Decode | None = None,
    stale_after: float = STALE_AFTER,
) -> Store:
    """Open an existing store for reading.

    A SQLite file is opened read-only and is never created. Raises StoreError if it does not
    exist, cannot be opened, or is not a mosaic store of this schema version. ``decode`` turns
    stored observation and action bytes back into values; it defaults to
    ``mosaic.messages.codec.unpack``, imported on first use; values the writer stored
    compressed are decompressed first.
    """
    location = locate(url_or_path)
    engine = open_engine(location, write=False)
    try:
        with engine.begin() as conn:
            schema.check_schema(conn, location.describe())
    except StoreError:
        engine.dispose()
        raise
    except Exception as exc:
        engine.dispose()
        raise StoreError(
            f"cannot read store {location.describe()}: {describe_error(exc, location.url)}"
        ) from None
    return Store(engine, location.describe(), decode=decode, stale_after=stale_after)


class Store:
    """A store opened for reading; see :func:`open_store`.

    Every method reads one consistent snapshot and raises StoreError on a database error.
    Usable as a context manager; :meth:`close` releases the connections.
    """

    def __init__(
        self,
        engine: sa.Engine,
        where: str,
        *,
        decode: Decode | None = None,
        stale_after: float = STALE_AFTER,
    ) -> None:
        self._engine = engine
        self._where = where
        self._decode = decode
        self._stale_after = stale_after
        self._hostname = socket.gethostname()

    @property
    def location(self) -> str:
        """The store's file path or URL (password hidden)."""
        return self._where

    def close(self) -> None:
        """Release the database connections. Idempotent."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def list_runs(
        self, experiment: str | None = None, *, ids: Collection[int] | None = None
    ) -> list[RunSummary]:
        """All runs in the order they started, or only those of experiment uid ``experiment``,
        or only those whose integer id is in ``ids`` (unknown ids are left out)."""
        query = _summary_query(ids)
        if experiment is not None:
            query = query.where(schema.experiments.c.uid == experiment)
        if ids is not None:
            query = query.where(schema.runs.c.id.in_(list(ids)))
        with self._reading() as conn:
            rows = conn.execute(query.order_by(schema.runs.c.id)).all()
            by_agent = agent_means(conn, [row.id for row in rows], RECENT_EPISODES)
        now = time.time()
        return [self._summary(row, now, by_agent.get(row.id)) for row in rows]

    def show_run(
        self, run: str | int, *, episodes_shown: int = EPISODES_SHOWN,
        recent: int = RECENT_EPISODES,
    ) -> RunDetail:
        """Details of one run, named by uid, a unique uid prefix, or integer id.

        Its episode stats, and the episodes it shows, are of training episodes (evaluation
        episodes are left out); they include the mean return of its last ``recent`` episodes
        (in the order they ended). Raises StoreError naming the candidates if ``run`` matches
        several runs, or none.
        """
        r, e = schema.runs, schema.episodes
        training = e.c.evaluation == sa.false()
        with self._reading() as conn:
            run_id = self._resolve(conn, run)
            row = conn.execute(_summary_query([run_id]).where(r.c.id == run_id)).one()
            transitions = [
                Transition(t.seq, t.from_state, t.to_state, t.reason, _when(t.at))  # type: ignore[arg-type]
                for t in conn.execute(
                    sa.select(schema.transitions)
                    .where(schema.transitions.c.run_id == run_id)
                    .order_by(schema.transitions.c.seq, schema.transitions.c.id)
                )
            ]
            agg = conn.execute(
                sa.select(
                    sa.func.count(),
                    sa.func.coalesce(sa.func.sum(e.c.steps), 0),
                    sa.func.avg(e.c.steps),
                    sa.func.avg(e.c.total_return),
                    sa.func.min(e.c.total_return),
                    sa.func.max(e.c.total_return),
                ).where(e.c.run_id == run_id, training)
            ).one()
            last_ones = (
                sa.select(e.c.total_return).where(e.c.run_id == run_id, training)
                .order_by(e.c.id.desc()).limit(max(recent, 1)).subquery()
            )
            recent_mean = conn.execute(sa.select(sa.func.avg(last_ones.c.total_return))).scalar()
            by_agent = agent_means(conn, [run_id], RECENT_EPISODES).get(run_id)
            if recent != RECENT_EPISODES:
                last_agents = agent_means(conn, [run_id], recent).get(run_id, AgentMeans())
            else:
                last_agents = by_agent or AgentMeans()
            summary = self._summary(row, time.time(), by_agent)
            stats = EpisodeStats(
                count=int(agg[0]),
                total_steps=int(agg[1]),
                mean_steps=_float(agg[2]),
                mean_return=_float(agg[3]),
                min_return=_float(agg[4]),
                max_return=_float(agg[5]),
                recent=min(max(recent, 1), int(agg[0])),
                recent_mean_return=_float(recent_mean),
                agent_recent_means=last_agents.recent_means,
            )
            base = sa.select(e).where(e.c.run_id == run_id, training)
            first = conn.execute(base.order_by(e.c.id).limit(episodes_shown)).all()
            last: list[Any] = []
            if stats.count > episodes_shown:
                tail = min(episodes_shown, stats.count - episodes_shown)
                last = conn.execute(base.order_by(e.c.id.desc()).limit(tail)).all()[::-1]
            step_rows = conn.execute(
                sa.select(sa.func.count())
                .select_from(schema.steps)
                .where(schema.steps.c.run_id == run_id)
            ).scalar_one()
        return RunDetail(
            run=summary,
            experiment_file=row.experiment_file,
            pid=row.pid,
            hostname=row.hostname,
            digest=row.digest,
            last_heartbeat=_when(row.heartbeat_at),
            transitions=transitions,
            episode_stats=stats,
            first_episodes=[_episode(x) for x in first],
            last_episodes=[_episode(x) for x in last],
            step_rows=int(step_rows),
        )

    def value_decoder(self) -> Decode:
        """A function that turns one stored value (an observation, action or info) back into
        what was recorded: decompressed where the store compressed it, then decoded.

        It keeps one decompressor, so each thread that decodes needs one of its own.
        """
        return decompressing(self._decode if self._decode is not None else _default_decode())

    def steps(
        self, run: str | int, episode: int | None = None, limit: int | None = None
    ) -> Iterator[StepRecord]:
        """Iterate the step rows of a run (named as for :meth:`show_run`), decoded.

        Rows come in order of environment, episode and step, optionally only of ``episode`` and
        at most ``limit`` of them. The run is resolved now (StoreError if unknown or ambiguous);
        rows are read lazily, and a row that cannot be decoded raises StoreError when reached.
        The iterator holds a connection until exhausted or closed.
        """
        decode = self.value_decoder()
        with self._reading() as conn:
            run_id = self._resolve(conn, run)
        s = schema.steps
        query = (
            sa.select(
                s.c.environment,
                s.c.episode,
                s.c.step,
                s.c.agent,
                s.c.slot,
                s.c.observation,
                s.c.action,
                s.c.reward,
                s.c.terminated,
                s.c.truncated,
                s.c.info,
            )
            .where(s.c.run_id == run_id)
            .order_by(s.c.environment, s.c.episode, s.c.step, s.c.id)
        )
        if episode is not None:
            query = query.where(s.c.episode == episode)
        if limit is not None:
            query = query.limit(limit)
        return self._iter_steps(query, decode)

    # -- tables of several runs (pandas, the ``results`` extra) --------------------------------

    def select_runs(self, *runs: str | int, experiment: str | None = None) -> dict[int, str]:
        """The runs named (as for :meth:`show_run`), then those of experiment uid
        ``experiment``: id -> uid, each once, in that order.

        Raises StoreError for an unknown or ambiguous run, an unknown experiment, or no runs.
        """
        with self._reading() as conn:
            return select_runs(conn, runs, experiment, self._where)

    def runs_frame(self, *runs: str | int, experiment: str | None = None) -> pd.DataFrame:
        """The selected runs (see :meth:`select_runs`) as a DataFrame, one row per run.

        Columns: ``run`` (uid), ``run_id``, ``experiment``, ``experiment_id``, ``run_index``,
        ``phase`` (None without phases), ``seed``, ``status``, ``started_at``, ``ended_at``
        (UTC), ``duration`` (s), ``episodes``, ``steps``, ``recent_mean_return`` (of the last
        100 episodes), ``mean_return`` (of all) and ``error`` as in :class:`RunSummary`, and
        ``config``, the experiment's stored config (a dict). When a selected run has several
        agents (multi-agent, self-play), each agent's means follow, as
        ``recent_mean_return_<agent>`` and ``mean_return_<agent>`` (None in runs without
        it). Raises MissingExtra without pandas.
        """
        pd = require("pandas", "a DataFrame of runs")
        selected = self.select_runs(*runs, experiment=experiment)
        with self._reading() as conn:
            rows = {row.id: row for row in conn.execute(
                _summary_query().where(schema.runs.c.id.in_(list(selected))))}
            by_agent = agent_means(conn, list(selected), RECENT_EPISODES)
        now = time.time()
        agents = sorted({agent for means in by_agent.values() for agent in means.means})
        records = []
        for run_id in selected:
            row = rows[run_id]
            summary = self._summary(row, now, by_agent.get(run_id))
            records.append((
                summary.uid, summary.id, summary.experiment, row.experiment_id, summary.run_index,
                run_phase(summary.uid, summary.run_index), summary.seed, summary.status,
                summary.started_at, summary.ended_at, summary.duration, summary.episodes,
                summary.steps, summary.recent_mean_return, summary.mean_return, summary.error,
                row.experiment_config,
                *(summary.agent_recent_means.get(agent) for agent in agents),
                *(summary.agent_means.get(agent) for agent in agents),
            ))
        columns = [*RUN_COLUMNS, *(f"recent_mean_return_{agent}" for agent in agents),
                   *(f"mean_return_{agent}" for agent in agents)]
        return pd.DataFrame.from_records(records, columns=columns)

    def episodes_frame(self, *runs: str | int, experiment: str | None = None) -> pd.DataFrame:
        """The episodes of the selected runs (see :meth:`select_runs`) as a DataFrame.

        One row per episode, each run's in the order they ended, with the columns of
        ``mosaic.store._frames.EPISODE_COLUMNS`` and one ``return_<agent>`` column per
        environment agent. Raises MissingExtra without pandas.
        """
        selected = self.select_runs(*runs, experiment=experiment)
        with self._reading() as conn:
            return episodes_frame(conn, selected)

    def steps_frame(self, *runs: str | int, experiment: str | None = None) -> pd.DataFrame:
        """The step rows of the selected runs (see :meth:`select_runs`) as a DataFrame.

        Observations and actions are decoded as by :meth:`steps`, one object per cell; every
        row is read into memory. Raises StoreError on a row that cannot be decoded, and
        MissingExtra without pandas.
        """
        decode = self.value_decoder()
        selected = self.select_runs(*runs, experiment=experiment)
        with self._reading() as conn:
            return steps_frame(conn, selected, decode)

    def metrics_frame(
        self, *runs: str | int, experiment: str | None = None, name: str | None = None
    ) -> pd.DataFrame:
        """The metrics the selected runs' brains and muscles reported, as a DataFrame.

        Columns: ``run``, ``run_id``, ``agent``, ``source``, ``name``, ``value``, ``episode``
        and ``step`` (the run's ended episodes and env steps when reported; nullable) and
        ``at``; only metric ``name`` if given. Raises MissingExtra without pandas.
        """
        selected = self.select_runs(*runs, experiment=experiment)
        with self._reading() as conn:
            return metrics_frame(conn, selected, None if name is None else [name])

    def metric_names(self, *runs: str | int, experiment: str | None = None) -> list[str]:
        """The names of the metrics recorded for the selected runs, sorted."""
        selected = self.select_runs(*runs, experiment=experiment)
        with self._reading() as conn:
            return metric_names(conn, list(selected))

    def videos(self, *runs: str | int, experiment: str | None = None) -> list[VideoRecord]:
        """The episodes the selected runs recorded as videos (``record_video:``), by run,
        environment and episode."""
        selected = self.select_runs(*runs, experiment=experiment)
        with self._reading() as conn:
            return videos_of(conn, list(selected))

    def metric_totals(self, name: str, *runs: str | int) -> dict[str, tuple[int, float]]:
        """For each run named (uid or id) that recorded metric ``name``: how many values it
        recorded and their sum (``llm.fallback``: actions accounted and fallbacks)."""
        selected = self.select_runs(*runs)
        table = schema.metrics
        query = (sa.select(table.c.run_id, sa.func.count(), sa.func.sum(table.c.value))
                 .where(table.c.name == name, table.c.run_id.in_(list(selected)))
                 .group_by(table.c.run_id))
        with self._reading() as conn:
            return {selected[row[0]]: (int(row[1]), float(row[2] or 0.0))
                    for row in conn.execute(query)}

    def _iter_steps(self, query: sa.Select[Any], decode: Decode) -> Iterator[StepRecord]:
        with self._reading() as conn:
            result = conn.execution_options(yield_per=1000).execute(query)
            for row in result:
                try:
                    observation = None if row[5] is None else decode(row[5])
                    action = None if row[6] is None else decode(row[6])
                    info = None if row[10] is None else decode(row[10])
                except Exception as exc:
                    raise StoreError(
                        f"cannot decode step {row[2]} of episode {row[1]} ({row[0]}): {exc}"
                    ) from exc
                yield StepRecord(
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    row[4],
                    observation,
                    action,
                    row[7],
                    bool(row[8]),
                    bool(row[9]),
                    info,
                )

    # -- helpers -----------------------------------------------------------------------------

    def reading(self) -> Any:
        """A context manager giving one ``sqlalchemy.Connection`` for queries of the caller's
        own (see :mod:`mosaic.store.schema`); a database error inside it is raised as
        StoreError. Never write through it."""
        return _Reading(self._engine, self._where)

    _reading = reading

    def _resolve(self, conn: sa.Connection, run: str | int) -> int:
        return resolve_run(conn, run, self._where)

    def _summary(self, row: Any, now: float, by_agent: AgentMeans | None = None) -> RunSummary:
        status = run_status(row, now, self._hostname, self._stale_after)
        final = row.status in schema.FINAL_STATUSES
        started, ended = row.started_at, row.ended_at
        if ended is not None and started is not None:
            duration: float | None = ended - started
        elif status == RunStatus.RUNNING and started is not None:
            duration = now - started
        elif status == "interrupted" and started is not None and row.heartbeat_at is not None:
            # Its end is not stored: the last time it is known alive is its heartbeat (refreshed
            # on every commit of its steps or transitions, and every 30 s), a lower bound.
            duration = row.heartbeat_at - started
        else:
            duration = None
        return RunSummary(
            id=row.id,
            uid=row.uid,
            experiment=row.experiment,
            run_index=row.run_index,
            seed=row.seed,
            status=status,
            started_at=_when(started),
            ended_at=_when(ended),
            duration=duration,
            episodes=int(row.episodes if final else row.recorded_episodes or 0),
            steps=int(row.steps if final else row.recorded_steps or 0),
            mean_return=_float(row.mean_return),
            recent_mean_return=_float(row.recent_mean_return),
            agent_recent_means=by_agent.recent_means if by_agent is not None else {},
            agent_means=by_agent.means if by_agent is not None else {},
            error=row.error,
            params=dict(row.params or {}),
            digest=row.digest,
            search=_search_of(row),
        )


class _Reading:
    """A connection in one read transaction, with errors turned into StoreError."""

    def __init__(self, engine: sa.Engine, where: str) -> None:
        self._engine = engine
        self._where = where
        self._conn: sa.Connection | None = None

    def __enter__(self) -> sa.Connection:
        try:
            self._conn = self._engine.connect()
        except Exception as exc:
            raise StoreError(
                f"cannot read store {self._where}: {describe_error(exc, self._engine.url)}"
            ) from None
        return self._conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._conn is not None:
            self._conn.close()
        if isinstance(exc, sa.exc.SQLAlchemyError):
            raise StoreError(
                f"reading store {self._where} failed: {describe_error(exc, self._engine.url)}"
            ) from exc


def _summary_query(ids: Collection[int] | None = None) -> sa.Select[Any]:
    """Runs with their experiment and episode aggregates; the caller filters the runs. With
    ``ids``, only those runs' episodes are aggregated (not every run's, then filtered)."""
    r, x, e = schema.runs, schema.experiments, schema.episodes
    agg_query = (
        sa.select(
            e.c.run_id,
            sa.func.count().label("recorded_episodes"),
            sa.func.sum(e.c.steps).label("recorded_steps"),
            sa.func.avg(e.c.total_return).label("mean_return"),
        )
        .where(e.c.evaluation == sa.false())
        .group_by(e.c.run_id)
    )
    # The mean return of each run's last RECENT_EPISODES training episodes: where a learner
    # stands, which the mean over all its episodes understates.
    ranked_query = sa.select(
        e.c.run_id, e.c.total_return,
        sa.func.row_number().over(partition_by=e.c.run_id, order_by=e.c.id.desc()).label("back"),
    ).where(e.c.evaluation == sa.false())
    if ids is not None:
        agg_query = agg_query.where(e.c.run_id.in_(list(ids)))
        ranked_query = ranked_query.where(e.c.run_id.in_(list(ids)))
    agg = agg_query.subquery()
    ranked = ranked_query.subquery()
    recent = (sa.select(ranked.c.run_id,
                        sa.func.avg(ranked.c.total_return).label("recent_mean_return"))
              .where(ranked.c.back <= RECENT_EPISODES).group_by(ranked.c.run_id).subquery())
    # What a run of a search reported last (the executor keeps its reports as metric rows).
    m = schema.metrics
    last_report_query = (sa.select(m.c.run_id, sa.func.max(m.c.id).label("last"))
                         .where(m.c.source == SEARCH_SOURCE).group_by(m.c.run_id))
    if ids is not None:
        last_report_query = last_report_query.where(m.c.run_id.in_(list(ids)))
    last_report = last_report_query.subquery()
    reported = (sa.select(m.c.run_id, m.c.value.label("search_value"))
                .join(last_report, last_report.c.last == m.c.id).subquery())
    return (
        sa.select(
            r,
            x.c.uid.label("experiment"),
            x.c.file.label("experiment_file"),
            x.c.config.label("experiment_config"),
            agg.c.recorded_episodes,
            agg.c.recorded_steps,
            agg.c.mean_return,
            recent.c.recent_mean_return,
            reported.c.search_value,
        )
        .join(x, x.c.id == r.c.experiment_id)
        .outerjoin(agg, agg.c.run_id == r.c.id)
        .outerjoin(recent, recent.c.run_id == r.c.id)
        .outerjoin(reported, reported.c.run_id == r.c.id)
    )


def _search_of(row: Any) -> SearchReport | None:
    """A search's run: its metric, direction and last report (None: not a search's run)."""
    config = row.experiment_config
    search = config.get("search") if isinstance(config, dict) else None
    if not isinstance(search, dict):
        return None
    return SearchReport(str(search.get("metric", "return")),
                        str(search.get("direction", "maximize")), _float(row.search_value))


#: The columns of :meth:`Store.runs_frame`.
RUN_COLUMNS = (
    "run", "run_id", "experiment", "experiment_id", "run_index", "phase", "seed", "status",
    "started_at", "ended_at", "duration", "episodes", "steps", "recent_mean_return", "mean_return",
    "error", "config",
)


def _episode(row: Any) -> EpisodeSummary:
    return EpisodeSummary(
        environment=row.environment,
        episode=row.episode,
        steps=row.steps,
        total_return=row.total_return,
        returns=dict(row.returns or {}),
        terminated=bool(row.terminated),
        truncated=bool(row.truncated),
        seed=row.seed,
        copy=int(row.copy or 0),
    )


def _when(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _default_decode() -> Decode:
    try:
        from mosaic.messages.codec import unpack
    except ImportError as exc:
        raise StoreError(
            "cannot decode observations: mosaic.messages.codec is not importable "
            f"({exc}); pass decode= to open_store"
        ) from exc
    return unpack
