"""Manual mode: N operators side by side in a terminal, stepped in lock-step by hand.

Every operator runs in its own worker subprocess with its own environment instance. "Step All"
advances every operator whose episode is still running by one step; "Reset All" starts a new
episode for all of them on one shared seed, so they face identical initial conditions. An
operator whose episode ended waits for the next Reset All. An operator whose worker fails is
marked failed (with its cause) and the others carry on.

Commands at the prompt::

    s, step        Step All: one step for every operator
    n N            Step All N times (stops early when every episode is over)
    r [SEED]       Reset All on SEED, or on the evaluation file's next scheduled seed
    h, help        this list
    q, quit        stop every worker and leave

A game (an operator with ``players``) is one panel: Step All takes one step of the game (the
move of the player whose turn it is, asked through the game's policy mapping), Reset All
broadcasts the shared seed to its players and resets the board on it; the screen lists the
players (``>`` marks the one to act) with their last move, return and LLM fallbacks, and the
board when the game renders text.

Manual mode reads the same evaluation file as Script mode (``step_pacing`` animates ``n N``) and
writes the same JSONL telemetry, plus an ``episode_abandoned`` line for an episode cut short by
Reset All (``"ended_by": "reset"``) or by quitting (``"ended_by": "quit"``), with its steps so
far, its return and its LLM fallbacks. ``mosaic manual FILE`` (:func:`run_manual_file`) runs
it; exit code 0, or 1 when an operator failed, 2 for a bad file, 130 on Ctrl-C.

Why one file of this length: the terminal session (commands, screen, pacing) and the lock-step
round it drives are one interaction; the lanes and results it shares with Script mode live in
the private modules beside it.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Self

from mosaic.core.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_SIGNAL
from mosaic.operators.evaluation._game import GameLane, PlayerView
from mosaic.operators.evaluation._lanes import Lane, Launcher, new_run_id
from mosaic.operators.evaluation._session import EvaluationSession
from mosaic.operators.evaluation._telemetry import Telemetry, resolve_telemetry_path
from mosaic.operators.evaluation.schema import EvaluationConfig, TimeoutsSpec, load_evaluation
from mosaic.operators.evaluation.script import operator_config_for
from mosaic.operators.llm_accounting import DEFAULT_MAX_FALLBACK_FRACTION
from mosaic.operators.moves import MoveChoice

__all__ = ["ManualSession", "OperatorView", "PlayerView", "run_manual", "run_manual_file"]

HELP = """commands:
  s, step      Step All: one step for every operator
  n N          Step All N times
  r [SEED]     Reset All on SEED (default: the next scheduled seed)
  h, help      this help
  q, quit      stop every worker and leave"""


@dataclass(frozen=True)
class OperatorView:
    """What the screen shows for one operator after the last command."""

    operator_id: str
    display_name: str
    episode_index: int | None
    seed: int | None
    steps: int
    last_action: Any
    last_reward: float | None
    episode_return: float
    episode_over: bool
    terminated: bool
    truncated: bool
    failure: str | None
    render_text: str | None
    #: The operator's type (``random``, ``human``, ..., ``game``) and its last RGB frame, a
    #: base64 PNG.
    operator_type: str = ""
    render_png: str | None = None
    #: A game's players (None for a one-worker operator); ``last_action`` is then the last
    #: player's, and ``episode_return`` the sum of the players' returns.
    players: tuple[PlayerView, ...] | None = None


class ManualSession:
    """N operator workers stepped in lock-step, all reset on one shared seed.

    ``configs`` are :class:`~mosaic.operators.api.config.OperatorConfig` objects (single-agent: each
    worker owns its environment). Nothing starts until :meth:`start`, which launches every worker
    and resets all on ``seed``; use the session as a context manager so that :meth:`close` stops
    and reaps every worker, also on error. Each call waits at most ``timeouts.reset`` per
    operator for a reset and ``timeouts.step`` per operator for a step; a worker that fails is
    recorded as failed and stopped, and never raises out of these methods.
    """

    def __init__(
        self,
        configs: Sequence[Any],
        seed: int,
        *,
        telemetry_path: str | Path | None = None,
        timeouts: TimeoutsSpec | None = None,
        launcher: Launcher | None = None,
        run_id: str = "manual",
        max_fallback_fraction: float = DEFAULT_MAX_FALLBACK_FRACTION,
    ) -> None:
        ids = [c.operator_id for c in configs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"operator ids must be unique, got {ids}")
        self.seed = seed
        self.episode_index = -1
        self._session = EvaluationSession(configs, timeouts or TimeoutsSpec(),
                                          max_fallback_fraction, launcher=launcher, run_id=run_id)
        self._lanes = self._session.lanes
        self._telemetry = Telemetry(Path(telemetry_path) if telemetry_path is not None else None)
        self._started = False
        self._closed = False

    # -- lifecycle --

    def start(self) -> None:
        """Launch every worker and Reset All on the constructor's seed (idempotent)."""
        if self._started:
            return
        self._started = True
        self._telemetry.write(
            {
                "kind": "run",
                "mode": "manual",
                "operators": [_describe(lane) for lane in self._lanes],
                "max_steps": max((lane.config.max_steps for lane in self._lanes), default=0),
            }
        )
        self._session.launch_all()
        self._telemetry.write_lanes(self._lanes)
        self.reset_all(self.seed)

    def close(self) -> None:
        """Record every episode still running as abandoned (``ended_by: quit``), stop and reap
        every worker and close the telemetry file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._started:
                self._abandon("quit")
            self._session.close()
            self._telemetry.write_lanes(self._lanes)
        finally:
            self._telemetry.write({"kind": "run_end", "completed": True})
            self._telemetry.close()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- commands --

    def reset_all(self, seed: int | None = None) -> None:
        """Start the next episode for every live operator on ``seed`` (None: the last seed).

        An episode still running is abandoned (recorded as ``episode_abandoned``).
        """
        self._require_started()
        if seed is not None:
            if seed < 0:
                raise ValueError(f"seed must be >= 0, got {seed}")
            self.seed = seed
        self._abandon("reset")
        self.episode_index += 1
        self._session.reset_all(self.episode_index, self.seed)  # the seed goes to every actor
        self._telemetry.write_lanes(self._lanes)
        self._telemetry.flush()

    def _abandon(self, ended_by: str) -> None:
        """Write an ``episode_abandoned`` record for every live operator still in an episode."""
        for lane in self._lanes:
            if lane.in_episode and lane.alive:
                self._telemetry.write(lane.episode_record(
                    "episode_abandoned", length=lane.steps, episode_reward=lane.episode_reward,
                    ended_by=ended_by))

    def step_all(self, operators: Collection[str] | None = None) -> int:
        """One step for every operator still in its episode (only those whose ids are in
        ``operators``, if given); returns how many stepped."""
        self._require_started()
        playing = [lane for lane in self._lanes if lane.alive and lane.in_episode
                   and (operators is None or lane.operator_id in operators)]
        stepped = self._session.step(playing)
        self._telemetry.write_lanes(self._lanes)
        if not self.any_playing:
            self._telemetry.flush()
        return stepped

    def step_n(
        self, n: int, *, pacing: float = 0.0, on_round: Callable[[], None] | None = None,
        operators: Collection[str] | Callable[[], Collection[str]] | None = None,
    ) -> int:
        """Up to ``n`` Step All rounds (of ``operators`` only, if given: ids, or a callable
        asked before each round), ending early when none of them is in an episode; returns
        the rounds.

        ``on_round()`` (if given) is called after each round and ``pacing`` seconds pass between
        rounds.
        """
        def chosen() -> Collection[str] | None:
            return operators() if callable(operators) else operators

        rounds = 0
        for _ in range(max(0, n)):
            if not self.playing(chosen()):
                break
            self.step_all(chosen())
            rounds += 1
            if on_round is not None:
                on_round()
            if pacing > 0 and self.playing(chosen()) and rounds < n:
                time.sleep(pacing)
        self._telemetry.flush()
        return rounds

    # -- state --

    @property
    def any_playing(self) -> bool:
        """True while some live operator's episode is still running."""
        return self.playing()

    def playing(self, operators: Collection[str] | None = None) -> bool:
        """True while some live operator (of ``operators``, if given) is in its episode."""
        return any(lane.alive and lane.in_episode for lane in self._lanes
                   if operators is None or lane.operator_id in operators)

    def human_turns(self) -> dict[str, dict[str, list[MoveChoice]]]:
        """Each game waiting for human players now: its id -> each such player's legal moves,
        named as a person types them (:meth:`GameLane.human_turns`)."""
        turns = {}
        for lane in self._lanes:
            if isinstance(lane, GameLane) and (waiting := lane.human_turns()):
                turns[lane.operator_id] = waiting
        return turns

    @property
    def failed(self) -> bool:
        """True when some operator failed."""
        return any(lane.result.failed for lane in self._lanes)

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [lane.handle.pid for lane in self._lanes if lane.handle is not None]

    def views(self) -> list[OperatorView]:
        """One :class:`OperatorView` per operator, in configuration order."""
        views = []
        for lane in self._lanes:
            step = lane.last_step or {}
            render = lane.last_render or {}
            text = render.get("text") if render.get("mode") == "ansi" else None
            failure = lane.result.failure
            is_game = isinstance(lane, GameLane)
            views.append(
                OperatorView(
                    operator_id=lane.operator_id,
                    display_name=lane.label,
                    episode_index=lane.episode_index,
                    seed=lane.seed,
                    steps=lane.steps,
                    last_action=step.get("action"),
                    last_reward=step.get("reward"),
                    episode_return=lane.episode_reward,
                    episode_over=not lane.in_episode,
                    terminated=bool(step.get("terminated", False)),
                    truncated=bool(step.get("truncated", False)) or (
                        lane.last_episode is not None
                        and lane.last_episode.episode_index == lane.episode_index
                        and lane.last_episode.truncated
                    ),
                    failure=failure.message if failure is not None else None,
                    render_text=text if isinstance(text, str) else None,
                    operator_type="game" if is_game else lane.config.operator_type,
                    render_png=png if isinstance(png := render.get("png"), str) else None,
                    players=lane.views() if isinstance(lane, GameLane) else None,
                )
            )
        return views

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("call start() (or use the session as a context manager) first")
        if self._closed:
            raise RuntimeError("this session is closed")


def _describe(lane: Lane) -> dict[str, Any]:
    """A lane in the ``run`` record; a game's with its players."""
    config = lane.config
    described: dict[str, Any] = {
        "id": lane.operator_id, "type": "game" if config.is_multi_agent else config.operator_type,
        "display_name": lane.label, "env": config.task}
    if isinstance(lane, GameLane):
        described["players"] = {
            view.player: {"operator": view.operator_id, "type": view.operator_type,
                          "display_name": view.display_name} for view in lane.views()}
    return described


# -- the text UI -------------------------------------------------------------------------------


def format_screen(views: Sequence[OperatorView]) -> str:
    """The text shown after each command: one block per operator, with its render if any."""
    lines: list[str] = []
    for view in views:
        title = f"[{view.operator_id}]"
        if view.display_name != view.operator_id:
            title += f" {view.display_name}"
        if view.failure is not None:
            lines.append(f"{title}  FAILED: {view.failure}")
            continue
        where = f"episode {view.episode_index} (seed {view.seed})"
        if view.steps == 0:
            lines.append(f"{title}  {where}  step 0  (ready)")
        else:
            reward = "-" if view.last_reward is None else f"{view.last_reward:g}"
            lines.append(
                f"{title}  {where}  step {view.steps}  action {view.last_action}  "
                f"reward {reward}  return {view.episode_return:g}"
            )
        for player in view.players or ():
            line = (f"  {'>' if player.to_act else ' '} {player.player} [{player.operator_id}]"
                    f" {player.display_name}: return {player.episode_return:g} in "
                    f"{player.actions} actions")
            if player.last_action is not None:
                line += f", last {player.last_move or player.last_action}"
            if player.fallbacks is not None:
                line += f", fallbacks {player.fallbacks}"
            lines.append(line)
        if view.render_text:
            lines.extend("  " + row for row in view.render_text.strip("\n").splitlines())
        if view.episode_over:
            how = "terminated" if view.terminated else "truncated" if view.truncated else "ended"
            lines.append(f"  episode over ({how}): return {view.episode_return:g} in "
                         f"{view.steps} steps; r to reset")
    return "\n".join(lines)


def _show(output: IO[str], views: Sequence[OperatorView]) -> None:
    _say(output, "\n" + format_screen(views))


def _say(output: IO[str], text: str) -> None:
    output.write(text + "\n")
    output.flush()


def run_manual(
    config_path_or_configs: str | Path | EvaluationConfig | Sequence[Any],
    *,
    input: IO[str] = sys.stdin,
    output: IO[str] = sys.stdout,
    telemetry: str | Path | None = None,
    launcher: Launcher | None = None,
) -> int:
    """Run the interactive loop on an evaluation file, a loaded evaluation, or a list of
    :class:`~mosaic.operators.api.config.OperatorConfig`.

    With a file or an evaluation, episode *k* is reset on the file's scheduled seed for *k*
    (``r`` without a seed moves to the next one) and telemetry goes where
    :func:`~mosaic.operators.evaluation.script.resolve_telemetry_path` says (``telemetry``
    overrides). With a list of configs, every ``r`` without a seed replays seed 0, the default
    timeouts apply, and telemetry is written only when ``telemetry`` names a file.

    Reads one command per line from ``input`` until ``q`` or end of input, writing screens to
    ``output``. Returns ``EXIT_OK``, or ``EXIT_FAILED`` when an operator failed; raises
    ``ConfigError`` for a bad file.
    Every worker is stopped before it returns, also on ``KeyboardInterrupt`` (which propagates).
    """
    if isinstance(config_path_or_configs, (str, Path, EvaluationConfig)):
        if isinstance(config_path_or_configs, EvaluationConfig):
            config = config_path_or_configs
        else:
            config = load_evaluation(config_path_or_configs)
        telemetry_path: Path | None = resolve_telemetry_path(config, telemetry)
        configs = [operator_config_for(spec, config, render=True) for spec in config.operators]
        uid, timeouts, pacing = config.uid, config.timeouts, config.step_pacing
        seed_for: Callable[[int], int] = config.seed_for_episode
        max_fallbacks = config.max_fallback_fraction
    else:
        configs = list(config_path_or_configs)
        telemetry_path = Path(telemetry) if telemetry is not None else None
        uid, timeouts, pacing = "manual", TimeoutsSpec(), 0.0
        seed_for = _always_zero
        max_fallbacks = DEFAULT_MAX_FALLBACK_FRACTION

    next_episode = 1  # episode 0 is played on the first scheduled seed at start
    session = ManualSession(
        configs,
        seed_for(0),
        telemetry_path=telemetry_path,
        timeouts=timeouts,
        launcher=launcher,
        run_id=new_run_id(uid),
        max_fallback_fraction=max_fallbacks,
    )
    with session:
        _say(output, f"mosaic manual mode: {uid}, {len(configs)} operators; "
                     f"telemetry -> {telemetry_path or 'none'}; h for help")
        _show(output, session.views())
        while True:
            output.write("> ")
            output.flush()
            line = input.readline()
            if not line:
                break
            words = line.split()
            if not words:
                continue
            command, args = words[0].lower(), words[1:]
            if command in ("q", "quit", "exit"):
                break
            if command in ("h", "help", "?"):
                _say(output, HELP)
                continue
            if command in ("s", "step"):
                if not session.any_playing:
                    _say(output, "every episode is over: r to reset")
                    continue
                session.step_all()
            elif command == "n":
                count = _parse_int(args[0] if args else "1")
                if count is None or count < 1:
                    _say(output, "usage: n N, with N a positive integer")
                    continue
                if not session.any_playing:
                    _say(output, "every episode is over: r to reset")
                    continue
                animate = pacing > 0

                def show() -> None:
                    _show(output, session.views())

                session.step_n(
                    count, pacing=pacing, on_round=show if animate else None
                )
                if animate:
                    continue
            elif command == "r":
                seed = _parse_int(args[0]) if args else seed_for(next_episode)
                if seed is None or seed < 0:
                    _say(output, "usage: r [SEED], with SEED a non-negative integer")
                    continue
                if not args:
                    next_episode += 1
                session.reset_all(seed)
            else:
                _say(output, f"unknown command {words[0]!r}; h for help")
                continue
            _show(output, session.views())
        failed = session.failed
    _say(output, "stopped every worker" + ("; some operators failed" if failed else ""))
    return EXIT_FAILED if failed else EXIT_OK


def _always_zero(episode: int) -> int:
    return 0


def _parse_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def run_manual_file(file: str | Path, *, telemetry: str | Path | None = None) -> int:
    """The interactive loop on the evaluation file ``file``, on stdin and stdout.

    This is ``mosaic manual``; ``telemetry`` overrides the file's telemetry path. Returns the
    exit code (:mod:`mosaic.core.exit_codes`): ``EXIT_OK``, ``EXIT_FAILED`` when an operator
    failed, ``EXIT_BAD_INPUT`` for an unwritable telemetry path, 130 on Ctrl-C (every worker is
    stopped first). Raises ``ConfigError`` for a bad file, before anything starts.
    """
    try:
        return run_manual(file, telemetry=telemetry)
    except KeyboardInterrupt:
        print("\ninterrupted: every worker was stopped", file=sys.stderr)
        return EXIT_SIGNAL[signal.SIGINT]
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

