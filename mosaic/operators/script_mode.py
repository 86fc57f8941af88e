"""Script mode: a headless, seeded evaluation of N operators, recorded as JSONL telemetry.

``run_script`` launches one worker subprocess per operator (each owns its own environment
instance) and plays ``episode_count`` episodes with every operator, all on the same seeds. Episode
*k* is a barrier: every operator finishes episode *k* before any starts episode *k + 1*. Within an
episode the operators step in lock-step rounds (one step each, sent in parallel so that a round
takes as long as the slowest operator), with ``step_pacing`` seconds between rounds.

An operator whose worker exits, stays silent past its timeout, sends garbage or answers with an
``error`` fails: the failure is recorded with its cause, its worker is stopped, and it leaves
the barrier while the others finish. Every worker is stopped and reaped when ``run_script``
returns or raises, including on ``KeyboardInterrupt``.

Telemetry is one JSON object per line::

    {"kind": "run", "mode": "script", "uid": ..., "environment_mode": ..., "episodes": ...,
     "seeds": [...], "max_steps": ..., "operators": [...]}
    {"kind": "step", "operator": ..., "episode": ..., "seed": ..., "step_index": ..., "action": ...,
     "reward": ..., "terminated": ..., "truncated": ..., "episode_reward": ...}
    {"kind": "episode", "operator": ..., "episode": ..., "seed": ..., "total_reward": ...,
     "length": ..., "terminated": ..., "truncated": ..., "ended_by": "environment" | "max_steps"}
    {"kind": "failure", "operator": ..., "episode": ..., "seed": ..., "step_index": ...,
     "phase": "launch" | "reset" | "step", "cause": ..., "exit_code": ..., "message": ...}
    {"kind": "run_end", "completed": ..., "interrupted": ..., "wall_time_s": ...}

Only ``run_end`` carries a wall-clock value, so the same evaluation file with the same workers
gives identical ``run``, ``step`` and ``episode`` lines (a ``failure`` line can differ in how the
worker ended, e.g. which signal stopped a silent one). Lines are buffered and
flushed at every episode boundary, not written one system call per step.

``python -m mosaic.operators.script_mode FILE`` runs a file; exit code 0 when every operator
finished, 1 when one failed, 2 for a bad file, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from mosaic.errors import (
    ConfigError,
    WorkerCrashed,
    WorkerError,
    WorkerProtocolError,
    WorkerTimeout,
)
from mosaic.operators.script_schema import (
    EvaluationConfig,
    OperatorSpec,
    TimeoutsSpec,
    load_evaluation,
)

__all__ = [
    "EpisodeResult",
    "OperatorFailure",
    "OperatorResult",
    "ProgressCallback",
    "ScriptResult",
    "format_comparison_table",
    "main",
    "operator_config_for",
    "resolve_telemetry_path",
    "run_script",
]

_T = TypeVar("_T")

#: Receives every ``episode`` and ``failure`` record as it is written (never ``step`` records).
ProgressCallback = Callable[[Mapping[str, Any]], None]

DEFAULT_TELEMETRY_DIR = "mosaic-telemetry"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


# -- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeResult:
    """One finished episode of one operator."""

    operator_id: str
    episode_index: int
    seed: int
    total_reward: float
    length: int
    terminated: bool
    truncated: bool
    ended_by: str = "environment"


@dataclass(frozen=True)
class OperatorFailure:
    """Why an operator stopped early. ``cause`` is one of ``crashed`` (the worker exited),
    ``timeout`` (silent past its timeout), ``protocol`` (a malformed reply), ``error`` (an
    ``error`` reply) or ``launch`` (the worker could not be started)."""

    operator_id: str
    phase: str
    cause: str
    message: str
    episode_index: int | None = None
    seed: int | None = None
    step_index: int | None = None
    exit_code: int | None = None


@dataclass
class OperatorResult:
    """Everything one operator did in a run."""

    operator_id: str
    display_name: str
    episodes: list[EpisodeResult] = field(default_factory=list)
    failure: OperatorFailure | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def episodes_done(self) -> int:
        return len(self.episodes)

    @property
    def returns(self) -> list[float]:
        return [episode.total_reward for episode in self.episodes]

    @property
    def mean_return(self) -> float:
        """Mean episode return; NaN with no finished episode."""
        return statistics.fmean(self.returns) if self.episodes else math.nan

    @property
    def std_return(self) -> float:
        """Population standard deviation of the returns (0 for one episode, NaN for none)."""
        return statistics.pstdev(self.returns) if self.episodes else math.nan

    @property
    def mean_length(self) -> float:
        return statistics.fmean(e.length for e in self.episodes) if self.episodes else math.nan


@dataclass
class ScriptResult:
    """The outcome of :func:`run_script`: per-operator results in file order."""

    uid: str
    telemetry_path: Path
    episodes_planned: int
    operators: dict[str, OperatorResult]

    @property
    def ok(self) -> bool:
        """True when no operator failed."""
        return not any(result.failed for result in self.operators.values())

    @property
    def failures(self) -> list[OperatorFailure]:
        return [r.failure for r in self.operators.values() if r.failure is not None]


# -- telemetry ---------------------------------------------------------------------------------


class _Telemetry:
    """A JSONL file (or none, when ``path`` is None), written through Python's buffer and
    flushed at episode boundaries. ``progress`` sees every episode and failure record."""

    def __init__(self, path: Path | None, progress: ProgressCallback | None = None) -> None:
        self.path = path
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8")
        self._progress = progress

    def write(self, record: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        if self._progress is not None and record.get("kind") in ("episode", "failure"):
            self._progress(record)

    def write_lanes(self, lanes: Sequence[_Lane]) -> None:
        """Write what every lane recorded, lane by lane in configuration order."""
        for lane in lanes:
            for record in lane.drain():
                self.write(record)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def resolve_telemetry_path(
    config: EvaluationConfig, override: str | Path | None = None, *, now: float | None = None
) -> Path:
    """Where the run's JSONL goes: ``override``, else the file's ``telemetry``, else a directory
    ``mosaic-telemetry``, relative paths against the working directory.

    A path ending in ``.jsonl`` is the file itself (overwritten). Anything else is a directory
    that gets a new ``<uid>-<YYYYmmdd-HHMMSS>.jsonl`` per run (with a ``-N`` suffix rather than
    overwriting an existing file).
    """
    target = Path(override if override is not None else (config.telemetry or DEFAULT_TELEMETRY_DIR))
    if target.suffix == ".jsonl":
        return target
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    candidate = target / f"{config.uid}-{stamp}.jsonl"
    counter = 1
    while candidate.exists():
        candidate = target / f"{config.uid}-{stamp}-{counter}.jsonl"
        counter += 1
    return candidate


# -- one operator's lane -----------------------------------------------------------------------


class _Launcher(Protocol):
    def launch(self, config: Any, run_id: str | None = None) -> Any: ...


def _declares_ansi(env_id: str) -> bool:
    """True when the Gymnasium environment ``env_id`` lists ``ansi`` among its render modes."""
    try:
        import gymnasium
        from gymnasium.envs.registration import load_env_creator

        entry = gymnasium.spec(env_id).entry_point
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        return "ansi" in getattr(creator, "metadata", {}).get("render_modes", [])
    except Exception:  # noqa: BLE001 - unknown or unloadable here: the worker will say why
        return False


def operator_config_for(
    spec: OperatorSpec, config: EvaluationConfig, *, render: bool = False
) -> Any:
    """The :class:`~mosaic.operators.config.OperatorConfig` that launches ``spec``'s worker.

    ``env_kwargs`` travel in ``settings["env_kwargs"]``; ``max_steps`` is the file's. With
    ``render`` (Manual mode) the worker is asked for a text frame on every step
    (``render_every: 1, render_mode: ansi``) when the environment can render text and the
    file did not choose render settings itself.
    """
    from mosaic.operators.config import OperatorConfig

    settings: dict[str, Any] = dict(spec.settings)
    if spec.env_kwargs:
        settings["env_kwargs"] = dict(spec.env_kwargs)
    if render and "render_every" not in settings and _declares_ansi(spec.env):
        settings.update(render_every=1, render_mode="ansi")
    return OperatorConfig.single_agent(
        operator_id=spec.id,
        operator_type=spec.type,
        worker_id=f"{spec.type}_worker",
        display_name=spec.label,
        env_name="gymnasium",
        task=spec.env,
        settings=settings,
        max_steps=config.max_steps,
        command=spec.command,
    )


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


class _Lane:
    """One operator: its worker handle, its current episode and its results.

    Every method that talks to the worker turns a ``WorkerError`` into a recorded failure and
    stops the worker; no worker error escapes a lane. A lane is used by one thread at a time.
    The episode ends on the worker's ``episode_end``, on a ``step`` flagged terminated or
    truncated, or after ``operator_config.max_steps`` steps.
    """

    def __init__(self, operator_config: Any, timeouts: TimeoutsSpec) -> None:
        self.config = operator_config
        self.operator_id: str = operator_config.operator_id
        self.label: str = operator_config.display_name or self.operator_id
        self.timeouts = timeouts
        self._records: list[dict[str, Any]] = []
        self.result = OperatorResult(self.operator_id, self.label)
        self.handle: Any = None
        self.episode_index: int | None = None
        self.seed: int | None = None
        self.in_episode = False
        self.steps = 0
        self.episode_reward = 0.0
        self.last_step: dict[str, Any] | None = None
        self.last_episode: EpisodeResult | None = None
        self.last_render: dict[str, Any] | None = None

    @property
    def alive(self) -> bool:
        return self.handle is not None and self.result.failure is None

    def _write(self, record: dict[str, Any]) -> None:
        self._records.append(record)

    def drain(self) -> list[dict[str, Any]]:
        """The telemetry records produced since the last call, oldest first.

        Lanes may step in parallel threads; the driver writes their records in lane order, so
        the file does not depend on thread timing.
        """
        records, self._records = self._records, []
        return records

    def launch(self, launcher: _Launcher, run_id: str) -> bool:
        try:
            self.handle = launcher.launch(self.config, run_id=run_id)
        except Exception as exc:  # noqa: BLE001 - any launch problem fails this operator only
            self._record_failure("launch", "launch", f"could not start its worker: {exc}", None)
            return False
        return True

    def reset(self, episode_index: int, seed: int) -> bool:
        """Start episode ``episode_index`` on ``seed``; False (and a failure) if the worker
        fails."""
        if not self.alive:
            return False
        self.episode_index, self.seed = episode_index, seed
        self.in_episode, self.steps, self.episode_reward = False, 0, 0.0
        self.last_step = None
        try:
            ready = self.handle.reset(seed, timeout=self.timeouts.reset)
        except WorkerError as exc:
            self._fail("reset", exc, self.timeouts.reset)
            return False
        self.last_render = ready.get("render_payload") if isinstance(ready, dict) else None
        self.in_episode = True
        return True

    def step(self) -> bool:
        """Take one step of the current episode; False when none was taken."""
        if not self.alive or not self.in_episode:
            return False
        try:
            reply, end = self.handle.step(timeout=self.timeouts.step)
        except WorkerError as exc:
            self._fail("step", exc, self.timeouts.step)
            return False
        step_index = reply.get("step_index", self.steps)
        self.steps += 1
        reward = reply.get("reward", 0.0)
        self.episode_reward = reply.get("episode_reward", self.episode_reward + reward)
        self.last_step = reply
        if reply.get("render_payload") is not None:
            self.last_render = reply["render_payload"]
        self._write(
            {
                "kind": "step",
                "operator": self.operator_id,
                "episode": self.episode_index,
                "seed": self.seed,
                "step_index": step_index,
                "action": reply.get("action"),
                "reward": reward,
                "terminated": reply.get("terminated", False),
                "truncated": reply.get("truncated", False),
                "episode_reward": self.episode_reward,
            }
        )
        max_steps = self.config.max_steps
        if end is not None or reply.get("terminated") or reply.get("truncated"):
            # The step flags end the episode even without an ``episode_end`` line.
            self._finish(end or {}, reply, "environment")
        elif max_steps and self.steps >= max_steps:
            self._finish({}, reply, "max_steps")
        return True

    def _finish(self, end: Mapping[str, Any], reply: Mapping[str, Any], ended_by: str) -> None:
        truncated = bool(end.get("truncated", reply.get("truncated", False)))
        episode = EpisodeResult(
            operator_id=self.operator_id,
            episode_index=self.episode_index if self.episode_index is not None else 0,
            seed=self.seed if self.seed is not None else 0,
            total_reward=end.get("total_reward", self.episode_reward),
            length=end.get("episode_length", self.steps),
            terminated=bool(end.get("terminated", reply.get("terminated", False))),
            truncated=truncated or ended_by == "max_steps",
            ended_by=ended_by,
        )
        self.result.episodes.append(episode)
        self.last_episode = episode
        self.in_episode = False
        self._write(
            {
                "kind": "episode",
                "operator": episode.operator_id,
                "episode": episode.episode_index,
                "seed": episode.seed,
                "total_reward": episode.total_reward,
                "length": episode.length,
                "terminated": episode.terminated,
                "truncated": episode.truncated,
                "ended_by": ended_by,
            }
        )

    def _fail(self, phase: str, exc: WorkerError, timeout: float) -> None:
        exit_code: int | None = None
        if isinstance(exc, WorkerCrashed):
            cause = "crashed"
            exit_code = exc.exit_code
            tail = exc.stderr_tail.strip().splitlines()[-5:]
            detail = f"its worker exited ({_exit_text(exit_code)})"
            if tail:
                detail += "; stderr ends with: " + " | ".join(tail)
        elif isinstance(exc, WorkerTimeout):
            cause = "timeout"
            detail = f"its worker sent no reply within {timeout:g} s (the {phase} timeout)"
        elif isinstance(exc, WorkerProtocolError):
            cause = "protocol"
            detail = f"its worker sent a malformed reply: {exc}"
        else:
            cause = "error"
            detail = f"its worker reported an error: {exc}"
        stopped = self.stop()
        if exit_code is None:
            exit_code = stopped
            if cause != "crashed":
                detail += f"; stopped it ({_exit_text(stopped)})"
        self._record_failure(phase, cause, detail, exit_code)

    def _record_failure(self, phase: str, cause: str, detail: str, exit_code: int | None) -> None:
        if phase == "launch":
            where = "to launch"
        elif phase == "step":
            where = f"during step {self.steps} of episode {self.episode_index} (seed {self.seed})"
        else:
            where = f"during reset for episode {self.episode_index} (seed {self.seed})"
        name = repr(self.operator_id)
        if self.label != self.operator_id:
            name += f" ({self.label})"
        message = f"operator {name} failed {where}: {detail}"
        failure = OperatorFailure(
            operator_id=self.operator_id,
            phase=phase,
            cause=cause,
            message=message,
            episode_index=self.episode_index,
            seed=self.seed,
            step_index=self.steps if phase == "step" else None,
            exit_code=exit_code,
        )
        self.result.failure = failure
        self.in_episode = False
        self._write(
            {
                "kind": "failure",
                "operator": failure.operator_id,
                "episode": failure.episode_index,
                "seed": failure.seed,
                "step_index": failure.step_index,
                "phase": phase,
                "cause": cause,
                "exit_code": exit_code,
                "message": message,
            }
        )

    def stop(self) -> int | None:
        """Stop and reap the worker (idempotent); its exit code, or None if unknown."""
        handle, self.handle = self.handle, None
        if handle is None:
            return None
        try:
            code: int | None = handle.stop(timeout=self.timeouts.stop)
        except Exception:  # noqa: BLE001 - stopping must go on for the other lanes
            return None
        return code


def _stop_lanes(lanes: Sequence[_Lane]) -> None:
    for lane in lanes:
        lane.stop()


def _new_run_id(uid: str) -> str:
    return f"{uid}-{uuid.uuid4().hex[:8]}"


def _run_header(config: EvaluationConfig) -> dict[str, Any]:
    return {
        "kind": "run",
        "mode": "script",
        "uid": config.uid,
        "environment_mode": config.environment_mode,
        "episodes": config.episode_count,
        "seeds": config.episode_seeds(),
        "max_steps": config.max_steps,
        "operators": [
            {"id": s.id, "type": s.type, "display_name": s.label, "env": s.env}
            for s in config.operators
        ],
    }


class _Rounds:
    """Runs one call per lane, in parallel threads when there is more than one lane.

    An LLM can take seconds per step; in parallel a round takes as long as the slowest
    operator instead of the sum of them. Results do not depend on the threads: each lane talks
    only to its own worker, and records are written in lane order afterwards. A round with a
    human operator runs sequentially, so that two prompts never share the terminal at once.
    """

    def __init__(self, size: int) -> None:
        self._pool = (
            ThreadPoolExecutor(max_workers=size, thread_name_prefix="mosaic-lane")
            if size > 1
            else None
        )

    def run(self, lanes: Sequence[_Lane], call: Callable[[_Lane], _T]) -> list[_T]:
        """``call(lane)`` for every lane; the results in lane order."""
        sequential = any(lane.config.operator_type == "human" for lane in lanes)
        if self._pool is None or len(lanes) < 2 or sequential:
            return [call(lane) for lane in lanes]
        return [future.result() for future in [self._pool.submit(call, lane) for lane in lanes]]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


# -- the run -----------------------------------------------------------------------------------


def run_script(
    config: EvaluationConfig,
    *,
    telemetry_path: str | Path,
    progress: ProgressCallback | None = None,
    launcher: _Launcher | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ScriptResult:
    """Run the evaluation ``config`` and write its telemetry to ``telemetry_path`` (a file).

    Returns per-operator results whether or not operators failed; a failed operator is in the
    result (and the telemetry) with its cause. Raises ``OSError`` if the telemetry file cannot be
    created (before any worker starts). ``KeyboardInterrupt`` and unexpected errors propagate
    after every worker has been stopped and the telemetry closed with a ``run_end`` record.
    ``progress`` receives each ``episode`` and ``failure`` record, in the driving thread.
    A silent worker holds its round for at most ``timeouts.step`` seconds before it fails.
    ``launcher`` defaults to an :class:`~mosaic.operators.launcher.OperatorLauncher`; ``sleep``
    is how the pause of ``step_pacing`` is taken.
    """
    if launcher is None:
        from mosaic.operators.launcher import OperatorLauncher

        launcher = OperatorLauncher()
    path = Path(telemetry_path)
    telemetry = _Telemetry(path, progress)
    lanes = [
        _Lane(operator_config_for(spec, config), config.timeouts) for spec in config.operators
    ]
    rounds = _Rounds(len(lanes))
    started = time.monotonic()
    completed = interrupted = False
    try:
        telemetry.write(_run_header(config))
        run_id = _new_run_id(config.uid)
        for lane in lanes:  # from this thread: a worker is tied to the thread that started it
            lane.launch(launcher, run_id)
        telemetry.write_lanes(lanes)
        for episode_index, seed in enumerate(config.episode_seeds()):
            playing = [lane for lane in lanes if lane.alive]
            if not playing:
                break
            reset = functools.partial(_Lane.reset, episode_index=episode_index, seed=seed)
            rounds.run(playing, reset)
            telemetry.write_lanes(lanes)
            playing = [lane for lane in playing if lane.in_episode]
            while playing:
                rounds.run(playing, _Lane.step)
                telemetry.write_lanes(playing)
                playing = [lane for lane in playing if lane.in_episode]
                if playing and config.step_pacing > 0:
                    sleep(config.step_pacing)
            telemetry.flush()
        completed = True
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        try:
            rounds.close()
            _stop_lanes(lanes)
            telemetry.write_lanes(lanes)
        finally:
            telemetry.write(
                {
                    "kind": "run_end",
                    "completed": completed,
                    "interrupted": interrupted,
                    "wall_time_s": round(time.monotonic() - started, 3),
                }
            )
            telemetry.close()
    return ScriptResult(
        uid=config.uid,
        telemetry_path=path,
        episodes_planned=config.episode_count,
        operators={lane.operator_id: lane.result for lane in lanes},
    )


# -- reporting ---------------------------------------------------------------------------------


def _number(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def format_comparison_table(result: ScriptResult) -> str:
    """A plain-text table: operator, episodes done, mean and std return, mean length, failures.

    Failed operators are listed under the table with their messages.
    """
    header = ("operator", "episodes", "mean return", "std return", "mean length", "failures")
    rows = [header]
    for op in result.operators.values():
        name = op.operator_id
        if op.display_name != op.operator_id:
            name += f" ({op.display_name})"
        rows.append(
            (
                name,
                f"{op.episodes_done}/{result.episodes_planned}",
                _number(op.mean_return),
                _number(op.std_return),
                _number(op.mean_length, 1),
                "1" if op.failed else "0",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        return "  ".join(cells).rstrip()

    out = [line(rows[0]), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in rows[1:]]
    for failure in result.failures:
        out.append(f"failed: {failure.message}")
    return "\n".join(out)


def _configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (worker stderr lines arrive as log records)."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(levelname)s %(name)s: %(message)s",
    )


def _print_config_error(error: ConfigError, stream: IO[str]) -> None:
    print(f"error: {error}", file=stream)
    for note in getattr(error, "__notes__", []):
        print(f"       {note}", file=stream)


def main(argv: Sequence[str] | None = None) -> int:
    """Run an evaluation file headless; print progress and the comparison table.

    Returns 0 when every operator finished every episode, 1 when an operator failed, 2 for a bad
    evaluation file or an unwritable telemetry path, 130 on Ctrl-C (workers are stopped first).
    """
    parser = argparse.ArgumentParser(
        prog="python -m mosaic.operators.script_mode",
        description="Run N operators headless on seeded episodes and compare them.",
    )
    parser.add_argument("file", help="the evaluation YAML file")
    parser.add_argument("--telemetry", help="JSONL file or directory (overrides the file's)")
    parser.add_argument("--quiet", action="store_true", help="print only the final table")
    parser.add_argument("--log-level", default="WARNING", choices=LOG_LEVELS, type=str.upper,
                        help="log level for mosaic and worker messages on stderr")
    args = parser.parse_args(argv)
    _configure_logging(args.log_level)
    try:
        config = load_evaluation(args.file)
    except ConfigError as error:
        _print_config_error(error, sys.stderr)
        return 2
    path = resolve_telemetry_path(config, args.telemetry)

    def progress(record: Mapping[str, Any]) -> None:
        if record["kind"] == "episode":
            print(
                f"  {record['operator']}: episode {record['episode']} (seed {record['seed']}) "
                f"return {record['total_reward']:g} in {record['length']} steps",
                flush=True,
            )
        else:
            print(f"  {record['message']}", flush=True)

    if not args.quiet:
        print(
            f"evaluating {config.uid}: {len(config.operators)} operators x "
            f"{config.episode_count} episodes ({config.environment_mode}); telemetry -> {path}",
            flush=True,
        )
    try:
        result = run_script(
            config, telemetry_path=path, progress=None if args.quiet else progress
        )
    except KeyboardInterrupt:
        print("interrupted: every worker was stopped", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"error: cannot write telemetry to {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(format_comparison_table(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
