"""``mosaic dashboard`` as a user starts it: it serves the store and Manual mode, and Ctrl-C
stops it with every worker it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.dashboard.conftest import REPO
from tests.processes import tagged_processes


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _post(url: str) -> bytes:
    request = urllib.request.Request(url, data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=90) as response:
        body: bytes = response.read()
        return body


def test_the_command_serves_and_stops_its_workers_on_ctrl_c(cartpole_store: Path,
                                                            process_tag: str) -> None:
    port = _free_port()
    command = subprocess.Popen(
        [sys.executable, "-m", "mosaic", "dashboard", "--store", str(cartpole_store),
         "--manual", "examples/manual_frozenlake.yml", "--port", str(port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    assert b"cartpole-two-runs" in page.read()
                break
            except OSError:
                assert command.poll() is None, command.communicate()[1]
                assert time.monotonic() < deadline, "the dashboard did not come up in 60 s"
                time.sleep(0.2)
        assert b'"state":"open"' in _post(f"http://127.0.0.1:{port}/api/manual/0/open")
        workers = [pid for pid in tagged_processes(process_tag) if pid != command.pid]
        assert len(workers) >= 2  # one worker per operator of the file
        command.send_signal(signal.SIGINT)
        _, stderr = command.communicate(timeout=60)
        assert command.returncode == 130, stderr
        assert f"http://127.0.0.1:{port}/" in stderr and "Traceback" not in stderr
        assert not [pid for pid in workers if _alive(pid)]
    finally:
        if command.poll() is None:
            command.kill()
            command.communicate()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited; only its parent's wait is missing
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_the_address_is_printed_once_it_answers(cartpole_store: Path) -> None:
    port = _free_port()
    command = subprocess.Popen(
        [sys.executable, "-m", "mosaic", "dashboard", "--store", str(cartpole_store),
         "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert command.stderr is not None
        line = command.stderr.readline()  # blocks until the command says where it listens
        assert f"http://127.0.0.1:{port}/" in line, line
        # At once, without a retry: it answers as soon as it says so.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert b"cartpole-two-runs" in page.read()
        command.send_signal(signal.SIGINT)
        command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
            command.communicate()
