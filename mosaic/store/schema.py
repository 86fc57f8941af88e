"""The store's tables, as SQLAlchemy Core, and the schema version check.

Times are seconds since the epoch (UTC) as floating point numbers: the same on every database,
exact to the microsecond, and trivial to compare. Observations and actions are bytes from the
message codec, zstd-compressed when large (:mod:`mosaic.store._values`; older rows are not, and
both read alike).
"""

from __future__ import annotations

import re

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.core.run_states import FINAL_STATUSES, RunStatus

__all__ = [
    "FINAL_STATUSES",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "STEP_COLUMNS",
    "check_schema",
    "checkpoints",
    "ensure_schema",
    "episodes",
    "experiments",
    "meta",
    "metadata",
    "metrics",
    "runs",
    "steps",
    "transitions",
    "videos",
]

SCHEMA_VERSION = 8
#: Version 2 added the ``copy`` columns of episodes and steps, version 3 the ``params`` column of
#: runs, version 4 the ``evaluation`` column of episodes, version 5 its ``snapshots`` column,
#: version 6 the ``info`` column of steps, version 7 the ``text``, ``hash`` and ``run_prefix``
#: columns of experiments, the ``chain`` column of episodes and the ``checkpoints`` table
#: (what ``--resume`` needs), version 8 the ``agents`` column of runs; a
#: store of an earlier version is upgraded in place when it is opened for writing (see
#: :func:`ensure_schema`). Each upgrade only adds.
_UPGRADABLE = ("1", "2", "3", "4", "5", "6", "7")

#: ``pruned``: a run of a search that its pruner ended early (a store made before it existed
#: admits it once its next writer opens it: see :func:`ensure_schema`).
RUN_STATUSES: tuple[str, ...] = tuple(status.value for status in RunStatus)

metadata = sa.MetaData()

meta = sa.Table(
    "meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

experiments = sa.Table(
    "experiments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uid", sa.String(255), nullable=False, index=True),
    sa.Column("file", sa.Text),
    sa.Column("config", sa.JSON),
    sa.Column("created_at", sa.Double, nullable=False),
    # The experiment file's text and its SHA-256 (hex), and the prefix of its runs' uids: what
    # ``--resume`` continues, and how it knows the file is the same (null before version 7).
    sa.Column("text", sa.Text),
    sa.Column("hash", sa.String(64)),
    sa.Column("run_prefix", sa.String(255)),
)

_status_list = ", ".join(f"'{s}'" for s in RUN_STATUSES)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uid", sa.String(255), nullable=False, unique=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id"), nullable=False),
    sa.Column("run_index", sa.Integer, nullable=False),
    sa.Column("seed", sa.BigInteger),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", sa.Double),
    sa.Column("ended_at", sa.Double),
    sa.Column("error", sa.Text),
    sa.Column("pid", sa.Integer),
    sa.Column("hostname", sa.String(255)),
    sa.Column("episodes", sa.Integer, nullable=False, server_default="0"),
    sa.Column("steps", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("digest", sa.String(128)),
    # Refreshed by the writer while the run is active, so that a reader on another host can tell
    # a live run from one whose process vanished.
    sa.Column("heartbeat_at", sa.Double),
    # The values of the experiment's sweep this run was given, by key path (null without one).
    sa.Column("params", sa.JSON),
    # Which agent plays each env agent, by environment: {environment: {env agent: agent}}, what
    # turns an episode's ``returns`` into each agent's return (null before version 8).
    sa.Column("agents", sa.JSON),
    sa.CheckConstraint(f"status IN ({_status_list})", name="ck_runs_status"),
)

transitions = sa.Table(
    "transitions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("from_state", sa.String(64)),
    sa.Column("to_state", sa.String(64), nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("at", sa.Double, nullable=False),
    sa.Index("ix_transitions_run", "run_id", "seq"),
)

episodes = sa.Table(
    "episodes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("environment", sa.String(255), nullable=False),
    sa.Column("episode", sa.Integer, nullable=False),
    sa.Column("steps", sa.Integer, nullable=False),
    sa.Column("total_return", sa.Double),
    sa.Column("returns", sa.JSON),
    sa.Column("terminated", sa.Boolean, nullable=False),
    sa.Column("truncated", sa.Boolean, nullable=False),
    sa.Column("seed", sa.BigInteger),
    sa.Column("copy", sa.Integer, nullable=False, server_default="0"),
    # A greedy evaluation episode (evaluate_every) rather than a training one.
    sa.Column("evaluation", sa.Boolean, nullable=False, server_default=sa.false()),
    # Self-play: the snapshot each self-play agent played with, as {agent: the episode at
    # which it was taken} (null in an episode without self-play agents).
    sa.Column("snapshots", sa.JSON(none_as_null=True)),
    # The run's digest chain once this episode ended (hex): where a run resumed from the
    # episode's end picks it up (null before version 7).
    sa.Column("chain", sa.String(64)),
    sa.Index("ix_episodes_run", "run_id", "environment", "episode"),
)

steps = sa.Table(
    "steps",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("environment", sa.String(255), nullable=False),
    sa.Column("episode", sa.Integer, nullable=False),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("agent", sa.String(255)),
    sa.Column("slot", sa.String(255)),
    sa.Column("observation", sa.LargeBinary),
    sa.Column("action", sa.LargeBinary),
    sa.Column("reward", sa.Float),
    sa.Column("terminated", sa.Boolean, nullable=False),
    sa.Column("truncated", sa.Boolean, nullable=False),
    sa.Column("copy", sa.Integer, nullable=False, server_default="0"),
    # The keys of the environment's info chosen by its store_info, encoded as observations are
    # (null: none chosen, or none of them in this step's info).
    sa.Column("info", sa.LargeBinary),
    sa.Index("ix_steps_run_episode_step", "run_id", "environment", "episode", "step"),
)

metrics = sa.Table(
    # Named scalars that brains and muscles report (context.log_metric): a loss per update, an
    # epsilon per episode. A store made before this table gets it from its next writer.
    "metrics",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("agent", sa.String(255), nullable=False),
    sa.Column("source", sa.String(255), nullable=False),  # the brain's or muscle's uid
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("value", sa.Double, nullable=False),
    sa.Column("episode", sa.Integer),  # episodes of the run ended when it was reported
    sa.Column("step", sa.BigInteger),  # env steps of the run when it was reported
    sa.Column("at", sa.Double, nullable=False),
    sa.Index("ix_metrics_run_name", "run_id", "name"),
)

checkpoints = sa.Table(
    # The agents' checkpoint files of each run, as saved on whichever machine the run ran on:
    # later phases and --resume find them here when the file is not on their disk (a Ray node
    # without a shared file system). A table a store made before version 7 gets from its writer.
    "checkpoints",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("name", sa.String(255), nullable=False),  # <agent>.npz, <agent>.previous.npz
    sa.Column("episodes", sa.Integer, nullable=False),  # of a periodic one (0: another)
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("saved_at", sa.Double, nullable=False),
    sa.UniqueConstraint("run_id", "name", name="uq_checkpoints_run_name"),
)

videos = sa.Table(
    # The episodes a run recorded as videos (record_video): the file ``name`` in ``folder``, on
    # the machine that ran the environment. A store made before this table gets it from its
    # next writer, and readers find no videos in one that lacks it.
    "videos",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("environment", sa.String(255), nullable=False),
    sa.Column("episode", sa.Integer, nullable=False),
    sa.Column("folder", sa.Text, nullable=False),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("recorded_at", sa.Double, nullable=False),
    sa.UniqueConstraint("run_id", "environment", "episode", name="uq_videos_run_episode"),
)

STEP_COLUMNS = (
    "run_id",
    "environment",
    "episode",
    "step",
    "agent",
    "slot",
    "observation",
    "action",
    "reward",
    "terminated",
    "truncated",
    "copy",
    "info",
)


def ensure_schema(connection: sa.Connection) -> None:
    """Create missing tables and record the schema version, inside the caller's transaction.

    Raises StoreError if the database holds another schema version or tables that are not a
    mosaic store's.
    """
    metadata.create_all(connection, checkfirst=True)
    found = connection.execute(
        sa.select(meta.c.value).where(meta.c.key == "schema_version")
    ).scalar_one_or_none()
    if found is None:
        connection.execute(sa.insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
    elif found in _UPGRADABLE:
        _upgrade(connection, int(found))
    else:
        _compare_version(found)
    _admit_statuses(connection)


def _admit_statuses(connection: sa.Connection) -> None:
    """Let the ``runs`` table of a store made before a status existed (``pruned``) take every
    one of :data:`RUN_STATUSES`: its check constraint is widened, nothing else changes (an
    older mosaic reads such a store as before). Cheap when there is nothing to do."""
    if connection.dialect.name == "sqlite":
        sql = connection.execute(sa.text(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'")).scalar()
        found = re.search(r"CHECK \(status IN \([^)]*\)\)", sql or "")
        if sql is None or found is None or all(f"'{status}'" in found.group(0)
                                               for status in RUN_STATUSES):
            return
        # SQLite alters no constraint; its documented way to widen one edits the table's
        # definition in place (https://sqlite.org/lang_altertable.html, "otherwise").
        version = connection.execute(sa.text("PRAGMA schema_version")).scalar_one()
        connection.execute(sa.text("PRAGMA writable_schema = ON"))
        connection.execute(sa.text("UPDATE sqlite_master SET sql = :sql WHERE type = 'table' "
                                   "AND name = 'runs'"),
                           {"sql": sql.replace(found.group(0),
                                               f"CHECK (status IN ({_status_list}))")})
        connection.execute(sa.text(f"PRAGMA schema_version = {int(version) + 1}"))
        connection.execute(sa.text("PRAGMA writable_schema = OFF"))
        return
    if connection.dialect.name == "postgresql":
        found = connection.execute(sa.text(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = "
            "'ck_runs_status' AND conrelid = 'runs'::regclass")).scalar()
        if found is None or all(f"'{status}'" in found for status in RUN_STATUSES):
            return
        connection.execute(sa.text("ALTER TABLE runs DROP CONSTRAINT ck_runs_status"))
        connection.execute(sa.text(f"ALTER TABLE runs ADD CONSTRAINT ck_runs_status "
                                   f"CHECK (status IN ({_status_list}))"))


def _upgrade(connection: sa.Connection, version: int) -> None:
    """From ``version`` to :data:`SCHEMA_VERSION`, one version at a time.

    To 2: the ``copy`` columns (0 for every existing row). To 3: the ``params`` column of runs
    (null for every existing run). To 4: the ``evaluation`` column of episodes (false for every
    existing episode). To 5: the ``snapshots`` column of episodes (null for every existing
    episode). To 6: the ``info`` column of steps (null for every existing step). To 7: the
    ``text``, ``hash`` and ``run_prefix`` columns of experiments (null for every existing one:
    they cannot be resumed), and the ``chain`` column of episodes (null). To 8: the ``agents``
    column of runs (null: their mapping is unknown, and they read as one total).
    """
    if version < 2:
        for table in (episodes, steps):
            connection.execute(sa.text(
                f'ALTER TABLE {table.name} ADD COLUMN "copy" INTEGER NOT NULL DEFAULT 0'))
    if version < 3:
        json_type = runs.c.params.type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE runs ADD COLUMN params {json_type}"))
    if version < 4:
        connection.execute(sa.text(
            "ALTER TABLE episodes ADD COLUMN evaluation BOOLEAN NOT NULL DEFAULT false"))
    if version < 5:
        json_type = episodes.c.snapshots.type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE episodes ADD COLUMN snapshots {json_type}"))
    if version < 6:
        blob = steps.c.info.type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE steps ADD COLUMN info {blob}"))
    if version < 7:
        for column in (experiments.c.text, experiments.c.hash, experiments.c.run_prefix):
            kind = column.type.compile(dialect=connection.dialect)
            connection.execute(sa.text(f"ALTER TABLE experiments ADD COLUMN {column.name} {kind}"))
        kind = episodes.c.chain.type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE episodes ADD COLUMN chain {kind}"))
    if version < 8:
        json_type = runs.c.agents.type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE runs ADD COLUMN agents {json_type}"))
    connection.execute(sa.update(meta).where(meta.c.key == "schema_version")
                       .values(value=str(SCHEMA_VERSION)))


def check_schema(connection: sa.Connection, where: str) -> None:
    """Check, without writing, that ``connection`` holds a mosaic store this code can read.

    Raises StoreError naming ``where`` if not.
    """
    if not sa.inspect(connection).has_table("meta"):
        raise StoreError(f"{where} is not a mosaic store (it has no 'meta' table)")
    found = connection.execute(
        sa.select(meta.c.value).where(meta.c.key == "schema_version")
    ).scalar_one_or_none()
    if found is None:
        raise StoreError(f"{where} is not a mosaic store (it records no schema version)")
    _compare_version(found, where)


def _compare_version(found: str, where: str = "the store") -> None:
    if found in _UPGRADABLE:
        raise StoreError(
            f"{where} has schema version {found}; this mosaic upgrades it to version "
            f"{SCHEMA_VERSION} the next time it writes to it (an experiment-start or evaluate "
            "with this store), and reads it after that"
        )
    if found != str(SCHEMA_VERSION):
        raise StoreError(
            f"{where} has schema version {found}, this mosaic reads and writes version "
            f"{SCHEMA_VERSION}; use a matching mosaic version or a new store file"
        )
