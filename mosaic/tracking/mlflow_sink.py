"""The MLflow sink: one MLflow run per mosaic run, logged in batches through ``MlflowClient``.

The runs of an experiment go to the MLflow experiment of the same name (created if missing) at
the tracking URI: a tracking server (``http://host:5000``), a local folder (``file:...``, for
which ``MLFLOW_ALLOW_FILE_STORE=true`` is set unless the environment says otherwise: MLflow 3
keeps runs in a folder only when told to), or whatever else the
installed MLflow takes. Each MLflow run is named after the mosaic run's uid and holds:

* params: ``experiment`` (mosaic's experiment uid), ``seed``, and the run's sweep values by key
  path (text; a value that is not text as JSON);
* metrics: the run's scalars (see :mod:`mosaic.tracking.tee`), each with its step and time;
* tags, once it ends: ``status`` (``finished``, ``failed`` or ``cancelled``), ``digest`` and
  ``error`` (when there is one); MLflow's own status is FINISHED, FAILED or KILLED.

A file store write per metric would slow everything down, and a server round trip per metric
more so: the metrics wait here, and go in one ``log_batch`` per run every :data:`FLUSH_S`
seconds (or per :data:`BATCH` metrics), and when the run ends. A run resumed with ``--resume``
goes on in the MLflow run of its name, if the experiment has one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from mosaic.core.extras import MLFLOW, require
from mosaic.core.run_states import RunStatus
from mosaic.tracking.sink import Point, RunEnd, RunStart, Sink, tag

__all__ = ["BATCH", "FLUSH_S", "MLflowSink"]

#: How long a run's metrics may wait before they are sent, in seconds.
FLUSH_S = 5.0
#: The most metrics, and params, in one ``log_batch`` (MLflow's limits).
BATCH = 1000
PARAMS_BATCH = 100
#: The longest param value and tag value sent (MLflow's oldest limits); longer ones are cut.
PARAM_LENGTH = 500
TAG_LENGTH = 5000
#: MLflow's status of a run that ended as mosaic's ``finished``, ``failed``, ``cancelled`` or
#: ``pruned``.
STATUS = {RunStatus.FINISHED: "FINISHED", RunStatus.FAILED: "FAILED",
          RunStatus.CANCELLED: "KILLED", RunStatus.PRUNED: "KILLED"}


class _Open:
    """An MLflow run being logged: its id, and its metrics not sent yet."""

    __slots__ = ("id", "metrics", "sent_at")

    def __init__(self, run_id: str) -> None:
        self.id = run_id
        self.metrics: list[Point] = []
        self.sent_at = time.monotonic()


class MLflowSink(Sink):
    """Logs each run to the MLflow experiment ``experiment`` at the tracking URI ``uri``."""

    name: ClassVar[str] = "MLflow"

    def __init__(self, uri: str, experiment: str) -> None:
        self.uri = uri
        self.experiment = experiment
        self._client: Any = None
        self._entities: Any = None
        self._experiment_id = ""
        self._runs: dict[str, _Open] = {}

    def start(self, run: RunStart) -> None:
        client = self._connect()
        if run.uid in self._runs:  # another attempt: it goes on in its MLflow run
            return
        run_id = None
        if run.resumed:
            found = client.search_runs([self._experiment_id], max_results=1,
                                       filter_string=f"attributes.run_name = '{run.uid}'")
            if found:
                run_id = found[0].info.run_id
                client.update_run(run_id, status="RUNNING")
        if run_id is None:
            run_id = client.create_run(self._experiment_id, run_name=run.uid).info.run_id
            param = self._entities.Param
            params = [param("experiment", run.experiment)]
            if run.seed is not None:
                params.append(param("seed", str(run.seed)))
            params.extend(param(tag(path), _text(value, PARAM_LENGTH))
                          for path, value in run.params.items())
            for first in range(0, len(params), PARAMS_BATCH):
                client.log_batch(run_id, params=params[first:first + PARAMS_BATCH])
        self._runs[run.uid] = _Open(run_id)

    def scalars(self, run: str, points: Sequence[Point]) -> None:
        opened = self._runs.get(run)
        if opened is None:
            return
        opened.metrics.extend(points)
        if len(opened.metrics) >= BATCH:
            self._send(opened)

    def tick(self, now: float) -> None:
        for opened in self._runs.values():
            if opened.metrics and now - opened.sent_at >= FLUSH_S:
                self._send(opened)

    def finish(self, run: RunEnd) -> None:
        opened = self._runs.pop(run.uid, None)
        if opened is None:
            return
        self._send(opened)
        run_tag = self._entities.RunTag
        tags = [run_tag("status", str(run.status))]  # its text, as MLflow keeps it
        if run.digest is not None:
            tags.append(run_tag("digest", run.digest))
        if run.error is not None:
            tags.append(run_tag("error", _text(run.error, TAG_LENGTH)))
        self._client.log_batch(opened.id, tags=tags)
        self._client.set_terminated(opened.id, STATUS.get(run.status, "FAILED"))

    def close(self) -> None:
        """Send what waits, and end every run still open as KILLED (its end never came)."""
        runs, self._runs = list(self._runs.values()), {}
        failed: Exception | None = None
        for opened in runs:
            try:
                self._send(opened)
                self._client.set_terminated(opened.id, "KILLED")
            except Exception as error:
                failed = failed or error
        if failed is not None:
            raise failed

    def _connect(self) -> Any:
        """The client, and the experiment's id there (made on first use)."""
        if self._client is not None:
            return self._client
        tracking = require("mlflow.tracking", "MLflow logging", MLFLOW)
        self._entities = require("mlflow.entities", "MLflow logging", MLFLOW)
        if self.uri.startswith("file:"):
            # MLflow 3 keeps runs in a folder only when told to; naming one here is telling it.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        try:
            client = tracking.MlflowClient(tracking_uri=self.uri)
        except Exception as error:
            if "MLFLOW_ALLOW_FILE_STORE" in str(error):
                raise RuntimeError(
                    "this MLflow keeps runs in a local folder only with "
                    "MLFLOW_ALLOW_FILE_STORE=true in the environment; set it, or give the URI "
                    "of a tracking server (http://host:5000)") from error
            raise
        found = client.get_experiment_by_name(self.experiment)
        if found is None:
            try:
                self._experiment_id = client.create_experiment(self.experiment)
            except Exception:  # made meanwhile by another command
                found = client.get_experiment_by_name(self.experiment)
                if found is None:
                    raise
        if found is not None:
            self._experiment_id = found.experiment_id
        self._client = client
        return client

    def _send(self, opened: _Open) -> None:
        """Send the run's waiting metrics, :data:`BATCH` at a time."""
        metric = self._entities.Metric
        waiting, opened.metrics = opened.metrics, []
        for first in range(0, len(waiting), BATCH):
            self._client.log_batch(opened.id, metrics=[
                metric(key=name, value=value, timestamp=int(at * 1000), step=step)
                for name, value, step, at in waiting[first:first + BATCH]])
        opened.sent_at = time.monotonic()


def _text(value: Any, limit: int) -> str:
    """``value`` as MLflow keeps it: text as it is, anything else as JSON; at most ``limit``
    characters."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."
