"""Reading a store: runs, their transitions and episodes, and decoded step rows.

Readers never write. A run still marked ``running`` whose process is gone is reported as
``interrupted``; that status is computed when reading and never stored.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self

import sqlalchemy as sa

from mosaic.errors import StoreError
from mosaic.store import schema
from mosaic.store.url import locate, open_engine

__all__ = [
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

Decode = Callable[[bytes], Any]

# A running run on another host whose heartbeat is older than this (seconds) is interrupted.
STALE_AFTER = 300.0
# How many of the first and of the last episodes a run detail shows.
EPISODES_SHOWN = 5
# Slack when comparing a process's start time with its run's start (clock and /proc rounding).
_START_SLACK = 10.0


@dataclass(frozen=True)
class RunSummary:
    """One run as listed. Times are UTC; ``duration`` is in seconds, None if unknown.

    ``episodes`` and ``steps`` are the run's totals once it ended, and the totals of the
    episodes recorded so far while it has not. ``mean_return`` is over recorded episodes.
    """

    id: int
    uid: str
    experiment: str
    run_index: int
    seed: int | None
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    duration: float | None
    episodes: int
    steps: int
    mean_return: float | None
    error: str | None


@dataclass(frozen=True)
class Transition:
    """One state change of a run, in order of ``seq``."""

    seq: int
    from_state: str | None
    to_state: str
    reason: str | None
    at: datetime


@dataclass(frozen=True)
class EpisodeSummary:
    """One recorded episode; ``returns`` maps environment agent ids to returns."""

    environment: str
    episode: int
    steps: int
    total_return: float | None
    returns: dict[str, float]
    terminated: bool
    truncated: bool
    seed: int | None


@dataclass(frozen=True)
class EpisodeStats:
    """Aggregates over all recorded episodes of a run (None when there are none)."""

    count: int
    total_steps: int
    mean_steps: float | None
    mean_return: float | None
    min_return: float | None
    max_return: float | None


@dataclass(frozen=True)
class RunDetail:
    """Everything about one run that fits on a screen.

    ``first_episodes`` and ``last_episodes`` hold a few episodes each; together they are all of
    them when there are few (``last_episodes`` is then empty). ``step_rows`` counts the stored
    step rows, which a run still in progress keeps adding to.
    """

    run: RunSummary
    experiment_file: str | None
    pid: int | None
    hostname: str | None
    digest: str | None
    last_heartbeat: datetime | None
    transitions: list[Transition]
    episode_stats: EpisodeStats
    first_episodes: list[EpisodeSummary] = field(default_factory=list)
    last_episodes: list[EpisodeSummary] = field(default_factory=list)
    step_rows: int = 0

    @property
    def uid(self) -> str:
        """The run's uid."""
        return self.run.uid

    @property
    def status(self) -> str:
        """The run's status, ``interrupted`` included."""
        return self.run.status

    @property
    def error(self) -> str | None:
        """The error the run ended with, if any."""
        return self.run.error

    @property
    def mean_return(self) -> float | None:
        """The mean total return over recorded episodes."""
        return self.run.mean_return


class StepRecord(NamedTuple):
    """One stored step row with observation and action decoded."""

    environment: str
    episode: int
    step: int
    agent: str | None
    slot: str | None
    observation: Any
    action: Any
    reward: float | None
    terminated: bool
    truncated: bool


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
    ``mosaic.messages.codec.unpack``, imported on first use.
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
        raise StoreError(f"cannot read store {location.describe()}: {exc}") from exc
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

    def list_runs(self, experiment: str | None = None) -> list[RunSummary]:
        """All runs in the order they started, or only those of experiment uid ``experiment``."""
        query = _summary_query()
        if experiment is not None:
            query = query.where(schema.experiments.c.uid == experiment)
        with self._reading() as conn:
            rows = conn.execute(query.order_by(schema.runs.c.id)).all()
        now = time.time()
        return [self._summary(row, now) for row in rows]

    def show_run(self, run: str | int, *, episodes_shown: int = EPISODES_SHOWN) -> RunDetail:
        """Details of one run, named by uid, a unique uid prefix, or integer id.

        Raises StoreError naming the candidates if ``run`` matches several runs, or none.
        """
        r, e = schema.runs, schema.episodes
        with self._reading() as conn:
            run_id = self._resolve(conn, run)
            row = conn.execute(_summary_query().where(r.c.id == run_id)).one()
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
                ).where(e.c.run_id == run_id)
            ).one()
            stats = EpisodeStats(
                count=int(agg[0]),
                total_steps=int(agg[1]),
                mean_steps=_float(agg[2]),
                mean_return=_float(agg[3]),
                min_return=_float(agg[4]),
                max_return=_float(agg[5]),
            )
            base = sa.select(e).where(e.c.run_id == run_id)
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
            run=self._summary(row, time.time()),
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

    def steps(
        self, run: str | int, episode: int | None = None, limit: int | None = None
    ) -> Iterator[StepRecord]:
        """Iterate the step rows of a run (named as for :meth:`show_run`), decoded.

        Rows come in order of environment, episode and step, optionally only of ``episode`` and
        at most ``limit`` of them. The run is resolved now (StoreError if unknown or ambiguous);
        rows are read lazily, and a row that cannot be decoded raises StoreError when reached.
        The iterator holds a connection until exhausted or closed.
        """
        decode = self._decode if self._decode is not None else _default_decode()
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
            )
            .where(s.c.run_id == run_id)
            .order_by(s.c.environment, s.c.episode, s.c.step, s.c.id)
        )
        if episode is not None:
            query = query.where(s.c.episode == episode)
        if limit is not None:
            query = query.limit(limit)
        return self._iter_steps(query, decode)

    def _iter_steps(self, query: sa.Select[Any], decode: Decode) -> Iterator[StepRecord]:
        with self._reading() as conn:
            result = conn.execution_options(yield_per=1000).execute(query)
            for row in result:
                try:
                    observation = None if row[5] is None else decode(row[5])
                    action = None if row[6] is None else decode(row[6])
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
                )

    # -- helpers -----------------------------------------------------------------------------

    def _reading(self) -> Any:
        return _Reading(self._engine, self._where)

    def _resolve(self, conn: sa.Connection, run: str | int) -> int:
        r = schema.runs
        if isinstance(run, int) and not isinstance(run, bool):
            found = conn.execute(sa.select(r.c.id).where(r.c.id == run)).scalar_one_or_none()
            if found is None:
                raise StoreError(f"no run with id {run} in {self._where}")
            return int(found)
        text = str(run)
        exact = conn.execute(sa.select(r.c.id).where(r.c.uid == text)).scalar_one_or_none()
        if exact is not None:
            return int(exact)
        candidates = (
            {
                row.id: row.uid
                for row in conn.execute(
                    sa.select(r.c.id, r.c.uid)
                    .where(sa.func.substr(r.c.uid, 1, len(text)) == text)
                    .order_by(r.c.id)
                    .limit(11)
                )
            }
            if text
            else {}
        )
        if text.isdigit():
            row = conn.execute(sa.select(r.c.id, r.c.uid).where(r.c.id == int(text))).one_or_none()
            if row is not None:
                candidates[row.id] = row.uid
        if len(candidates) == 1:
            return int(next(iter(candidates)))
        if not candidates:
            recent = conn.execute(sa.select(r.c.uid).order_by(r.c.id.desc()).limit(5)).scalars()
            hint = ", ".join(recent) or "the store holds no runs"
            raise StoreError(
                f"no run {text!r} in {self._where}: no uid starts with it (latest: {hint})"
            )
        shown = ", ".join(f"{uid} (id {rid})" for rid, uid in sorted(candidates.items())[:10])
        more = " and more" if len(candidates) > 10 else ""
        raise StoreError(f"{text!r} matches several runs: {shown}{more}; give more of the uid")

    def _summary(self, row: Any, now: float) -> RunSummary:
        status = self._status(row, now)
        final = row.status in schema.FINAL_STATUSES
        started, ended = row.started_at, row.ended_at
        if ended is not None and started is not None:
            duration: float | None = ended - started
        elif status == "running" and started is not None:
            duration = now - started
        elif status == "interrupted" and started is not None and row.heartbeat_at is not None:
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
            error=row.error,
        )

    def _status(self, row: Any, now: float) -> str:
        if row.status != "running":
            return str(row.status)
        if row.pid is not None and row.hostname == self._hostname:
            return "running" if _pid_alive(row.pid, row.started_at) else "interrupted"
        last = row.heartbeat_at if row.heartbeat_at is not None else row.started_at
        if last is None or now - last > self._stale_after:
            return "interrupted"
        return "running"


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
            raise StoreError(f"cannot read store {self._where}: {exc}") from exc
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
            raise StoreError(f"reading store {self._where} failed: {exc}") from exc


def _summary_query() -> sa.Select[Any]:
    r, x, e = schema.runs, schema.experiments, schema.episodes
    agg = (
        sa.select(
            e.c.run_id,
            sa.func.count().label("recorded_episodes"),
            sa.func.sum(e.c.steps).label("recorded_steps"),
            sa.func.avg(e.c.total_return).label("mean_return"),
        )
        .group_by(e.c.run_id)
        .subquery()
    )
    return (
        sa.select(
            r,
            x.c.uid.label("experiment"),
            x.c.file.label("experiment_file"),
            agg.c.recorded_episodes,
            agg.c.recorded_steps,
            agg.c.mean_return,
        )
        .join(x, x.c.id == r.c.experiment_id)
        .outerjoin(agg, agg.c.run_id == r.c.id)
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
    )


def _when(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _pid_alive(pid: int, started_at: float | None) -> bool:
    """Whether ``pid`` on this host is still the process that started a run at ``started_at``."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OSError:
        return False
    # On Linux, tell a zombie or a recycled pid from the run's own process.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            return False
        if started_at is None:
            return True
        boot = _boot_time()
        if boot is None:
            return True
        began = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return True
    return began <= started_at + _START_SLACK


def _boot_time() -> float | None:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _default_decode() -> Decode:
    try:
        from mosaic.messages.codec import unpack
    except ImportError as exc:
        raise StoreError(
            "cannot decode observations: mosaic.messages.codec is not importable "
            f"({exc}); pass decode= to open_store"
        ) from exc
    return unpack


# -- plain-text formatting for the command line ---------------------------------------------


def format_runs_table(runs: Sequence[RunSummary]) -> str:
    """The runs as an aligned plain-text table, one line per run (``no runs`` if empty)."""
    if not runs:
        return "no runs"
    headers = [
        "RUN",
        "EXPERIMENT",
        "#",
        "SEED",
        "STATUS",
        "STARTED",
        "DURATION",
        "EPISODES",
        "STEPS",
        "MEAN RETURN",
        "ERROR",
    ]
    rows = [
        [
            run.uid,
            run.experiment,
            str(run.run_index),
            _text(run.seed),
            run.status,
            _local(run.started_at),
            _duration(run.duration),
            str(run.episodes),
            str(run.steps),
            _number(run.mean_return),
            _first_line(run.error, 50),
        ]
        for run in runs
    ]
    return _table(headers, rows, right={2, 3, 6, 7, 8, 9})


def format_run_detail(detail: RunDetail) -> str:
    """One run's details as plain text: facts, transitions and a few episodes."""
    run, stats = detail.run, detail.episode_stats
    facts = [
        ("run", f"{run.uid} (id {run.id})"),
        (
            "experiment",
            run.experiment + (f" ({detail.experiment_file})" if detail.experiment_file else ""),
        ),
        ("index", str(run.run_index)),
        ("seed", _text(run.seed)),
        ("status", run.status),
        ("started", _local(run.started_at)),
        ("ended", _local(run.ended_at)),
        ("duration", _duration(run.duration)),
        ("process", f"pid {_text(detail.pid)} on {_text(detail.hostname)}"),
        ("episodes", f"{run.episodes} ({stats.count} recorded)"),
        ("steps", f"{run.steps} ({detail.step_rows} step rows stored)"),
        (
            "mean return",
            _number(stats.mean_return)
            + (
                f" (min {_number(stats.min_return)}, max {_number(stats.max_return)})"
                if stats.count
                else ""
            ),
        ),
        ("mean length", _number(stats.mean_steps) + (" steps" if stats.count else "")),
        ("digest", _text(detail.digest)),
    ]
    if run.status == "interrupted":
        facts.append(("last seen", _local(detail.last_heartbeat)))
    if run.error:
        facts.append(("error", run.error.strip()))
    width = max(len(name) for name, _ in facts)
    lines = [f"{name.ljust(width)}  {value}" for name, value in facts]
    lines += ["", "transitions"]
    if detail.transitions:
        table = _table(
            ["SEQ", "AT", "FROM", "TO", "REASON"],
            [
                [
                    str(t.seq),
                    _local(t.at),
                    _text(t.from_state),
                    t.to_state,
                    _first_line(t.reason, 60),
                ]
                for t in detail.transitions
            ],
            right={0},
        )
        lines += ["  " + line for line in table.splitlines()]
    else:
        lines.append("  none recorded")
    shown = detail.first_episodes + detail.last_episodes
    if detail.last_episodes:
        title = (
            f"episodes (first {len(detail.first_episodes)} and last "
            f"{len(detail.last_episodes)} of {stats.count})"
        )
    else:
        title = "episodes"
    lines += ["", title]
    if shown:
        rows = [_episode_cells(ep) for ep in detail.first_episodes]
        if detail.last_episodes:
            rows.append(["..."] + [""] * 6)
            rows += [_episode_cells(ep) for ep in detail.last_episodes]
        table = _table(
            ["ENVIRONMENT", "EPISODE", "STEPS", "RETURN", "END", "SEED", "RETURNS"],
            rows,
            right={1, 2, 3, 5},
        )
        lines += ["  " + line for line in table.splitlines()]
    else:
        lines.append("  none recorded")
    return "\n".join(lines)


def _episode_cells(ep: EpisodeSummary) -> list[str]:
    end = "terminated" if ep.terminated else "truncated" if ep.truncated else "-"
    returns = ", ".join(f"{k}={_number(v)}" for k, v in sorted(ep.returns.items()))
    return [
        ep.environment,
        str(ep.episode),
        str(ep.steps),
        _number(ep.total_return),
        end,
        _text(ep.seed),
        _first_line(returns, 60),
    ]


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(cells[i]) for cells in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), *(line(cells) for cells in rows)])


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.1f}"


def _first_line(text: str | None, limit: int) -> str:
    if not text:
        return ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _local(when: datetime | None) -> str:
    return "-" if when is None else when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
