"""``mosaic``: start and check experiments, and read their results.

Imports of the heavy parts happen inside the commands, so ``mosaic --help`` and a bad file
answer at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import click

from mosaic.cli.console import configure_logging, exit_with_error
from mosaic.cli.dashboard import dashboard
from mosaic.cli.evaluate import evaluate, manual
from mosaic.cli.keys import keys
from mosaic.cli.operators import operators
from mosaic.cli.replay import replay
from mosaic.cli.results import export, plot
from mosaic.cli.store import store as store_group
from mosaic.core.errors import interruption_in
from mosaic.core.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_SIGNAL
from mosaic.core.imports import add_user_folder, user_folder_last
from mosaic.core.process_exit import exit_process, exit_status

log = logging.getLogger(__name__)


class _Stopped(BaseException):
    """SIGINT or SIGTERM before a command handles signals itself (see :func:`main`).

    Neither an ``Exception`` nor a ``SystemExit`` (which the import of a user's module turns
    into an error of the file), so that nothing on the way catches it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: Seconds after the first signal by which its exception has ended the command, or is taken
#: to have been lost on its way (see :func:`_stop`).
STOP_GRACE = 2.0


def _stop(signum: int, frame: FrameType | None) -> None:
    """Unwind the command with :class:`_Stopped`.

    The exception can be lost: a signal whose handler runs while CPython compiles a module
    that a lazy attribute imports was seen to vanish, and the command went on into the user's
    30-s import. So the signal is delivered again :data:`STOP_GRACE` seconds later if the
    process still lives: to the command's own handling if it has taken over by then (a run is
    cancelled in order), otherwise to :func:`_exit_now`.
    """
    for sig in EXIT_SIGNAL:  # a second signal while the first unwinds ends mosaic at once
        signal.signal(sig, _exit_now)
    again = threading.Timer(STOP_GRACE, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()
    raise _Stopped(signum)


def _exit_now(signum: int, frame: FrameType | None) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.write(2, f"mosaic: stopped by {signal.Signals(signum).name}\n".encode())
    os._exit(EXIT_SIGNAL[signum])


def _load(path: str, store: str | None = None,  # type: ignore[no-untyped-def]
          settings: tuple[str, ...] = ()):
    from mosaic.core.errors import ConfigError
    from mosaic.experiment import load_experiment

    try:
        return load_experiment(path, store_override=store, overrides=_overrides(path, settings))
    except ConfigError as error:
        exit_with_error(error, EXIT_BAD_INPUT)


def _tracked(experiment, tensorboard: str | None,  # type: ignore[no-untyped-def]
             mlflow: str | None):
    """``experiment`` with ``--tensorboard`` and ``--mlflow`` over its ``tracking:`` section;
    exit 2 when the extra of one is missing."""
    from mosaic.core.errors import ConfigError

    try:
        return experiment.with_tracking(tensorboard, mlflow)
    except ConfigError as error:  # an extra missing, or an empty value
        exit_with_error(error, EXIT_BAD_INPUT)


def _overrides(path: str, settings: tuple[str, ...]) -> dict[str, Any]:
    """The ``--set KEY=VALUE`` options as overrides: each VALUE read as YAML (``5`` a number,
    ``[1, 2]`` a list, ``{path: x}`` a mapping, ``null``, text otherwise); a later one of the
    same KEY wins. Raises ConfigError for a setting without ``=`` or a VALUE that is not YAML."""
    import yaml

    from mosaic.core.errors import ConfigError

    overrides: dict[str, Any] = {}
    for setting in settings:
        key, equals, text = setting.partition("=")
        key = key.strip()
        if not equals or not key:
            raise ConfigError(path, "", f"--set {setting!r}: expected KEY=VALUE",
                              "name a key path and its value, e.g. --set episodes=5 or "
                              "--set agents.0.params.learning_rate=0.01")
        try:
            overrides[key] = yaml.safe_load(text)
        except yaml.YAMLError as error:
            problem = getattr(error, "problem", None) or "not YAML"
            raise ConfigError(path, key, f"--set {setting!r}: the value is not YAML: {problem}",
                              "quote text that YAML reads otherwise, e.g. --set "
                              "'uid=\"a: b\"'") from None
    return overrides


SET_HELP = ("Set KEY (a key path: episodes, agents.0.params.learning_rate, "
            "environments.0.copies) to VALUE (read as YAML) over the file; repeatable. "
            "--resume takes the same settings.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mosaic")
def cli() -> None:
    """mosaic: multi-agent experiments over ZeroMQ."""


@cli.command("experiment-start")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--store", "store", metavar="PATH|URL", help="SQLite file or PostgreSQL URL "
              "(postgresql://user:password@host:port/db) for the results (default: the file's "
              "store.url or store.path, or <experiment>.sqlite next to it).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Runs (seeds) to run at once, each with its own RunGovernor (default: 1; "
              "on a Ray cluster, every run, up to 64).")
@click.option("--ray", "ray", metavar="auto|ADDRESS",
              help="Run each run as a task on the Ray cluster at ADDRESS (host:port), or on the "
              "one this machine belongs to (auto); needs mosaic[ray].")
@click.option("--resume", is_flag=True, help="Continue the experiment of FILE recorded in the "
              "store: runs that finished are not run again, every other continues in its own "
              "row (the file must be unchanged).")
@click.option("--set", "settings", metavar="KEY=VALUE", multiple=True,
              help=SET_HELP)
@click.option("--tensorboard", metavar="DIR", help="Log each run's episode returns and learner "
              "metrics to TensorBoard as well, a run folder per run in DIR (instead of the "
              "file's tracking.tensorboard); needs mosaic[tensorboard].")
@click.option("--mlflow", metavar="URI", help="Log each run to MLflow as well, at the tracking "
              "URI (http://host:5000, or a folder: file:mlruns) (instead of the file's "
              "tracking.mlflow); needs mosaic[mlflow].")
@click.option("-q", "--quiet", is_flag=True, help="Say only what went wrong: no header, progress "
              "bars, lines of finished runs or summary table.")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.option("--timings", metavar="FILE", hidden=True,
              help="Write first/last step wall-clock times as JSON (for benchmarks).")
def experiment_start(file: str, store: str | None, jobs: int | None, ray: str | None,
                     resume: bool, settings: tuple[str, ...], tensorboard: str | None,
                     mlflow: str | None, quiet: bool, verbose: int,
                     timings: str | None) -> None:
    """Run the experiment in FILE and record every step."""
    configure_logging(logging.WARNING - 10 * min(verbose, 2))
    from mosaic.cli.processes import keep_command_zygote, start_command_zygote

    add_user_folder(Path(file).expanduser().resolve().parent)  # for the zygote's forks too
    start_command_zygote(file, ray)  # it imports while this process goes on
    experiment = _tracked(_load(file, store, settings), tensorboard, mlflow)
    keep_command_zygote(experiment)
    from mosaic.api.execution import execute, join_cluster, open_results
    from mosaic.api.progress import ProgressDisplay
    from mosaic.cli.report import format_run_line, format_summary, format_title
    from mosaic.core.errors import MosaicError, StoreError
    from mosaic.core.run_states import SUCCESSFUL_STATUSES

    try:
        join_cluster(experiment, ray)
    except MosaicError as error:  # Ray missing (the extra to name), no cluster, too small a one
        exit_with_error(error, EXIT_BAD_INPUT)

    if not quiet:
        click.echo(format_title(experiment), err=True)
    display = ProgressDisplay(experiment.run_count) if not quiet else None

    def run_ended(result):  # type: ignore[no-untyped-def]
        if display is not None:
            display.run_ended(result.index, format_run_line(result))
        elif result.status not in SUCCESSFUL_STATUSES:
            click.echo(format_run_line(result), err=True)

    try:
        writer = open_results(experiment)
    except StoreError as error:
        exit_with_error(error, EXIT_BAD_INPUT)
    stored = None
    if resume:
        from mosaic.api.resuming import NothingToResume, plan_resume

        try:
            stored = plan_resume(experiment, writer)
        except NothingToResume as nothing:
            writer.close()
            click.echo(f"mosaic: {nothing}", err=True)
            sys.exit(EXIT_OK)
        except MosaicError as error:  # the file changed, a run still runs, or the store failed
            writer.close()
            exit_with_error(error, EXIT_BAD_INPUT)
    try:
        execution = execute(experiment, writer, jobs=jobs,
                            on_progress=display.update if display is not None else None,
                            on_run_end=run_ended, ray=ray, resume=stored)
    except StoreError as error:
        # The database failed under a running experiment (disk full, locked for too long):
        # what was written before is committed; say so instead of a traceback.
        exit_with_error(error, EXIT_FAILED)
    finally:
        if display is not None:
            display.close()
    results = execution.results
    if timings:
        Path(timings).write_text(json.dumps({
            "first_step_at": min((r.first_step_at for r in results if r.first_step_at),
                                 default=None),
            "last_step_at": max((r.last_step_at for r in results if r.last_step_at), default=None),
        }))
    if not quiet:
        click.echo("")
        click.echo(format_summary(results, experiment.store_shown,
                                  _fallbacks(experiment.store_target, results),
                                  best=_best(experiment, results)))
    if execution.store_lost is not None:
        exit_with_error(execution.store_lost, EXIT_FAILED)
    if execution.cancelled_by is not None:
        click.echo("mosaic: cancelled; every step taken so far is stored.", err=True)
        sys.exit(EXIT_SIGNAL.get(execution.cancelled_by, EXIT_FAILED))
    sys.exit(EXIT_OK if results and all(r.status in SUCCESSFUL_STATUSES for r in results)
             else EXIT_FAILED)


def _best(experiment: Any, results: list[Any]) -> str | None:
    """The best point of a search, as the summary names it (None: not a search, or none)."""
    search = experiment.search
    if search is None:
        return None
    from mosaic.orchestration.search import best_point

    best = best_point(results, search.metric, search.direction, experiment.phase_names()[-1])
    return best.describe() if best is not None else f"Best point: none ({search.metric} of no "\
        "point whose runs all finished)"


def _fallbacks(store: Any, results: list[Any]) -> dict[str, tuple[int, float]]:
    """Actions and LLM fallbacks per run, from the store (empty if it cannot be read)."""
    from mosaic.core.errors import StoreError
    from mosaic.store import open_store

    if not results:
        return {}
    try:
        with open_store(store) as reader:
            return reader.metric_totals("llm.fallback", *(r.uid for r in results))
    except StoreError as error:
        log.debug("no fallback counts for the summary: %s", error)
        return {}


@cli.command("experiment-check")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--set", "settings", metavar="KEY=VALUE", multiple=True, help=SET_HELP)
def experiment_check(file: str, settings: tuple[str, ...]) -> None:
    """Validate FILE without running it (each environment is built once, then closed)."""
    from mosaic.core.errors import ConfigError
    from mosaic.experiment import check_experiment

    try:
        experiment = check_experiment(file, overrides=_overrides(file, settings))
    except ConfigError as error:
        exit_with_error(error, EXIT_BAD_INPUT)
    sweep = f" ({len(experiment.points)} sweep points x {experiment.runs} seed(s))" if (
        experiment.points) else ""
    click.echo(f"{file}: ok: experiment {experiment.uid!r}, {experiment.run_count} run(s){sweep}, "
               f"{len(experiment.environments)} environment(s), {len(experiment.agents)} agent(s); "
               f"results go to {experiment.store_shown}")


@cli.group("runs")
def runs() -> None:
    """Read recorded runs."""


def _store_path(store: str | None, experiment: str | None) -> str | Path:
    if store:
        return store
    if experiment:
        target: str | Path = _load(experiment).store_target
        return target
    raise click.UsageError("give --store PATH|URL or --experiment FILE")


@runs.command("list")
@click.option("--store", metavar="PATH|URL", help="The results file, or a PostgreSQL URL.")
@click.option("--experiment", metavar="FILE", help="Find the results file from an experiment file.")
def runs_list(store: str | None, experiment: str | None) -> None:
    """List the runs in a results store."""
    from mosaic.core.errors import StoreError
    from mosaic.store import format_runs_table, open_store

    try:
        with open_store(_store_path(store, experiment)) as opened:
            click.echo(format_runs_table(opened.list_runs()))
    except StoreError as error:
        exit_with_error(error, EXIT_BAD_INPUT)


@runs.command("show")
@click.argument("run")
@click.option("--store", metavar="PATH|URL", help="The results file, or a PostgreSQL URL.")
@click.option("--experiment", metavar="FILE", help="Find the results file from an experiment file.")
@click.option("--last", "last", type=click.IntRange(min=1), default=100, show_default=True,
              metavar="N", help="Give the mean return of the last N episodes to end.")
def runs_show(run: str, store: str | None, experiment: str | None, last: int) -> None:
    """Show one run (uid, unique prefix or id): transitions, episodes, steps.

    Its mean return is over its last N episodes (--last), and over all of them.
    """
    from mosaic.core.errors import StoreError
    from mosaic.store import format_run_detail, open_store

    try:
        with open_store(_store_path(store, experiment)) as opened:
            click.echo(format_run_detail(opened.show_run(run, recent=last)))
    except StoreError as error:
        exit_with_error(error, EXIT_BAD_INPUT)


runs.add_command(plot)
runs.add_command(export)
runs.add_command(replay)
cli.add_command(keys)
cli.add_command(operators)
cli.add_command(store_group)
cli.add_command(evaluate)
cli.add_command(manual)
cli.add_command(dashboard)


#: The variables that size the thread pools of NumPy's BLAS (OpenBLAS, OpenMP, MKL).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    Modules of the user's own (environments, brains, muscles named in a file) are imported from
    the current directory, after the installed packages (a ``numpy.py`` there does not shadow
    NumPy), as component processes do (see :func:`mosaic.core.imports.user_folder_last`).

    SIGINT, SIGTERM or SIGHUP ends the command with 130, 143 or 129 (128 + the signal), as a
    shell reports a process killed by it, until the command handles signals itself:
    ``experiment-start`` cancels its runs in order, and ``evaluate`` and ``manual`` stop their
    workers.
    """
    user_folder_last()
    # One BLAS thread per process unless the user says otherwise (before NumPy loads, here and
    # in every component process, which inherits it): the networks of a run are small, a BLAS
    # thread pool only contends for the cores with the run's own processes, and starting it
    # costs each component process about 45 ms of CPU.
    for variable in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")
    # Without this, click would turn the KeyboardInterrupt into "Aborted!" and exit 1.
    previous = {sig: signal.signal(sig, _stop) for sig in EXIT_SIGNAL}
    try:
        cli.main(args=argv, prog_name="mosaic")
    except BaseException as error:
        stopped = interruption_in(error)
        if not isinstance(stopped, _Stopped):
            raise
        click.echo(f"mosaic: stopped by {signal.Signals(stopped.signum).name}", err=True)
        sys.exit(EXIT_SIGNAL[stopped.signum])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run() -> NoReturn:
    """The ``mosaic`` command (console script and ``python -m mosaic``): :func:`main`, then the
    end of the process without the interpreter's teardown, which took seconds of a Ctrl-C on a
    busy machine (see :mod:`mosaic.core.process_exit`). An uncaught error ends it as usual."""
    try:
        main()
    except SystemExit as stop:
        exit_process(exit_status(stop))
    exit_process(EXIT_OK)
