"""The real ``mosaic`` command on inputs it must refuse at once, and on early signals.

A bad experiment file or store path is exit 2 from ``experiment-check`` and ``experiment-start``
alike, naming the file (and the key, where one applies), with no traceback and nothing started.
A signal before a run starts ends the command with 128 + the signal. A SIGKILLed run's duration
runs to the last thing it stored.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.cli import (
    cartpole,
    finish,
    mosaic_command,
    query,
    run_mosaic,
    start_mosaic,
    wait_for_file,
    wait_for_steps,
    write_experiment,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

RecordProperty = Callable[[str, object], None]

#: Each input here is refused in about 0.4 s on an idle machine (2 s is the promise); the bound
#: leaves room for a loaded one, and is far below the 27 s and 42 s these inputs used to take.
REFUSED_WITHIN_S = 5.0
COMMANDS = ["experiment-check", "experiment-start"]
BAD = Path(__file__).resolve().parents[1] / "experiment" / "bad"
#: The line of ``path:`` under ``store:`` in a file written by :func:`with_store_path`.
STORE_PATH_LINE = 14


@pytest.fixture(scope="module")
def big_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """50 MB of random bytes and 20 MB of YAML numbers, made once and deleted after."""
    folder = tmp_path_factory.mktemp("big")
    files = {"random_50mb": folder / "random.yml", "numbers_20mb": folder / "numbers.yml"}
    files["random_50mb"].write_bytes(os.urandom(50 * 2**20))
    with files["numbers_20mb"].open("w") as out:
        out.writelines(f"- {i}\n" for i in range(2_000_000))
    yield files
    shutil.rmtree(folder)


def with_store_path(folder: Path, store: str) -> Path:
    path = write_experiment(folder, cartpole() + f"    store:\n      path: {store}\n")
    assert path.read_text().splitlines()[STORE_PATH_LINE - 1].strip() == f"path: {store}"
    return path


def bad_input(name: str, folder: Path, big: dict[str, Path]) -> tuple[Path, list[str]]:
    """The file of bad input ``name``, and what its error must say besides the file name."""
    if name in big:
        size = f"{big[name].stat().st_size / 2**20:.1f} MiB"
        return big[name], ["the file is too large", "at most 128 KiB", size]
    if name == "deep_nesting":
        path = folder / "deep_lists.yml"
        shutil.copy(BAD / path.name, path)
        return path, [":6:", "nested too deeply: more than 50 levels"]
    if name == "binary":
        path = folder / "program.yml"
        path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(4096))
        return path, ["not a YAML text file: found a NUL byte at offset 7, as in binary data"]
    (folder / "notes.txt").write_text("not a database\n")
    store = "notes.txt" if name == "store_is_a_text_file" else "notes.txt/results.sqlite"
    message = "is not a SQLite database" if store == "notes.txt" else "which is a file"
    return with_store_path(folder, store), [f":{STORE_PATH_LINE}: store.path: ", message]


def good_file_seconds(folder: Path) -> float:
    """Seconds ``mosaic experiment-check`` takes on a small good file, measured now."""
    good = folder / "good"
    good.mkdir(exist_ok=True)
    path = write_experiment(good, cartpole(episodes=1))
    started = time.monotonic()
    result = run_mosaic("experiment-check", str(path), timeout=120)
    assert result.returncode == 0, result.stderr
    return time.monotonic() - started


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["deep_nesting", "random_50mb", "numbers_20mb", "binary",
                                  "store_is_a_text_file", "store_under_a_file"])
def test_a_bad_input_is_refused_at_once(tmp_path: Path, big_files: dict[str, Path],
                                        record_property: RecordProperty, command: str,
                                        name: str) -> None:
    path, expected = bad_input(name, tmp_path, big_files)
    notes = tmp_path / "notes.txt"
    store = tmp_path / "results.sqlite"
    args = [command, str(path)] + (["--store", str(store)] if "store" not in name and
                                   command == "experiment-start" else [])
    started = time.monotonic()
    result = run_mosaic(*args, timeout=120)
    took = time.monotonic() - started
    record_property("seconds", round(took, 2))
    # What the same command takes on a small good file, measured now: a loaded machine slows
    # both alike, while reading a bad input to its end would not.
    baseline = good_file_seconds(tmp_path)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {path}")
    for text in expected:
        assert text in line
    assert "once its aliases are expanded" not in line
    assert took < REFUSED_WITHIN_S + 2 * baseline, (
        f"refused after {took:.1f} s (a good file took {baseline:.1f} s)")
    assert not store.exists()
    assert not notes.exists() or notes.read_text() == "not a database\n"


@pytest.mark.parametrize("store", ["notes.txt", "notes.txt/results.sqlite"])
def test_a_store_option_that_cannot_be_a_sqlite_file_is_refused(tmp_path: Path,
                                                                 store: str) -> None:
    (tmp_path / "notes.txt").write_text("not a database\n")
    path = write_experiment(tmp_path, cartpole())
    result = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / store),
                        timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {path}: --store: the results store ")
    assert "Traceback" not in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "not a database\n"


def test_an_existing_store_or_an_empty_file_is_accepted(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "earlier.sqlite") as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    (tmp_path / "empty.db").touch()
    for store in ("earlier.sqlite", "empty.db"):
        result = run_mosaic("experiment-check", str(with_store_path(tmp_path, store)))
        assert result.returncode == 0, result.stderr


# -- signals before a run starts -----------------------------------------------------------

SLOW_MODULE = """\
import pathlib, time
pathlib.Path({marker!r}).write_text("importing")
time.sleep(30)  # a heavy import (torch, a simulator) that the user interrupts
"""
# The same, with the 30 s inside the creation of a class, as in a pydantic model's import:
# Python 3.11 wraps what ``__set_name__`` raises in a RuntimeError.
SLOW_CLASS_MODULE = """\
import pathlib, time

class Slow:
    def __set_name__(self, owner, name):
        pathlib.Path({marker!r}).write_text("importing")
        time.sleep(30)

class Model:
    field = Slow()
"""
# One that swallows the signal's exception (a bare ``except:``), as CPython itself was seen to
# do with a signal during the compilation of a module that mosaic imports.
SWALLOWING_MODULE = """\
import pathlib, time
try:
    pathlib.Path({marker!r}).write_text("importing")
    time.sleep(30)
except BaseException:
    pass
time.sleep(30)
"""
EXIT_CODES = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]


def start_slow(folder: Path, command: str, module: str = SLOW_MODULE,
               ) -> tuple[subprocess.Popen[str], Path]:
    """Start ``command`` on a file whose environment module takes 30 s to import; return the
    process and the file that module writes when its import begins."""
    marker = folder / "importing"
    (folder / "slow_env.py").write_text(module.format(marker=str(marker)))
    path = write_experiment(folder, cartpole(env="slow_env:SlowEnv"))
    store = ["--store", str(folder / "results.sqlite")] if command == "experiment-start" else []
    # From the module's folder: mosaic imports a user's modules from the current folder.
    proc = subprocess.Popen([*mosaic_command(), command, str(path), *store], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, marker


def assert_ended_by(proc: subprocess.Popen[str], sig: int, code: int) -> float:
    """Send ``sig``; ``proc`` must exit ``code`` within 5 s, cleanly. Returns the seconds taken."""
    sent = time.monotonic()
    os.kill(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    took = time.monotonic() - sent
    stderr = finish(proc)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "Aborted!" not in stderr, stderr
    assert took < 5, f"exited {took:.1f} s after the signal"
    return took


@pytest.mark.parametrize("module", [SLOW_MODULE, SLOW_CLASS_MODULE, SWALLOWING_MODULE],
                         ids=["import", "wrapped", "swallowed"])
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("sig", "code"), EXIT_CODES)
def test_a_signal_while_the_file_loads_exits_128_plus_the_signal(
        tmp_path: Path, process_tag: str, command: str, sig: int, code: int,
        module: str) -> None:
    """Validation imports the environment's module: a signal during that import.

    With the signal inside a class's creation it printed a traceback ending in "RuntimeError:
    Error calling __set_name__" and exited 1 (the signal's exception came out wrapped, from a
    pydantic model that mosaic imports); when the exception was lost, it went on loading.
    """
    proc, marker = start_slow(tmp_path, command, module)
    try:
        wait_for_file(marker, proc)
        assert_ended_by(proc, sig, code)
    finally:
        finish(proc)
    assert not (tmp_path / "results.sqlite").exists()


def handles_sigterm(pid: int) -> bool:
    """Whether ``pid`` has a handler of its own for SIGTERM (Python has none by default)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.MULTILINE)
    return caught is not None and bool(int(caught[1], 16) >> (signal.SIGTERM - 1) & 1)


@pytest.mark.parametrize(("sig", "code"), EXIT_CODES)
def test_a_signal_soon_after_the_start_exits_128_plus_the_signal(
        tmp_path: Path, process_tag: str, record_property: RecordProperty, sig: int,
        code: int) -> None:
    """It printed "Aborted!" and exited 1 (click's handling of KeyboardInterrupt).

    The signal goes 0.2 s after mosaic's handling is in place, which takes a few tens of ms on
    an idle machine but may take far longer on a loaded one (before it, Python's own handling
    applies: a KeyboardInterrupt from the imports). The slow module keeps the run from starting
    however late the signal comes: a run has handling of its own.
    """
    proc, _ = start_slow(tmp_path, "experiment-start")
    try:
        deadline = time.monotonic() + 20
        while not handles_sigterm(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, finish(proc)
            time.sleep(0.005)
        time.sleep(0.2)
        record_property("seconds_to_exit", round(assert_ended_by(proc, sig, code), 2))
    finally:
        finish(proc)


# -- an interrupted run --------------------------------------------------------------------

def test_a_sigkilled_run_lasts_until_the_last_thing_it_stored(tmp_path: Path,
                                                               process_tag: str) -> None:
    """``runs show`` and ``runs list`` gave such a run "0.0s", the time of its start heartbeat.

    Steps are stored without a time; each commit of them refreshes the run's heartbeat, so the
    duration runs to the last committed steps: a lower bound, shown as such.
    """
    path = write_experiment(tmp_path, cartpole(episodes=100_000))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=200)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        finish(proc)
    [(uid, started, heartbeat)] = query(store, "SELECT uid, started_at, heartbeat_at FROM runs")
    [(last_transition,)] = query(store, "SELECT MAX(at) FROM transitions")
    assert heartbeat > last_transition  # the steps after the start refreshed it
    expected = f">={heartbeat - started:.1f}s"

    shown = run_mosaic("runs", "show", uid, "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "status       interrupted" in shown.stdout
    assert f"duration     {expected}\n" in shown.stdout
    listed = run_mosaic("runs", "list", "--store", str(store))
    [line] = [line for line in listed.stdout.splitlines() if uid in line]
    assert f" {expected} " in line
