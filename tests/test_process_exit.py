"""mosaic.core.process_exit: a prompt end that keeps what a normal exit does that anyone sees."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mosaic.core.process_exit import exit_status

PROGRAM = textwrap.dedent("""
    import atexit, sys, threading, time
    from mosaic.core.process_exit import exit_process

    sys.stdout.write("buffered, no newline")          # still in the buffer at the exit
    atexit.register(lambda: sys.stdout.write(" | atexit ran"))

    def late():
        time.sleep(0.3)
        sys.stdout.write(" | thread ended")
    threading.Thread(target=late).start()              # not a daemon: waited for
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()  # not waited for
    exit_process(3)
    sys.stdout.write(" | after the exit")              # never runs
""")


def test_exit_process_waits_for_threads_runs_atexit_flushes_and_skips_daemons() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered, no newline | thread ended | atexit ran"


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (2, 2), (130, 130), (256, 0)])
def test_exit_status_is_what_the_interpreter_would_give(code: int | None, status: int) -> None:
    assert exit_status(SystemExit(code)) == status


def test_a_message_exit_prints_it_and_gives_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status(SystemExit("error: no such file")) == 1
    assert capsys.readouterr().err == "error: no such file\n"
