"""A live run under attack: hostile bytes at every endpoint it binds, from outside, mid-run.

A run with its environment, muscle and brain each in a process of its own binds one endpoint
per component process (ipc socket files in a private folder, or loopback tcp ports), and anyone
on the machine can connect to them. This test finds them the way an attacker would (the socket
files in the run's temporary folder; the listening sockets of its processes in /proc), sends
each the hostile set of :mod:`tests.hostile`, oversized frames, bytes that are not ZeroMQ at
all and a flood of garbage, while the run steps; then checks that the run finished with exactly
the trajectory (digest) and brain of the same run left alone, that the rejections were logged,
and in bounded number, and that no component's memory grew.

The run is held twice by a termination condition that never ends it
(:mod:`tests.fixtures.gates`): after episode 10, until the attack starts, so that it starts
mid-run with every endpoint bound; and after episode 190, until the attack is over, so that it
cannot end under the attack's feet however slow the machine. Neither changes the trajectory.

Oversized frames over ipc and tcp never reach mosaic: ZeroMQ (``MAXMSGSIZE``, set on every
server to the codec's 64 MiB limit) reads the frame's length, drops the connection and allocates
nothing, which the peak RSS shows. mosaic therefore cannot log them; the attacker sees the
connection dropped.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from mosaic.messages import ErrorResponse
from tests.e2e.cli import REPO, mosaic_command, query, write_experiment
from tests.hostile import (
    flood,
    hostile_messages,
    send_and_collect,
    send_not_zeromq,
    send_oversized,
)
from tests.processes import TAG_VARIABLE, children_of, kill_all, tagged_processes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXPERIMENT = """\
    uid: hostile
    seed: 11
    episodes: 200
    placement: process
    transport: {transport}
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: learner
        brain: tests.fixtures.agents:CountingBrain
        muscle: tests.fixtures.agents:ExperienceMuscle
    termination:
      condition: tests.fixtures.gates:hold_at_gates
"""
#: After these episodes the run holds: until the attack starts, and until it is over.
START_GATE, END_GATE = 10, 190
#: The environment, the muscle and the brain, each in its own process.
COMPONENTS = ("cartpole", "learner@cartpole", "learner")
OVERSIZED_PER_ENDPOINT = 3
FLOOD = 10_000
RSS_GROWTH_LIMIT_KIB = 20 * 1024
#: Kinds of rejection mosaic logs for the hostile set over ipc and tcp.
REJECTIONS = ("MalformedFrame", "MessageFieldError", "UnknownMessageType",
              "ProtocolVersionMismatch", "CodecError")
RUN_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Outcome:
    """What a finished run left: its store row, and its brain's saved experience count."""

    status: str
    steps: int
    digest: str
    brain_count: int


@dataclass
class Launched:
    """A running ``mosaic experiment-start``, its files, and where its ipc folder lands."""

    proc: subprocess.Popen[bytes]
    store: Path
    temp: Path
    gates: Path
    stderr: Path

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace")


def launch(folder: Path, transport: str, tag: str, *, gates: bool) -> Launched:
    """Start the experiment with ``TMPDIR`` in ``folder`` (so its ipc folder is found there)."""
    path = write_experiment(folder, EXPERIMENT.format(transport=transport), f"{transport}.yml")
    temp, gate_folder = folder / "t", folder / "gates"
    temp.mkdir()
    gate_folder.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(temp), TAG_VARIABLE: tag}
    if gates:
        env.update(MOSAIC_TEST_GATE_FOLDER=str(gate_folder),
                   MOSAIC_TEST_GATE_EPISODES=f"{START_GATE},{END_GATE}")
    store, stderr = folder / f"{transport}.sqlite", folder / "stderr.txt"
    with open(folder / "stdout.txt", "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen([*mosaic_command(), "experiment-start", str(path), "--store",
                                 str(store), "-v"], cwd=REPO, env=env, stdout=out, stderr=err)
    return Launched(proc, store, temp, gate_folder, stderr)


def outcome(launched: Launched) -> Outcome:
    [(status, steps, digest)] = query(launched.store, "SELECT status, steps, digest FROM runs")
    [saved] = Path(f"{launched.store.with_suffix('')}-checkpoints").glob("**/learner.npz")
    with np.load(saved, allow_pickle=False) as state:
        return Outcome(status, steps, digest, int(state["count"][0]))


def wait_until_done(launched: Launched) -> int:
    try:
        return launched.proc.wait(RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        launched.proc.kill()
        launched.proc.wait()
        raise AssertionError(f"the run did not end: {launched.stderr_text()[-3000:]}") from None


@pytest.fixture(scope="module")
def left_alone(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The same experiment, run without gates or attack: what the attacked runs must match."""
    tag = uuid.uuid4().hex
    launched = launch(tmp_path_factory.mktemp("left-alone"), "ipc", tag, gates=False)
    code = wait_until_done(launched)
    deadline = time.monotonic() + 5
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = tagged_processes(tag)
    kill_all(left)
    assert not left, f"processes outlived the run: {left}"
    assert code == 0, launched.stderr_text()
    return outcome(launched)


def wait_for_gate(launched: Launched, episode: int, timeout: float = 120.0) -> int:
    """Wait until the run holds after ``episode``; return its step count there."""
    held = launched.gates / f"held-{episode}"
    deadline = time.monotonic() + timeout
    while not held.exists():
        if launched.proc.poll() is not None:
            raise AssertionError(f"the run ended early: {launched.stderr_text()[-3000:]}")
        assert time.monotonic() < deadline, f"the run did not reach episode {episode}"
        time.sleep(0.02)
    return int(held.read_text())


def open_gate(launched: Launched, episode: int) -> None:
    (launched.gates / f"open-{episode}").touch()


# -- what an attacker on this machine can see -------------------------------------------------


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _proc_net(name: str) -> Iterator[list[str]]:
    try:
        lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
    except FileNotFoundError:
        return
    for line in lines:
        yield line.split()


def listening(pid: int) -> set[str]:
    """Endpoints ``pid`` listens on: tcp ports (IPv4 and IPv6) and bound unix sockets."""
    inodes = socket_inodes(pid)
    found = set()
    for name in ("tcp", "tcp6"):
        for fields in _proc_net(name):
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                raw = bytes.fromhex(address)
                if len(raw) == 4:
                    host = socket.inet_ntop(socket.AF_INET, raw[::-1])
                else:  # four little-endian 32-bit words
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    host = f"[{socket.inet_ntop(socket.AF_INET6, words)}]"
                found.add(f"tcp://{host}:{int(port, 16)}")
    for fields in _proc_net("unix"):
        # Flags 00010000: accepting connections; a path: bound in the file system.
        if len(fields) >= 8 and fields[6] in inodes and int(fields[3], 16) & 0x10000:
            found.add(f"ipc://{fields[7]}")
    return found


def rss_kib(pid: int) -> dict[str, int]:
    """Resident and peak resident memory of ``pid``, in KiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(value.split()[0])
    return values


def discover(launched: Launched, transport: str) -> dict[int, str]:
    """The endpoint each component process of the run listens on, found from outside."""
    children = [pid for pid, state in children_of(launched.proc.pid).items() if state != "Z"]
    assert len(children) == len(COMPONENTS), children
    assert listening(launched.proc.pid) == set()  # the run's own parts talk over inproc
    endpoints = {}
    for pid in children:
        [endpoint] = listening(pid)
        endpoints[pid] = endpoint
    if transport == "ipc":
        [folder] = launched.temp.glob("mosaic-*")
        files = {f"ipc://{path}" for path in folder.iterdir() if stat.S_ISSOCK(path.stat().st_mode)}
        assert files == set(endpoints.values())
    else:
        assert all(e.startswith("tcp://127.0.0.1:") for e in endpoints.values()), endpoints
    assert len(set(endpoints.values())) == len(COMPONENTS)
    return endpoints


# -- the test ---------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_every_endpoint_shrugs_off_hostile_bytes(tmp_path, process_tag, left_alone, transport):
    launched = launch(tmp_path, transport, process_tag, gates=True)
    items = hostile_messages()
    hostile, oversized = items[:-1], items[-1]
    figures: dict[str, object] = {}
    try:
        steps_at_start = wait_for_gate(launched, START_GATE)
        endpoints = discover(launched, transport)
        before = {pid: rss_kib(pid) for pid in endpoints}
        open_gate(launched, START_GATE)
        started = time.monotonic()
        for endpoint in endpoints.values():
            answers = send_and_collect(endpoint, hostile, timeout_ms=30_000)
            assert len(answers) == sum(item.answered for item in hostile)
            assert all(isinstance(answer, ErrorResponse) for answer in answers), answers
        for endpoint in endpoints.values():
            dropped = send_oversized(endpoint, oversized, OVERSIZED_PER_ENDPOINT)
            assert dropped == OVERSIZED_PER_ENDPOINT, f"{endpoint} kept an oversized frame"
            send_not_zeromq(endpoint)
        figures["hostile s"] = round(time.monotonic() - started, 2)
        flooded = time.monotonic()
        for endpoint in endpoints.values():
            assert flood(endpoint, FLOOD) == FLOOD
        figures["flood s"] = round(time.monotonic() - flooded, 2)
        steps_during = query(launched.store, "SELECT COUNT(*) FROM steps")[0][0]
        after = {pid: rss_kib(pid) for pid in endpoints}
        assert launched.proc.poll() is None, launched.stderr_text()[-3000:]
        # The run stepped on while it was attacked.
        assert steps_during > steps_at_start
        figures["steps during attack"] = steps_during - steps_at_start
        wait_for_gate(launched, END_GATE)
        open_gate(launched, END_GATE)
        code = wait_until_done(launched)
    finally:
        if launched.proc.poll() is None:
            launched.proc.kill()
            launched.proc.wait()
    stderr = launched.stderr_text()
    assert code == 0, stderr[-3000:]

    # Unharmed: the very trajectory, and the very brain, of the run left alone.
    assert outcome(launched) == left_alone

    # Memory: no component kept anything, nor ever held an oversized frame (peak RSS).
    for pid, sizes in after.items():
        grown = sizes["VmRSS"] - before[pid]["VmRSS"]
        peak = sizes["VmHWM"] - before[pid]["VmHWM"]
        figures[f"{endpoints[pid].rsplit('/', 1)[-1]} KiB"] = (before[pid]["VmRSS"], grown, peak)
        assert grown < RSS_GROWTH_LIMIT_KIB and peak < RSS_GROWTH_LIMIT_KIB, figures

    # Logged: every kind of rejection, by every component, and a bounded number of lines.
    for uid in COMPONENTS:
        for kind in REJECTIONS:
            assert f"{uid}: rejected a malformed message: {kind}" in stderr, (uid, kind)
        assert f"{uid}: no handler for PongResponse" in stderr
        assert re.search(rf"{re.escape(uid)}: \d+ more malformed messages rejected", stderr)
    lines = stderr.count("\n")
    sent = len(COMPONENTS) * (len(hostile) + FLOOD)
    assert lines < 500, f"{lines} lines of log for {sent} hostile messages"
    figures["log lines"] = lines
    print(f"\n{transport}: {figures}")
