"""The results store: every run, transition, episode and step, in SQLite or PostgreSQL.

:class:`StoreWriter` is the one writer of a process; it batches records from the hot loop into
few transactions on its own thread. :func:`open_store` opens a store for reading.
"""

from mosaic.store._agents import agent_returns, several_agents
from mosaic.store._format import format_means
from mosaic.store._videos import VideoRecord
from mosaic.store.reader import (
    EpisodeStats,
    EpisodeSummary,
    RunDetail,
    RunSummary,
    StepRecord,
    Store,
    Transition,
    format_run_detail,
    format_runs_table,
    open_store,
)
from mosaic.store.schema import RUN_STATUSES, SCHEMA_VERSION
from mosaic.store.writer import MetricRow, StepRow, StoreWriter, WriterStats

__all__ = [
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "EpisodeStats",
    "EpisodeSummary",
    "MetricRow",
    "RunDetail",
    "RunSummary",
    "StepRecord",
    "StepRow",
    "Store",
    "StoreWriter",
    "Transition",
    "VideoRecord",
    "WriterStats",
    "agent_returns",
    "format_means",
    "format_run_detail",
    "format_runs_table",
    "open_store",
    "several_agents",
]
