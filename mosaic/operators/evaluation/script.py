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

``mosaic evaluate FILE`` (:func:`run_script_file`) runs a file; exit code 0 when every operator
finished, 1 when one failed, 2 for a bad file, 130 on Ctrl-C.

The pieces are private modules shared with Manual mode: results (``_results``), telemetry
(``_telemetry``), lanes and rounds (``_lanes``) and the comparison table (``_report``).
"""

from __future__ import annotations

import functools
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mosaic.core.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_SIGNAL
from mosaic.operators.evaluation._lanes import Lane, Launcher, Rounds, new_run_id, stop_lanes
from mosaic.operators.evaluation._report import format_comparison_table
from mosaic.operators.evaluation._results import (
    EpisodeResult,
    OperatorFailure,
    OperatorResult,
    ScriptResult,
)
from mosaic.operators.evaluation._telemetry import (
    DEFAULT_TELEMETRY_DIR as DEFAULT_TELEMETRY_DIR,  # importable from here, as before
)
from mosaic.operators.evaluation._telemetry import (
    ProgressCallback,
    Telemetry,
    resolve_telemetry_path,
)
from mosaic.operators.evaluation.schema import (
    EvaluationConfig,
    OperatorSpec,
    load_evaluation,
)

__all__ = [
    "EpisodeResult",
    "OperatorFailure",
    "OperatorResult",
    "ProgressCallback",
    "ScriptResult",
    "format_comparison_table",
    "operator_config_for",
    "resolve_telemetry_path",
    "run_script",
    "run_script_file",
]


# -- from evaluation entries to worker configurations ------------------------------------------


def _declares_ansi(env_id: str) -> bool:
    """True when the Gymnasium environment ``env_id`` lists ``ansi`` among its render modes."""
    try:
        import gymnasium
        from gymnasium.envs.registration import load_env_creator

        entry = gymnasium.spec(env_id).entry_point
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        return "ansi" in getattr(creator, "metadata", {}).get("render_modes", [])
    except Exception:  # unknown or unloadable here: the worker will say why
        return False


def operator_config_for(
    spec: OperatorSpec, config: EvaluationConfig, *, render: bool = False
) -> Any:
    """The :class:`~mosaic.operators.api.config.OperatorConfig` that launches ``spec``'s worker.

    ``env_kwargs`` travel in ``settings["env_kwargs"]``; ``max_steps`` is the file's. With
    ``render`` (Manual mode) the worker is asked for a text frame on every step
    (``render_every: 1, render_mode: ansi``) when the environment can render text and the
    file did not choose render settings itself.
    """
    from mosaic.operators.api.config import OperatorConfig

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


# -- the run -----------------------------------------------------------------------------------


def run_script(
    config: EvaluationConfig,
    *,
    telemetry_path: str | Path,
    progress: ProgressCallback | None = None,
    launcher: Launcher | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ScriptResult:
    """Run the evaluation ``config`` and write its telemetry to ``telemetry_path`` (a file).

    Returns per-operator results whether or not operators failed; a failed operator is in the
    result (and the telemetry) with its cause. Raises ``OSError`` if the telemetry file cannot be
    created (before any worker starts). ``KeyboardInterrupt`` and unexpected errors propagate
    after every worker has been stopped and the telemetry closed with a ``run_end`` record.
    ``progress`` receives each ``episode`` and ``failure`` record, in the driving thread.
    A silent worker holds its round for at most ``timeouts.step`` seconds before it fails.
    ``launcher`` defaults to an :class:`~mosaic.operators.driver.launcher.OperatorLauncher`;
    ``sleep`` is how the pause of ``step_pacing`` is taken.
    """
    if launcher is None:
        from mosaic.operators.driver.launcher import OperatorLauncher

        launcher = OperatorLauncher()
    path = Path(telemetry_path)
    telemetry = Telemetry(path, progress)
    lanes = [
        Lane(operator_config_for(spec, config), config.timeouts) for spec in config.operators
    ]
    rounds = Rounds(len(lanes))
    started = time.monotonic()
    completed = interrupted = False
    try:
        telemetry.write(_run_header(config))
        run_id = new_run_id(config.uid)
        for lane in lanes:  # from this thread: a worker is tied to the thread that started it
            lane.launch(launcher, run_id)
        telemetry.write_lanes(lanes)
        for episode_index, seed in enumerate(config.episode_seeds()):
            playing = [lane for lane in lanes if lane.alive]
            if not playing:
                break
            reset = functools.partial(Lane.reset, episode_index=episode_index, seed=seed)
            rounds.run(playing, reset)
            telemetry.write_lanes(lanes)
            playing = [lane for lane in playing if lane.in_episode]
            while playing:
                rounds.run(playing, Lane.step)
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
            stop_lanes(lanes)
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


# -- the command line --------------------------------------------------------------------------


def run_script_file(
    file: str | Path, *, telemetry: str | Path | None = None, quiet: bool = False
) -> int:
    """Run the evaluation file ``file`` headless, printing progress and the comparison table.

    This is ``mosaic evaluate``. ``telemetry`` overrides the file's telemetry path; ``quiet``
    prints only the table. Returns the exit code (:mod:`mosaic.core.exit_codes`): ``EXIT_OK``
    when every operator finished every episode, ``EXIT_FAILED`` when one failed,
    ``EXIT_BAD_INPUT`` for an unwritable telemetry path, 130 on Ctrl-C (every worker is stopped
    first). Raises ``ConfigError`` for a bad file, before anything starts.
    """
    config = load_evaluation(file)
    path = resolve_telemetry_path(config, telemetry)

    def progress(record: Mapping[str, Any]) -> None:
        if record["kind"] == "episode":
            print(
                f"  {record['operator']}: episode {record['episode']} (seed {record['seed']}) "
                f"return {record['total_reward']:g} in {record['length']} steps",
                flush=True,
            )
        else:
            print(f"  {record['message']}", flush=True)

    if not quiet:
        print(
            f"evaluating {config.uid}: {len(config.operators)} operators x "
            f"{config.episode_count} episodes ({config.environment_mode}); telemetry -> {path}",
            flush=True,
        )
    try:
        result = run_script(config, telemetry_path=path, progress=None if quiet else progress)
    except KeyboardInterrupt:
        print("interrupted: every worker was stopped", file=sys.stderr)
        return EXIT_SIGNAL[signal.SIGINT]
    except OSError as exc:
        print(f"error: cannot write telemetry to {path}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(format_comparison_table(result))
    return EXIT_OK if result.ok else EXIT_FAILED

