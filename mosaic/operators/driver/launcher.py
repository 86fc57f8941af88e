"""Start operator workers as subprocesses: :class:`OperatorLauncher`.

Each operator type maps to a worker module (``python -m workers.<type>_worker``); ``command``
operators run a third-party argv that speaks the protocol. An ``llm`` operator runs the worker
for its game (``workers.chess_worker`` for PettingZoo chess, ``workers.balrog_worker`` for
BabyAI and MiniGrid, else ``workers.llm_worker``) unless ``settings.worker`` names one
(``vlm``: ``workers.vlm_worker``; :mod:`mosaic.operators.api.llm_routing`). The settings each
built-in type reads are the fields of its model in
:data:`~mosaic.operators.api.settings.SETTINGS_MODELS` (anything else is ignored with a warning),
and every type also reads ``env_kwargs`` (dict), ``n_actions`` (int), ``seed`` (the operator's
own seed, ``--seed``: its actions' randomness; in batch mode also the first episode's seed) and
in batch mode ``episodes``, which a driver sets. A plug-in type gets its own settings as one
JSON object in ``--settings`` (:mod:`..api.kinds`).

A single-agent worker owns the environment ``config.task`` (``--env-id``); the workers of a
multi-agent operator do not (the driver sends observations).

Every worker gets ``OPERATOR_ID``, ``OPERATOR_RUN_ID``, ``TELEMETRY_DIR`` (when set),
``MPI4PY_RC_INITIALIZE=0`` and ``MOSAIC_PARENT_PID`` in its environment, runs in its own session
(so a terminal Ctrl-C reaches only the driver, which then stops it), and exits when the launching
thread's process dies. LLM workers get the proxy variables removed, so that a SOCKS or HTTP proxy
does not intercept requests to a local model server; set ``keep_proxy_env`` to keep them.

Note: on Linux the worker asks for SIGTERM when its parent *thread* exits (``PR_SET_PDEATHSIG``),
so launch workers from a thread that lives as long as they should.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mosaic.core.errors import WorkerError
from mosaic.operators.api.config import OperatorConfig, WorkerAssignment
from mosaic.operators.api.kinds import (
    BUILTIN_KINDS,
    OperatorKind,
    operator_kind,
    plugin_settings_argv,
)
from mosaic.operators.api.llm_routing import LLM_WORKERS, llm_worker_for
from mosaic.operators.driver.handle import OperatorProcessHandle
from mosaic.operators.driver.multi_handle import MultiAgentOperatorHandle
from mosaic.operators.protocol import PARENT_PID_ENV
from mosaic.runtime.processes.child import spawn

__all__ = ["PROXY_VARIABLES", "WORKER_MODULES", "OperatorLauncher"]

log = logging.getLogger("mosaic.operators.driver.launcher")

#: The worker module of each of mosaic's own types (a plug-in type's is its entry point's).
WORKER_MODULES: dict[str, str] = {
    kind.name: kind.worker_module for kind in BUILTIN_KINDS.values()
    if kind.worker_module is not None
}

PROXY_VARIABLES = ("ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
                   "https_proxy", "FTP_PROXY", "ftp_proxy", "SOCKS_PROXY", "socks_proxy")

#: The settings every type reads: those of every settings model, and those a driver sets.
_COMMON = {"env_kwargs", "render_every", "render_mode", "send_observations", "n_actions",
           "log_level", "episodes", "seed"}


def _settings_keys(kind: OperatorKind) -> set[str]:
    """The settings a built-in type reads: its settings model's fields
    (:data:`~mosaic.operators.api.settings.SETTINGS_MODELS`). Whoever checked those settings
    (an evaluation file, an OperatorMuscle's setup) has already imported the models."""
    model = kind.settings_model()
    return set(model.model_fields) if model is not None else set()


def _names(value: Any) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def _required(config: OperatorConfig, key: str, *aliases: str) -> Any:
    for name in (key, *aliases):
        if config.settings.get(name) not in (None, ""):
            return config.settings[name]
    raise ValueError(
        f"operator {config.operator_id!r} ({config.operator_type}) needs settings[{key!r}]")


def _terminal_path() -> str | None:
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.ttyname(fd)
        except OSError:
            continue
    return None


class OperatorLauncher:
    """Builds worker command lines and starts workers.

    ``python`` is the interpreter for built-in workers; ``telemetry_dir`` is passed as
    ``TELEMETRY_DIR``; ``extra_env`` is added to every worker's environment (before proxy
    variables are removed for LLM workers); ``cwd`` is the workers' working directory.
    """

    def __init__(
        self,
        python: str = sys.executable,
        telemetry_dir: str | os.PathLike[str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.python = python
        self.telemetry_dir = str(telemetry_dir) if telemetry_dir is not None else None
        self.extra_env = dict(extra_env or {})
        self.cwd = str(cwd) if cwd is not None else None

    # -- command lines --

    def build_command(
        self, config: OperatorConfig, run_id: str, *, interactive: bool = True
    ) -> list[str]:
        """The argv that starts ``config``'s worker (single-agent: it owns ``config.task``).

        Raises ``ValueError`` for a multi-agent config (use :meth:`launch_multi_agent`) or a
        missing required setting.
        """
        if config.is_multi_agent:
            raise ValueError(f"operator {config.operator_id!r} is multi-agent; "
                             "use launch_multi_agent")
        return self._build(config, run_id, interactive=interactive, owns_env=True)

    def _build(
        self, config: OperatorConfig, run_id: str, *, interactive: bool, owns_env: bool
    ) -> list[str]:
        kind = operator_kind(config.operator_type)
        if not kind.builtin:  # a plug-in's own settings go to its worker as --settings
            own = {key: value for key, value in config.settings.items() if key not in _COMMON}
            return [self.python, "-m", str(kind.worker_module), *plugin_settings_argv(own),
                    *self._runtime_args(config, run_id, interactive=interactive,
                                        owns_env=owns_env)]
        allowed = _COMMON | _settings_keys(kind)
        unknown = sorted(set(config.settings) - allowed)
        if unknown:
            log.warning("operator %s (%s) ignores settings %s; known: %s", config.operator_id,
                        config.operator_type, unknown, sorted(allowed))
        if config.operator_type == "command":
            if config.command is None:
                raise ValueError(f"operator {config.operator_id!r} has no command argv")
            return list(config.command)
        builder = getattr(self, f"_build_{config.operator_type}_command")
        argv: list[str] = [self.python, "-m", self.worker_module(config)]
        argv += builder(config, run_id)
        argv += self._runtime_args(config, run_id, interactive=interactive, owns_env=owns_env)
        return argv

    @staticmethod
    def worker_module(config: OperatorConfig) -> str:
        """The module a built-in ``config`` runs; for ``llm``, the worker of its game or of its
        ``settings.worker`` (``ValueError`` for an unknown one)."""
        if config.operator_type == "llm":
            worker = llm_worker_for(config.settings.get("worker"), config.task, config.env_name)
            return LLM_WORKERS[worker]
        return WORKER_MODULES[config.operator_type]

    def _runtime_args(
        self, config: OperatorConfig, run_id: str, *, interactive: bool, owns_env: bool
    ) -> list[str]:
        s = config.settings
        args = ["--run-id", run_id]
        if owns_env and config.task:
            args += ["--env-id", config.task]
            if s.get("env_kwargs"):
                args += ["--env-kwargs", json.dumps(dict(s["env_kwargs"]))]
            if s.get("render_every"):
                args += ["--render-every", str(int(s["render_every"]))]
                if s.get("render_mode"):
                    args += ["--render-mode", str(s["render_mode"])]
            if s.get("send_observations"):
                args.append("--send-observations")
        if config.max_steps:
            args += ["--max-steps", str(config.max_steps)]
        if s.get("n_actions") is not None:
            args += ["--n-actions", str(int(s["n_actions"]))]
        if s.get("log_level"):
            args += ["--log-level", str(s["log_level"])]
        if s.get("seed") is not None:
            args += ["--seed", str(int(s["seed"]))]
        if not interactive:
            args += ["--batch", "--episodes", str(int(s.get("episodes", 1)))]
        return args

    def _build_random_command(self, config: OperatorConfig, run_id: str) -> list[str]:
        return []

    def _build_passive_command(self, config: OperatorConfig, run_id: str) -> list[str]:
        noop = config.settings.get("noop_action")
        return ["--noop-action", str(int(noop))] if noop is not None else []

    def _build_scripted_command(self, config: OperatorConfig, run_id: str) -> list[str]:
        args = ["--policy", str(_required(config, "policy"))]
        if config.settings.get("reproducible"):
            args.append("--reproducible")
        return args

    def _build_rl_command(self, config: OperatorConfig, run_id: str) -> list[str]:
        return ["--checkpoint", str(_required(config, "checkpoint"))]

    def _build_llm_command(self, config: OperatorConfig, run_id: str) -> list[str]:
        s = config.settings
        args = ["--base-url", str(_required(config, "base_url")),
                "--model", str(_required(config, "model", "model_id"))]
        for key, flag in (("api_key_env", "--api-key-env"), ("fallback", "--fallback"),
                          ("timeout", "--timeout"), ("temperature", "--temperature"),
                          ("max_tokens", "--max-tokens"), ("system_prompt", "--system-prompt"),
                          ("max_retries", "--max-retries"), ("retry_backoff", "--retry-backoff")):
            if s.get(key) is not None:
                args += [flag, str(s[key])]
        if self.worker_module(config) == LLM_WORKERS["chess"]:
            for key, flag in (("move_retries", "--move-retries"), ("notation", "--notation")):
                if s.get(key) is not None:
                    args += [flag, str(s[key])]
        if s.get("action_names"):
            if self.worker_module(config) == LLM_WORKERS["chess"]:  # its moves have names
                log.warning("operator %s: the chess worker ignores settings.action_names",
                            config.operator_id)
            else:
                args += ["--action-names", _names(s["action_names"])]
        return args

    def _build_bdi_command(self, config: OperatorConfig, run_id: str) -> list[str]:
        s = config.settings
        args = ["--plan-library", str(_required(config, "plan_library"))]
        if s.get("action_names"):
            args += ["--action-names", _names(s["action_names"])]
        if s.get("max_cycles") is not None:
            args += ["--max-cycles", str(int(s["max_cycles"]))]
        if s.get("fallback"):
            args += ["--fallback", str(s["fallback"])]
        return args

    def _build_human_command(self, config: OperatorConfig, run_id: str) -> list[str]:
        s = config.settings
        tty = s.get("tty") or _terminal_path()
        args = ["--tty", str(tty)] if tty else []
        if s.get("action_names"):
            args += ["--action-names", _names(s["action_names"])]
        return args

    def _environment(self, config: OperatorConfig | None, operator_id: str,
                     run_id: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["OPERATOR_ID"] = operator_id
        env["OPERATOR_RUN_ID"] = run_id
        env["MPI4PY_RC_INITIALIZE"] = "0"
        env[PARENT_PID_ENV] = str(os.getpid())
        if self.telemetry_dir is not None:
            env["TELEMETRY_DIR"] = self.telemetry_dir
        if (config is not None and config.operator_type == "llm"
                and not config.settings.get("keep_proxy_env")):
            for name in PROXY_VARIABLES:
                env.pop(name, None)
        return env

    # -- launching --

    @staticmethod
    def new_run_id(operator_id: str) -> str:
        """A fresh run id: ``op_<operator_id>_<UTC timestamp>_<4 hex digits>``."""
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        return f"op_{operator_id}_{stamp}_{secrets.token_hex(2)}"

    def launch(
        self, config: OperatorConfig, run_id: str | None = None, *, interactive: bool = True
    ) -> OperatorProcessHandle:
        """Start ``config``'s worker; returns its handle at once (the worker may still be
        importing; the first request's timeout covers that).

        ``run_id`` defaults to ``config.run_id``, else a new one. In batch mode
        (``interactive=False``) the worker runs ``settings["episodes"]`` episodes by itself and
        stdin is not connected. Raises ``ValueError`` for a bad config and ``WorkerError`` when
        the process cannot be started.
        """
        run_id = run_id or config.run_id or self.new_run_id(config.operator_id)
        argv = self.build_command(config, run_id, interactive=interactive)
        return self._spawn(argv, config.operator_id, config.with_run_id(run_id), run_id,
                           interactive)

    def launch_command(
        self,
        argv: Sequence[str],
        operator_id: str,
        *,
        run_id: str = "",
        config: OperatorConfig | None = None,
        env: Mapping[str, str] | None = None,
    ) -> OperatorProcessHandle:
        """Start a third-party worker that speaks the protocol; ``env`` adds variables."""
        run_id = run_id or self.new_run_id(operator_id)
        return self._spawn(list(argv), operator_id, config, run_id, True, env)

    def launch_multi_agent(
        self, config: OperatorConfig, run_id: str | None = None
    ) -> MultiAgentOperatorHandle:
        """Start one worker per player of a multi-agent config (none owns the environment).

        Player ``p`` runs as operator ``<operator_id>.<p>``. If one fails to start, the ones
        already started are stopped and the error is raised.
        """
        if not config.is_multi_agent:
            raise ValueError(f"operator {config.operator_id!r} has no worker_assignments")
        run_id = run_id or config.run_id or self.new_run_id(config.operator_id)
        handles: dict[str, OperatorProcessHandle] = {}
        try:
            for player, assignment in config.worker_assignments.items():
                player_config = self._player_config(config, player, assignment, run_id)
                argv = self._build(player_config, run_id, interactive=True, owns_env=False)
                handles[player] = self._spawn(argv, player_config.operator_id, player_config,
                                              run_id, True)
        except BaseException:
            MultiAgentOperatorHandle(handles).stop_all()
            raise
        return MultiAgentOperatorHandle(handles, config.with_run_id(run_id))

    @staticmethod
    def _player_config(config: OperatorConfig, player: str, assignment: WorkerAssignment,
                       run_id: str) -> OperatorConfig:
        return OperatorConfig(
            operator_id=f"{config.operator_id}.{player}",
            operator_type=assignment.worker_type,
            worker_id=assignment.worker_id,
            display_name=f"{config.display_name} ({player})",
            env_name=config.env_name,
            task=config.task,
            settings=assignment.settings,
            run_id=run_id,
            max_steps=config.max_steps,
            command=assignment.command,
        )

    def _spawn(
        self,
        argv: list[str],
        operator_id: str,
        config: OperatorConfig | None,
        run_id: str,
        interactive: bool,
        env: Mapping[str, str] | None = None,
    ) -> OperatorProcessHandle:
        environment = self._environment(config, operator_id, run_id)
        environment.update(env or {})
        if self.telemetry_dir is not None:
            Path(self.telemetry_dir).mkdir(parents=True, exist_ok=True)
        try:
            process = spawn(argv, stdin=interactive, env=environment, cwd=self.cwd)
        except OSError as exc:
            raise WorkerError(f"could not start worker {operator_id} ({argv[0]}): {exc}") from exc
        log.debug("started worker %s pid %d: %s", operator_id, process.pid, argv)
        return OperatorProcessHandle(process, operator_id, config, run_id,
                                     interactive=interactive)
