"""Manual mode in the browser: one evaluation file's :class:`ManualSession`, driven from a page.

The session lives on a thread of its own, which launches the workers and runs every command in
order: the launcher ties each worker's life to the thread that started it, so the workers must
not be started from a pool thread that may end. The page sends commands (Step All, Step N,
Reset All, a human's action) and reads :meth:`BrowserManual.snapshot`, whose ``version`` grows
with every change; the live channel sends a snapshot whenever it does, so that Step N shows
every round.

Every operator's worker renders each step (an RGB frame as a PNG where the environment can, text
otherwise); a game (an operator with ``players``) is drawn by the driver, which owns it, and its
panel lists its players: who is to move, each one's last move, return and LLM fallbacks. A ``human``
operator's worker, or a human player's of a game, reads its actions from a pseudo-terminal of its
own, which the page writes to: clicking an action steps that operator alone, while Step All and
Step N step the others. A game waiting for a human player's move shows that player's legal moves
(named as the human worker names them: SAN in chess, :mod:`mosaic.operators.moves`) and a move
field; the move is checked here before it is written, and steps the game (in a parallel game, once
every human player it waits for has moved). Step All and Step N leave a game alone while it waits
for a person. A worker that fails is shown failed in its panel; the others go on, as in the
terminal.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import threading
import tty
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mosaic.operators.evaluation.manual import ManualSession, OperatorView
from mosaic.operators.evaluation.schema import EvaluationConfig, OperatorSpec, load_evaluation
from mosaic.operators.evaluation.script import operator_config_for
from mosaic.operators.moves import MoveChoice, parse_move

__all__ = ["MAX_STEP_N", "BrowserManual", "CommandError"]

#: The frames a game's board is drawn in, the first the game declares: a picture, else text.
GAME_RENDER_MODES = ("rgb_array", "ansi")
#: The most rounds one Step N may ask for.
MAX_STEP_N = 10_000
_COMMAND_TIMEOUT = 600.0


class CommandError(ValueError):
    """A command the session cannot take now (bad value, not open); the message says why."""


class BrowserManual:
    """The evaluation file ``path`` in Manual mode, opened on demand by :meth:`open`.

    Nothing runs until :meth:`open`; :meth:`close` stops and reaps every worker and the
    session's thread (idempotent). Commands wait at most ``timeouts`` of the file per operator
    and step, as in the terminal.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.version = 0
        self._lock = threading.Lock()
        self._commands: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]
                                    | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._session: ManualSession | None = None
        self._config: EvaluationConfig | None = None
        self._ptys: dict[str, tuple[int, int]] = {}
        self._actions: dict[str, list[tuple[int, str]]] = {}
        self._turns: dict[str, dict[str, list[MoveChoice]]] = {}
        self._moved: dict[str, dict[str, int]] = {}
        self._busy: set[str] = set()
        self._views: list[OperatorView] = []
        self._shared: tuple[int | None, int | None] = (None, None)
        self._error: str | None = None
        self._next_episode = 1
        self._state = "closed"

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Read the file and start every worker, reset on the file's first seed.

        Idempotent while open. Raises ConfigError for a bad file; a worker that cannot start is
        shown failed in its panel instead.
        """
        with self._lock:
            if self._thread is not None:
                return
            config = load_evaluation(self.path)
            self._config = config
            self._thread = threading.Thread(target=self._serve, name="mosaic-dashboard-manual",
                                            daemon=True)
            self._state = "starting"
            self._thread.start()
        self._bump()
        try:
            self.run(self._start)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every worker and the session thread; the page shows the file closed."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        self._commands.put(None)
        thread.join(timeout=60)
        self._state = "closed"
        self._bump()

    def run(self, command: Callable[[], Any]) -> Any:
        """Run ``command`` on the session thread and return its result (or raise its error).

        Raises CommandError when the file is not open.
        """
        if self._thread is None:
            raise CommandError("this file is not open")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._commands.put((command, future))
        return future.result(timeout=_COMMAND_TIMEOUT)

    # -- commands (on the session thread) ------------------------------------------------------

    def step_all(self, rounds: int = 1) -> None:
        """Step every non-human operator ``rounds`` times (Step All, or Step N)."""
        if not 1 <= rounds <= MAX_STEP_N:
            raise CommandError(f"steps must be between 1 and {MAX_STEP_N}, not {rounds}")
        self.run(lambda: self._step(rounds))

    def reset_all(self, seed: int | None) -> None:
        """Reset All on ``seed``, or on the file's next scheduled seed when None."""
        if seed is not None and not 0 <= seed < 2**63:
            raise CommandError(f"a seed is a whole number >= 0, not {seed}")
        self.run(lambda: self._reset(seed))

    def act(self, operator_id: str, action: int) -> None:
        """One step of human operator ``operator_id`` with ``action``."""
        actions = self._actions.get(operator_id)
        if actions is None:
            raise CommandError(f"{operator_id!r} is not a human operator of this file")
        if action not in {index for index, _ in actions}:
            raise CommandError(f"action {action} is not one of {[i for i, _ in actions]}")
        self.run(lambda: self._act(operator_id, action))

    def play(self, operator_id: str, player: str, move: str) -> None:
        """Human ``player`` of game ``operator_id`` plays ``move`` (a name, UCI in chess, or an
        index); CommandError when the game does not wait for that player or the move is not
        legal."""
        self.run(lambda: self._play(operator_id, player, move))

    def _start(self) -> None:
        config = self._config
        if config is None:
            raise CommandError("this file is not open")
        configs = [operator_config_for(self._browser_spec(spec), config,
                                       game_render=GAME_RENDER_MODES)
                   for spec in config.operators]
        self._session = ManualSession(configs, config.seed_for_episode(0),
                                      timeouts=config.timeouts, run_id=f"{config.uid}-dashboard")
        self._busy = {spec.id for spec in config.operators}
        self._session.start()
        self._state = "open"
        self._done()

    def _browser_spec(self, spec: OperatorSpec) -> OperatorSpec:
        if spec.players is not None:  # a game: the driver renders the board
            players = {
                player: entry.model_copy(update={"settings": {
                    **entry.settings, "tty": self._terminal(f"{spec.id}.{player}")}})
                if entry.type == "human" else entry
                for player, entry in spec.players.items()}
            return spec.model_copy(update={"players": players})
        settings = dict(spec.settings)
        settings.setdefault("render_every", 1)
        if spec.type == "human":
            settings["tty"] = self._terminal(spec.id)
            self._actions[spec.id] = _action_choices(spec)
        return spec.model_copy(update={"settings": settings})

    def _terminal(self, worker_id: str) -> str:
        """A pseudo-terminal for the human worker ``worker_id``; its path."""
        master, slave = os.openpty()
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._ptys[worker_id] = (master, slave)
        return os.ttyname(slave)

    def _step(self, rounds: int) -> None:
        session = self._require()

        def machines() -> list[str]:  # a game waiting for a person is left to the page
            return [op for op in self._ids() if op not in self._actions and op not in self._turns]

        if not session.playing(machines()):
            waiting = [op for op in self._ids() if op in self._turns
                       or (op in self._actions and session.playing([op]))]
            raise CommandError(f"nothing to step: {', '.join(waiting)} "
                               f"{'waits' if len(waiting) == 1 else 'wait'} for your move"
                               if waiting else "nothing to step: every episode is over; "
                                               "Reset All starts the next")
        self._busy = {v.operator_id for v in session.views()
                      if v.operator_id in machines() and not v.episode_over
                      and v.failure is None}
        self._bump()
        pacing = self._config.step_pacing if self._config is not None and rounds > 1 else 0.0
        session.step_n(rounds, pacing=pacing, on_round=self._refresh, operators=machines)
        self._done()

    def _reset(self, seed: int | None) -> None:
        session = self._require()
        if seed is None and self._config is not None:
            seed = self._config.seed_for_episode(self._next_episode)
            self._next_episode += 1
        self._busy = set(self._ids())
        self._moved = {}  # moves typed for the episode that ends
        self._bump()
        session.reset_all(seed)
        self._done()

    def _act(self, operator_id: str, action: int) -> None:
        session = self._require()
        if not session.playing([operator_id]):
            raise CommandError(f"{operator_id!r} has no episode running: Reset All first")
        self._type(operator_id, action)
        self._busy = {operator_id}
        self._bump()
        session.step_all([operator_id])
        self._done()

    def _play(self, operator_id: str, player: str, move: str) -> None:
        session = self._require()
        choices = self._turns.get(operator_id, {}).get(player)
        if choices is None:
            raise CommandError(f"game {operator_id!r} does not wait for a move of {player!r}")
        moved = self._moved.setdefault(operator_id, {})
        if player in moved:
            raise CommandError(f"{player} has moved; game {operator_id!r} waits for "
                               + ", ".join(p for p in self._turns[operator_id] if p not in moved))
        choice = parse_move(move, choices)
        if choice is None:
            raise CommandError(f"{move.strip()!r} is not a legal move of {player} now; legal: "
                               + ", ".join(c.name for c in choices))
        moved[player] = choice.action
        if not set(self._turns[operator_id]) <= set(moved):  # a parallel game: the others next
            self._done()
            return
        for waiting, action in self._moved.pop(operator_id).items():
            self._type(f"{operator_id}.{waiting}", action)
        self._busy = {operator_id}
        self._bump()
        session.step_all([operator_id])
        self._done()

    def _type(self, worker_id: str, action: int) -> None:
        """Type ``action`` at the human worker ``worker_id``'s terminal."""
        os.write(self._ptys[worker_id][0], f"{action}\n".encode())

    def _serve(self) -> None:
        while True:
            item = self._commands.get()
            if item is None:
                break
            command, future = item
            try:
                future.set_result(command())
            except BaseException as exc:  # the caller gets it; the session goes on
                self._busy = set()
                self._error = str(exc)
                self._bump()
                future.set_exception(exc)
        session, self._session = self._session, None
        try:
            if session is not None:
                session.close()
        finally:
            for master, slave in self._ptys.values():
                for fd in (master, slave):
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._ptys.clear()
            self._actions.clear()
            self._turns, self._moved = {}, {}
            self._views = []

    def _require(self) -> ManualSession:
        if self._session is None:
            raise CommandError("this file is not open")
        return self._session

    def _ids(self) -> list[str]:
        return [] if self._config is None else [spec.id for spec in self._config.operators]

    def _refresh(self) -> None:
        # Views and the shared seed are read together, so a snapshot taken meanwhile shows one
        # moment of the session, never a new seed beside the panels of the episode before.
        if self._session is not None:
            self._views = self._session.views()
            self._shared = (self._session.seed, self._session.episode_index)
            self._turns = self._session.human_turns()
            self._moved = {game: moved for game, moved in self._moved.items()
                           if game in self._turns}
        self._drain()
        self._bump()

    def _done(self) -> None:
        self._refresh()
        self._busy = set()
        self._error = None
        self._bump()

    def _drain(self) -> None:
        """Empty what human workers wrote to their terminals (prompts), so they never block."""
        for master, _ in self._ptys.values():
            with contextlib.suppress(OSError):
                while os.read(master, 65536):
                    pass

    def _bump(self) -> None:
        self.version += 1

    # -- what the page shows --------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The page's state: the file, the shared seed and episode, one entry per operator."""
        session = self._session
        config = self._config
        operators = []
        for view in self._views:
            data = asdict(view)
            data["status"] = self._status(view)
            data["actions"] = self._actions.get(view.operator_id)
            turns = self._turns.get(view.operator_id, {})
            moved = self._moved.get(view.operator_id, {})
            for player in data["players"] or ():
                choices = turns.get(player["player"])
                player["moves"] = ([[c.action, c.name] for c in choices]
                                   if choices is not None and player["player"] not in moved
                                   else None)
            operators.append(data)
        return {
            "file": self.path.name,
            "uid": config.uid if config is not None else None,
            "state": self._state,
            "version": self.version,
            "seed": self._shared[0] if session is not None else None,
            "episode": self._shared[1] if session is not None else None,
            "error": self._error,
            "operators": operators,
        }

    def _status(self, view: OperatorView) -> str:
        if view.failure is not None:
            return "failed"
        if view.operator_id in self._busy:
            return "stepping"
        if self._state != "open":
            return "stopped"
        if view.episode_over:
            return "episode over"
        if view.operator_id in self._actions or view.operator_id in self._turns:
            return "your move"
        return "ready"


def _action_choices(spec: OperatorSpec) -> list[tuple[int, str]]:
    """The buttons of a human operator: its ``action_names``, else its Discrete action space."""
    names = spec.settings.get("action_names")
    if isinstance(names, list) and names:
        return [(index, str(name)) for index, name in enumerate(names)]
    from mosaic.environments.gymnasium_make import make_gymnasium

    env = make_gymnasium(spec.env, spec.env_kwargs)
    try:
        count = getattr(env.action_space, "n", None)
    finally:
        env.close()
    if count is None:
        raise CommandError(f"human operator {spec.id!r}: its environment's actions are not "
                           "Discrete; give settings.action_names")
    return [(index, str(index)) for index in range(int(count))]
