"""Check that a worker program speaks mosaic's operator protocol.

Run any worker, built-in or third-party, against a list of named checks::

    report = check_worker(["python", "-m", "my_worker", "--env-id", "CartPole-v1"])
    print(report)

or from pytest with :func:`assert_conformant`, or from a shell::

    python -m mosaic.testing.worker_conformance [--agent] [--dialect mosaic] -- python -m my_worker

``dialect="mosaic"`` certifies a worker written for MOSAIC (:mod:`mosaic.operators.dialect`):
replies are matched by order instead of by id, unsolicited ``init`` lines are allowed, either
episode-end spelling and ``step_index`` counted from 0 or 1 pass, ``ready`` and ``step`` must
carry ``episode_index`` and ``step_index``, and the worker is probed with ``reset`` (or
``init_agent``) rather than ``ping``, which MOSAIC's workers do not know. The default,
``"native"``, holds a worker to mosaic's protocol and fails each of those looser habits.

``env_mode="gym"`` is for workers that own a Gymnasium environment (``reset``/``step``);
``env_mode="agent"`` is for workers driven with ``init_agent``/``select_action``. The checker
starts three copies of the worker (one for most checks, one for SIGTERM, one for EOF on stdin),
reads every reply strictly in order, and stops and reaps all three before returning, also when a
check fails. Each reply is awaited at most ``timeout`` seconds; SIGTERM and EOF must end the
worker within 2 seconds.

Why one file of this length: it is a checker third parties run as one command, like
PettingZoo's ``api_test``; every check it makes is listed here in the order it runs (the report
and the exchange helper are in ``_conformance_report``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mosaic.core.errors import WorkerError
from mosaic.operators import dialect as d
from mosaic.operators import protocol as p
from mosaic.operators.driver.handle import OperatorProcessHandle
from mosaic.operators.driver.launcher import OperatorLauncher
from mosaic.testing._conformance_report import (
    CheckResult,
    ConformanceReport,
    Fail,
    ReplyChecker,
    close,
    short,
)

__all__ = ["CheckResult", "ConformanceReport", "assert_conformant", "check_worker", "main"]

EXIT_DEADLINE = 2.0


def _run_episode(
    checker: ReplyChecker, handle: OperatorProcessHandle, max_steps: int, episode: Any = None
) -> tuple[list[tuple[Any, float]], dict[str, Any]]:
    """Step to the end of an episode, checking every reply; returns (action, reward) pairs and
    the episode_end reply."""
    trajectory: list[tuple[Any, float]] = []
    total = 0.0
    for index in range(max_steps):
        request_id = handle.send({"cmd": p.CMD_STEP}, timeout=checker.timeout)
        step = checker.next_reply(handle, p.RESP_STEP, request_id)
        episode = checker.mosaic_indices(step, episode)
        if checker.native and handle.routing.step_base:
            raise Fail(f"step_index counts from {handle.routing.step_base}, not from 0")
        if step["step_index"] != index:
            raise Fail(f"step {index} (0-based) has step_index {step['step_index']}"
                        + (f" (counted from {handle.routing.step_base})"
                           if handle.routing.step_base else ""))
        total += step["reward"]
        if not close(step["episode_reward"], total):
            raise Fail(f"episode_reward {step['episode_reward']} at step {index} is not the "
                        f"sum of rewards {total}")
        trajectory.append((step["action"], step["reward"]))
        if step["terminated"] or step["truncated"]:
            end = checker.next_reply(handle, p.RESP_EPISODE_END, request_id)
            if end["episode_length"] != index + 1:
                raise Fail(f"episode_length {end['episode_length']} after {index + 1} steps")
            if not close(end["total_reward"], total):
                raise Fail(f"total_reward {end['total_reward']} differs from the sum {total}")
            if (end["terminated"], end["truncated"]) != (step["terminated"], step["truncated"]):
                raise Fail("episode_end terminated/truncated differ from the last step's")
            if checker.native and handle.routing.end_spellings - {p.RESP_EPISODE_END}:
                raise Fail(f"the episode ended with {sorted(handle.routing.end_spellings)}, "
                            "not 'episode_end'")
            return trajectory, end
    raise Fail(f"the episode did not end within {max_steps} steps")


def _signal_exit(
    handle: OperatorProcessHandle, action: Callable[[], None]
) -> tuple[bool, str]:
    action()
    start = time.monotonic()
    try:
        handle.process.wait(timeout=EXIT_DEADLINE)
    except Exception:
        return False, f"still running {EXIT_DEADLINE:.0f} s later"
    return True, f"exited with code {handle.process.returncode} in " \
                 f"{time.monotonic() - start:.2f} s"


def check_worker(
    argv: Sequence[str],
    *,
    env_mode: str = "gym",
    timeout: float = 10.0,
    seed: int = 1234,
    max_episode_steps: int = 2000,
    reproducible: bool | None = None,
    n_actions: int = 4,
    observation: Any = 0,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    dialect: str = d.NATIVE,
) -> ConformanceReport:
    """Run the conformance checks against the worker started by ``argv``.

    ``reproducible`` forces (True) or skips (False) the same-seed check; by default it runs when
    the worker claims ``reproducible`` in its ``ready``/``agent_ready`` reply. That check starts
    a second worker with the same ``argv`` and gives it the first worker's commands: a worker
    seeds its own randomness from ``--seed`` when it has one (so a second episode in the same
    process may rightly differ), else from the seed of each reset or ``init_agent``. In agent mode
    ``n_actions`` and ``observation`` are what the checker offers the worker. ``env`` adds
    environment variables; ``cwd`` is the working directory. ``dialect`` is ``"native"``
    (mosaic's protocol) or ``"mosaic"`` (MOSAIC's, see the module docstring). Never raises for a
    misbehaving worker: every problem is a failed check. Raises ``ValueError`` for a bad
    ``env_mode`` or ``dialect``.
    """
    if env_mode not in ("gym", "agent"):
        raise ValueError(f"env_mode must be 'gym' or 'agent'; got {env_mode!r}")
    if dialect not in d.DIALECTS:
        raise ValueError(f"dialect must be one of {', '.join(d.DIALECTS)}; got {dialect!r}")
    report = ConformanceReport(list(argv), env_mode, dialect)
    checker = ReplyChecker(report, timeout, seed)
    launcher = OperatorLauncher(cwd=cwd)
    handles: list[OperatorProcessHandle] = []
    try:
        try:
            for role in ("main", "again", "sigterm", "eof"):
                handles.append(launcher.launch_command(argv, f"conformance-{role}", env=env))
        except WorkerError as exc:
            report.checks.append(CheckResult("the worker starts", False, str(exc)))
            return report
        main_handle, again_handle, term_handle, eof_handle = handles
        if env_mode == "gym":
            _gym_checks(checker, main_handle, again_handle, seed, max_episode_steps, reproducible)
        else:
            _agent_checks(checker, main_handle, again_handle, seed, n_actions, observation,
                          reproducible)
        _exit_checks(checker, main_handle, term_handle, eof_handle, env_mode, seed, n_actions,
                     observation)
    finally:
        for handle in handles:
            handle.stop(timeout=3.0)
    _matching_checks(checker, handles)
    return report


def _matching_checks(checker: ReplyChecker, handles: Sequence[OperatorProcessHandle]) -> None:
    """How replies were matched, and the lines that answered nothing."""
    report = checker.report
    unsolicited = [line for handle in handles for line in handle.routing.unsolicited]
    kinds = sorted({str(line.get("type")) for line in unsolicited})
    if not checker.native:
        report.checks.append(CheckResult(
            "replies matched in order, unsolicited lines skipped", checker.replies_seen > 0,
            f"{checker.replies_seen} replies; {len(unsolicited)} unsolicited {kinds}"))
        return
    if checker.id_problems:
        report.checks.append(CheckResult("id echoed in every reply", False,
                                         "; ".join(checker.id_problems[:5])))
    else:
        report.checks.append(CheckResult("id echoed in every reply", checker.replies_seen > 0,
                                         f"{checker.replies_seen} replies"))
    report.checks.append(CheckResult(
        "no unsolicited lines", not unsolicited,
        f"{len(unsolicited)} lines answered no command, first {short(unsolicited[0])} "
        "(MOSAIC's dialect? try --dialect mosaic)" if unsolicited else ""))


def _common_error_checks(checker: ReplyChecker, handle: OperatorProcessHandle) -> None:
    def unknown() -> str:
        reply = checker.exchange(handle, {"cmd": "no_such_command"}, p.RESP_ERROR)
        checker.probe(handle)
        return f"error: {reply['message'][:80]}"

    def bad_json() -> str:
        handle.send_raw(b"{this is not json\n", timeout=checker.timeout)
        reply = checker.next_reply(handle, p.RESP_ERROR, None)
        checker.probe(handle)
        return f"error: {reply['message'][:80]}"

    checker.run("unknown command -> error, still alive", unknown)
    checker.run("bad JSON -> error, still alive", bad_json)


def _first_reply(checker: ReplyChecker, handle: OperatorProcessHandle) -> Callable[[], str]:
    def ping() -> str:
        start = time.perf_counter()
        checker.exchange(handle, {"cmd": p.CMD_PING}, p.RESP_PONG)
        return f"first reply after start in {time.perf_counter() - start:.2f} s"

    return ping


def _gym_checks(
    checker: ReplyChecker, handle: OperatorProcessHandle, twin: OperatorProcessHandle, seed: int,
    max_steps: int, reproducible: bool | None,
) -> None:
    if checker.native and not checker.run("ping -> pong", _first_reply(checker, handle)):
        return
    ready: dict[str, Any] = {}

    def reset() -> str:
        start = time.perf_counter()
        ready.update(checker.exchange(handle, {"cmd": p.CMD_RESET, "seed": seed}, p.RESP_READY))
        if ready["seed"] != seed:
            raise Fail(f"ready.seed is {ready['seed']}, expected {seed}")
        checker.mosaic_indices(ready, None)
        return (f"env_id={ready['env_id']!r} observation_shape={ready['observation_shape']}"
                + ("" if checker.native else f"; in {time.perf_counter() - start:.2f} s"))

    fields = "run_id, env_id, seed, observation_shape" + (
        "" if checker.native else ", episode_index, step_index")
    if not checker.run(f"reset -> ready with {fields}", reset):
        return
    first: list[tuple[Any, float]] = []

    def episode() -> str:
        trajectory, end = _run_episode(checker, handle, max_steps, ready.get("episode_index"))
        first.extend(trajectory)
        base = handle.routing.step_base
        return (f"{len(trajectory)} steps, total_reward {end['total_reward']}"
                + ("" if checker.native else
                   f"; ended with {sorted(handle.routing.end_spellings)}, step_index from {base}"))

    ok = checker.run(
        "step fields, 0-based step_index, one episode_end after the terminal step" if checker.native
        else "step fields with episode_index and step_index, one episode end after the terminal "
             "step", episode)

    def once() -> str:
        return f"the next reply after the episode end was the {checker.probe(handle)}"

    if ok:
        checker.run("episode_end exactly once", once)
    _common_error_checks(checker, handle)
    claimed = bool(ready.get("reproducible")) if reproducible is None else reproducible
    if not claimed:
        checker.skip("same seed, same trajectory", "the worker does not claim reproducibility")
    elif ok:
        def again() -> str:
            checker.exchange(twin, {"cmd": p.CMD_RESET, "seed": seed}, p.RESP_READY)
            second, _ = _run_episode(checker, twin, max_steps)
            if second != first:
                at = next((i for i, (a, b) in enumerate(zip(first, second, strict=False))
                           if a != b),
                          min(len(first), len(second)))
                raise Fail(f"seed {seed} gave {len(first)} then {len(second)} steps; they "
                            f"differ from step {at}: {first[at:at + 1]} vs {second[at:at + 1]}")
            return f"{len(first)} identical steps"

        checker.run("same seed, same trajectory", again)


def _agent_checks(
    checker: ReplyChecker, handle: OperatorProcessHandle, twin: OperatorProcessHandle, seed: int,
    n_actions: int, observation: Any, reproducible: bool | None,
) -> None:
    if checker.native and not checker.run("ping -> pong", _first_reply(checker, handle)):
        return
    ready: dict[str, Any] = {}
    init = {"cmd": p.CMD_INIT_AGENT, "player_id": "player_0",
            "settings": {"n_actions": n_actions, "seed": seed}}

    def init_agent() -> str:
        ready.update(checker.exchange(handle, init, p.RESP_AGENT_READY))
        if ready["player_id"] != "player_0":
            raise Fail(f"agent_ready.player_id is {ready['player_id']!r}")
        return ""

    if not checker.run("init_agent -> agent_ready with player_id", init_agent):
        return
    legal = list(range(1, n_actions))
    mask = [1 if a >= n_actions // 2 else 0 for a in range(n_actions)]

    def with_legal() -> str:
        reply = checker.exchange(handle, {"cmd": p.CMD_SELECT_ACTION, "observation": observation,
                                          "legal_actions": legal, "player_id": "player_0"},
                                 p.RESP_ACTION_SELECTED)
        if reply["action"] not in legal:
            raise Fail(f"action {reply['action']!r} is not in legal_actions {legal}")
        if reply.get("player_id") not in (None, "player_0"):
            raise Fail(f"player_id {reply['player_id']!r} is not the one sent")
        return f"action {reply['action']}"

    def with_mask() -> str:
        reply = checker.exchange(handle, {"cmd": p.CMD_SELECT_ACTION, "observation": observation,
                                          "action_mask": mask}, p.RESP_ACTION_SELECTED)
        action = reply["action"]
        if not isinstance(action, int) or not 0 <= action < n_actions or not mask[action]:
            raise Fail(f"action {action!r} is masked out by {mask}")
        return f"action {action}"

    checker.run("select_action with legal_actions -> a legal action", with_legal)
    checker.run("select_action with action_mask -> an unmasked action", with_mask)
    _common_error_checks(checker, handle)
    claimed = bool(ready.get("reproducible")) if reproducible is None else reproducible
    if not claimed:
        checker.skip("same seed, same actions", "the worker does not claim reproducibility")
        return

    def actions(worker: OperatorProcessHandle) -> list[Any]:
        checker.exchange(worker, init, p.RESP_AGENT_READY)
        return [checker.exchange(worker, {"cmd": p.CMD_SELECT_ACTION, "observation": observation,
                                          "legal_actions": legal}, p.RESP_ACTION_SELECTED
                                 )["action"] for _ in range(20)]

    def again() -> str:
        first, second = actions(handle), actions(twin)
        if first != second:
            raise Fail(f"seed {seed} gave {first} then {second}")
        return f"20 identical actions {first[:6]}..."

    checker.run("same seed, same actions", again)


def _exit_checks(
    checker: ReplyChecker, main_handle: OperatorProcessHandle, term_handle: OperatorProcessHandle,
    eof_handle: OperatorProcessHandle, env_mode: str, seed: int, n_actions: int,
    observation: Any,
) -> None:
    def stop() -> str:
        checker.exchange(main_handle, {"cmd": p.CMD_STOP}, p.RESP_STOPPED)
        try:
            code = main_handle.process.wait(timeout=checker.timeout)
        except Exception as exc:
            raise Fail(f"still running {checker.timeout:.0f} s after 'stopped'") from exc
        if code != 0:
            raise Fail(f"exit code {code} after stop, expected 0")
        return "exit code 0"

    checker.run("stop -> stopped, exit code 0", stop)

    def sigterm() -> str:
        # Mid-episode, after a real step: workers that render must still honour SIGTERM.
        checker.probe(term_handle)
        if env_mode == "gym":
            checker.exchange(term_handle, {"cmd": p.CMD_RESET, "seed": seed}, p.RESP_READY)
            checker.exchange(term_handle, {"cmd": p.CMD_STEP}, p.RESP_STEP)
        else:
            checker.exchange(term_handle, {"cmd": p.CMD_INIT_AGENT, "player_id": "player_0",
                                           "settings": {"n_actions": n_actions}},
                             p.RESP_AGENT_READY)
            checker.exchange(term_handle, {"cmd": p.CMD_SELECT_ACTION, "observation": observation,
                                           "legal_actions": list(range(n_actions))},
                             p.RESP_ACTION_SELECTED)
        ok, detail = _signal_exit(term_handle,
                                  lambda: term_handle.process.send_signal(signal.SIGTERM))
        if not ok:
            raise Fail(detail)
        if term_handle.process.returncode not in (0, -signal.SIGTERM):
            raise Fail(detail + " (expected 0)")
        return detail

    def eof() -> str:
        checker.probe(eof_handle)
        ok, detail = _signal_exit(eof_handle, eof_handle.close_stdin)
        if not ok:
            raise Fail(detail)
        return detail

    checker.run(f"SIGTERM -> exit within {EXIT_DEADLINE:.0f} s", sigterm)
    checker.run(f"EOF on stdin -> exit within {EXIT_DEADLINE:.0f} s", eof)


def assert_conformant(argv: Sequence[str], **kwargs: Any) -> ConformanceReport:
    """:func:`check_worker`, raising ``AssertionError`` with the full report when a check failed
    (for use in tests). Returns the report."""
    report = check_worker(argv, **kwargs)
    if not report.passed:
        raise AssertionError(str(report))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: options, then ``--``, then the worker's argv. Exit 0 when conformant."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        args = args if args else ["--help"]
        worker: list[str] = []
    else:
        split = args.index("--")
        args, worker = args[:split], args[split + 1:]
    parser = argparse.ArgumentParser(
        prog="python -m mosaic.testing.worker_conformance",
        description="Check that a worker speaks mosaic's operator protocol. "
                    "Usage: [options] -- WORKER ARGV...",
    )
    parser.add_argument("--agent", action="store_true",
                        help="drive the worker with init_agent/select_action instead of "
                             "reset/step")
    parser.add_argument("--dialect", choices=d.DIALECTS, default=d.NATIVE,
                        help="native: mosaic's protocol; mosaic: MOSAIC's dialect (replies "
                             "matched by order, init lines, episode_done, 1-based step_index)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per reply")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--n-actions", type=int, default=4, help="agent mode: action count")
    options = parser.parse_args(args)
    if not worker:
        parser.error("give the worker's argv after --")
    report = check_worker(worker, env_mode="agent" if options.agent else "gym",
                          timeout=options.timeout, seed=options.seed,
                          n_actions=options.n_actions, dialect=options.dialect)
    print(report)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
