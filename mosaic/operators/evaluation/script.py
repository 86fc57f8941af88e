"""Script mode: a headless, seeded evaluation of N operators, recorded as JSONL telemetry and in
the results store.

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
     "seeds": [...], "seed": ..., "max_steps": ..., "operators": [...]}
    {"kind": "step", "operator": ..., "episode": ..., "seed": ..., "step_index": ..., "action": ...,
     "reward": ..., "terminated": ..., "truncated": ..., "episode_reward": ..., "llm": {...}}
    {"kind": "episode", "operator": ..., "episode": ..., "seed": ..., "total_reward": ...,
     "length": ..., "terminated": ..., "truncated": ..., "ended_by": "environment" | "max_steps",
     "llm": {"actions": ..., "fallbacks": ..., "prompt_tokens": ..., "completion_tokens": ...,
             "retries": ...}}
    {"kind": "failure", "operator": ..., "episode": ..., "seed": ..., "step_index": ...,
     "phase": "launch" | "reset" | "step" | "episode_end" | "fallbacks", "cause": ...,
     "exit_code": ..., "message": ...}
    {"kind": "run_end", "completed": ..., "interrupted": ..., "wall_time_s": ...}

A game (an operator with ``players``; :mod:`._game`) writes one ``step`` line per acting
player, with ``player`` (its id in the game), ``actor`` (its worker's operator id,
``<operator>.<player>``), ``rewards`` (every player's reward of the step), ``episode_reward``
(that player's return so far) and, from the chess worker, ``move`` (UCI). Its ``episode`` lines
add ``players``: per player its ``operator``, ``return``, ``actions`` and ``llm`` counts (its
``total_reward`` is the sum of the returns). The run's ``operators`` list its players.

``llm`` is there only for operators whose replies account for LLM calls: a step's is the
worker's account of that action without the endpoint (:mod:`mosaic.operators.llm_accounting`),
an episode's adds them up. ``bdi`` is a BDI worker's account of a step's decision
(``source``: ``plan`` or ``fallback``, ``reason``, ``cycles``, ``plan_failures``;
:mod:`mosaic.operators.bdi`). The step that ends an episode is written even when its
``episode_end`` never comes (the operator then fails in phase ``episode_end``).

Only ``run_end`` carries a wall-clock value, so the same evaluation file with the same workers
gives identical ``run``, ``step`` and ``episode`` lines (a ``failure`` line can differ in how the
worker ended, e.g. which signal stopped a silent one). Lines are buffered and
flushed at every episode boundary, not written one system call per step.

The results store (SQLite, as for experiments) gets the evaluation, one run per operator, its
state transitions, episodes and steps, and how it ended (:mod:`._store`); ``mosaic runs list``
and ``mosaic runs show`` read it.

``mosaic evaluate FILE`` (:func:`run_script_file`) runs a file; exit code 0 when every operator
finished, 1 when one failed, 2 for a bad file or store path, 130 on Ctrl-C.

The pieces are private modules, most shared with Manual mode: results (``_results``), telemetry
(``_telemetry``), lanes and rounds (``_lanes``), the session that drives the lanes through the
operator services (``_session``: ActorService, seed broadcast, MultiOperatorService), the
comparison table (``_report``) and the store records (``_store``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic.core.errors import StoreError
from mosaic.core.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_SIGNAL
from mosaic.core.run_states import RunStatus
from mosaic.core.seeding import operator_seed
from mosaic.core.store_path import resolve_store
from mosaic.core.store_url import mask
from mosaic.operators.evaluation._lanes import Lane, Launcher, new_run_id
from mosaic.operators.evaluation._report import format_comparison_table
from mosaic.operators.evaluation._results import (
    EpisodeResult,
    OperatorFailure,
    OperatorResult,
    ScriptResult,
)
from mosaic.operators.evaluation._session import EvaluationSession
from mosaic.operators.evaluation._store import StoreRecorder
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

if TYPE_CHECKING:
    from mosaic.store.writer import StoreWriter

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


#: How long ``mosaic evaluate`` waits for the store to commit what was played, at the end.
STORE_CLOSE_TIMEOUT_S = 30.0


# -- from evaluation entries to worker configurations ------------------------------------------


def _declares_ansi(env_id: str) -> bool:
    """True when the Gymnasium environment ``env_id`` lists ``ansi`` among its render modes."""
    from mosaic.environments.gymnasium_make import declared_render_modes

    try:
        return "ansi" in declared_render_modes(env_id)
    except Exception:  # unknown or unloadable here: the worker will say why
        return False


def operator_config_for(
    spec: OperatorSpec, config: EvaluationConfig, *, render: bool = False,
    game_render: Sequence[str] = (),
) -> Any:
    """The :class:`~mosaic.operators.api.config.OperatorConfig` that launches ``spec``'s worker.

    ``env_kwargs`` travel in ``settings["env_kwargs"]``; ``max_steps`` is the file's; the
    operator's own seed (:meth:`EvaluationConfig.operator_seed` of its position) travels in
    ``settings["seed"]`` unless the file sets one, so that its actions come from its own seed
    stream, not from the episode seeds every operator shares. With
    ``render`` (Manual mode) the worker is asked for a text frame on every step
    (``render_every: 1, render_mode: ansi``) when the environment can render text and the
    file did not choose render settings itself.

    A game (``players``) gets a multi-agent config: one
    :class:`~mosaic.operators.api.config.WorkerAssignment` per player, each with its own seed
    (derived from the operator's seed and the player's position) unless its settings give one;
    the game's ``env_kwargs``, each player's display name and the render modes to try
    (``game_render``, or ``ansi`` with ``render``) travel in its settings
    (:data:`~mosaic.operators.evaluation._game.GAME_SETTINGS`).
    """
    from mosaic.operators.api.config import OperatorConfig

    index = [s.id for s in config.operators].index(spec.id)
    if spec.players is not None:
        return _game_config_for(spec, config, index,
                                tuple(game_render) or (("ansi",) if render else ()))
    if spec.type is None:  # load_evaluation refuses it: a type or players is required
        raise ValueError(f"operator {spec.id!r} has neither a type nor players")
    settings: dict[str, Any] = dict(spec.settings)
    settings.setdefault("seed", config.operator_seed(index))
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


def _game_config_for(spec: OperatorSpec, config: EvaluationConfig, index: int,
                     render_modes: tuple[str, ...]) -> Any:
    from mosaic.operators.api.config import OperatorConfig, WorkerAssignment

    players = spec.players or {}
    assignments = {}
    for position, (player, player_spec) in enumerate(players.items()):
        settings: dict[str, Any] = dict(player_spec.settings)
        settings.setdefault("seed", operator_seed(config.operator_seed(index), position))
        assignments[player] = WorkerAssignment(
            worker_id=f"{player_spec.type}_worker", worker_type=player_spec.type,
            settings=settings,
            command=tuple(player_spec.command) if player_spec.command is not None else None)
    return OperatorConfig.multi_agent(
        operator_id=spec.id,
        display_name=spec.label,
        env_name=spec.env.partition(":")[0],
        task=spec.env,
        worker_assignments=assignments,
        settings={"env_kwargs": dict(spec.env_kwargs), "render_modes": list(render_modes),
                  "display_names": {player: player_spec.display_name or player
                                    for player, player_spec in players.items()}},
        max_steps=config.max_steps,
    )


def _describe(spec: OperatorSpec) -> dict[str, Any]:
    """An operator in the ``run`` record; a game's with its players."""
    described: dict[str, Any] = {"id": spec.id, "type": spec.kind, "display_name": spec.label,
                                 "env": spec.env}
    if spec.players is not None:
        described["players"] = {
            player: {"operator": f"{spec.id}.{player}", "type": player_spec.type,
                     "display_name": player_spec.display_name or player}
            for player, player_spec in spec.players.items()}
    return described


def _run_header(config: EvaluationConfig) -> dict[str, Any]:
    return {
        "kind": "run",
        "mode": "script",
        "uid": config.uid,
        "environment_mode": config.environment_mode,
        "episodes": config.episode_count,
        "seeds": config.episode_seeds(),
        "seed": config.run_seed,
        "max_steps": config.max_steps,
        "operators": [_describe(s) for s in config.operators],
    }


# -- the run -----------------------------------------------------------------------------------


def run_script(
    config: EvaluationConfig,
    *,
    telemetry_path: str | Path,
    progress: ProgressCallback | None = None,
    launcher: Launcher | None = None,
    sleep: Callable[[float], None] = time.sleep,
    store: StoreWriter | None = None,
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

    With ``store`` (a started writer), the evaluation is also recorded in the results store, one
    run per operator (see :mod:`mosaic.operators.evaluation._store`); each run ends ``finished``,
    ``failed`` with its operator's error, ``cancelled`` on ``KeyboardInterrupt``, or ``failed``
    with an unexpected error. The records are queued when this returns or raises; closing or
    flushing the writer commits them. Raises ``StoreError`` if the store refuses the evaluation,
    before any worker starts.
    """
    path = Path(telemetry_path)
    run_id = new_run_id(config.uid)
    session = EvaluationSession(
        [operator_config_for(spec, config) for spec in config.operators],
        config.timeouts, config.max_fallback_fraction, launcher=launcher, run_id=run_id)
    lanes = session.lanes
    telemetry = Telemetry(path, progress)
    recorder: StoreRecorder | None = None

    def write_lanes(which: Sequence[Lane]) -> None:
        for lane in which:  # the store first: the progress callback may raise
            records = lane.drain()
            if recorder is not None:
                recorder.write(records)
            for record in records:
                telemetry.write(record)

    started = time.monotonic()
    completed = interrupted = False
    stopped_by: BaseException | None = None
    try:
        telemetry.write(_run_header(config))
        if store is not None:
            recorder = StoreRecorder(store, config, run_id)
        session.launch_all()
        if recorder is not None:
            for lane in lanes:
                if lane.alive:
                    recorder.running(lane.operator_id)
        write_lanes(lanes)
        for episode_index, seed in enumerate(config.episode_seeds()):
            if not any(lane.alive for lane in lanes):
                break
            playing = session.reset_all(episode_index, seed)  # the seed goes to every actor
            write_lanes(lanes)
            while playing:
                session.step(playing)
                write_lanes(playing)
                playing = [lane for lane in playing if lane.in_episode]
                if playing and config.step_pacing > 0:
                    sleep(config.step_pacing)
            telemetry.flush()
        completed = True
    except KeyboardInterrupt:
        interrupted = True
        raise
    except BaseException as exc:
        stopped_by = exc
        raise
    finally:
        if recorder is not None:
            recorder.stopping(*_ending(completed, interrupted, stopped_by))
        try:
            session.close()
            write_lanes(lanes)
        finally:
            try:
                telemetry.write(
                    {
                        "kind": "run_end",
                        "completed": completed,
                        "interrupted": interrupted,
                        "wall_time_s": round(time.monotonic() - started, 3),
                    }
                )
                telemetry.close()
            finally:
                if recorder is not None:
                    recorder.finish()
    return ScriptResult(
        uid=config.uid,
        telemetry_path=path,
        episodes_planned=config.episode_count,
        operators={key: result for lane in lanes for key, result in lane.results().items()},
        run_id=run_id,
    )


def _ending(
    completed: bool, interrupted: bool, error: BaseException | None
) -> tuple[RunStatus, str, str | None]:
    """How the runs still going end: their status, why they stop, and the error if any."""
    if completed:
        return RunStatus.FINISHED, "every episode played", None
    if interrupted:
        return RunStatus.CANCELLED, "interrupted", None
    what = f"the evaluation stopped: {type(error).__name__}: {error}"
    return RunStatus.FAILED, what, what


# -- the command line --------------------------------------------------------------------------


def run_script_file(
    file: str | Path,
    *,
    telemetry: str | Path | None = None,
    quiet: bool = False,
    store: str | None = None,
) -> int:
    """Run the evaluation file ``file`` headless, printing progress and the comparison table.

    This is ``mosaic evaluate``. ``telemetry`` overrides the file's telemetry path; ``quiet``
    prints only the table. The results store is ``store`` (``--store``: a PostgreSQL URL, or a
    path relative to the current folder), else ``<file stem>.sqlite`` next to the file;
    everything played is committed to it before this returns. Returns the exit code
    (:mod:`mosaic.core.exit_codes`): ``EXIT_OK`` when every operator finished every episode,
    ``EXIT_FAILED`` when one failed or the store failed under the run, ``EXIT_BAD_INPUT`` for
    an unwritable telemetry path or a store that cannot be opened, 130 on Ctrl-C (every worker
    is stopped first). Raises ``ConfigError`` for a bad file, a store path that cannot be a
    SQLite file, or a store URL that cannot be used, before anything starts.
    """
    from mosaic.store import StoreWriter

    config = load_evaluation(file)
    shown = os.fspath(file)
    target = resolve_store(shown, Path(shown).expanduser().resolve(), store, key="--store")
    store_path = mask(target)
    path = resolve_telemetry_path(config, telemetry)
    try:
        writer = StoreWriter(target)
        writer.start()
    except StoreError as exc:  # another program's database, or a store of another version
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    def progress(record: Mapping[str, Any]) -> None:
        if record["kind"] == "episode" and "players" in record:
            returns = ", ".join(f"{player} {summary['return']:g}" + (
                f" ({summary['llm']['fallbacks']} fallbacks)" if "llm" in summary else "")
                for player, summary in record["players"].items())
            print(f"  {record['operator']}: episode {record['episode']} (seed {record['seed']}) "
                  f"returns {returns} in {record['length']} steps", flush=True)
        elif record["kind"] == "episode":
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
        try:
            result = run_script(config, telemetry_path=path,
                                progress=None if quiet else progress, store=writer)
        finally:
            writer.close(STORE_CLOSE_TIMEOUT_S)
    except KeyboardInterrupt:
        print(f"interrupted: every worker was stopped; what was played is in {store_path}",
              file=sys.stderr)
        return EXIT_SIGNAL[signal.SIGINT]
    except OSError as exc:
        print(f"error: cannot write telemetry to {path}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreError as exc:
        # The database failed under the run (disk full, locked for too long): what was
        # committed before stays readable.
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(format_comparison_table(result))
    if not quiet:
        first = f"{result.run_id}-{config.operators[0].id}"
        print(f"\nResults: {store_path}\n  mosaic runs list --store {store_path}\n"
              f"  mosaic runs show {first} --store {store_path}")
    return EXIT_OK if result.ok else EXIT_FAILED

