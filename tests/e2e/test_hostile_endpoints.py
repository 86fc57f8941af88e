"""A live run under attack: every endpoint it binds, probed from outside, mid-run.

A run with its environment, muscle and brain each in a process of its own binds one endpoint
per component process (ipc socket files in a private folder, or loopback tcp ports). This test
finds them the way an attacker would (the socket files in the run's temporary folder; the
listening sockets of its processes in /proc) and, from processes that do not hold the run's
secrets, sends each one every request type mosaic has (among them a start request that would
run a command, resets and shutdowns), the hostile set of :mod:`tests.hostile`, bytes that are
not ZeroMQ at all, guessed tokens and keys, and a stream of connections; as this user, and as
another user of the machine where the test may become one (as root). Then it checks that no
attacker got an answer or a byte processed: the run finished with exactly the trajectory
(digest) and brain of the same run left alone, the command never ran, every component logged
the refused peers as warnings and in bounded number, and no component's memory grew.

What an authenticated peer that sends garbage meets (the decoder's rejections) is the business
of ``tests/actors/test_hostile_components.py`` and ``tests/transport/test_transport.py``.

The run is held twice by a termination condition that never ends it
(:mod:`tests.fixtures.gates`): after episode 10, until the attack starts, so that it starts
mid-run with every endpoint bound; and after episode 190, until the attack is over, so that it
cannot end under the attack's feet however slow the machine. Neither changes the trajectory.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import zmq

from mosaic.messages import EnvironmentResetRequest, EnvironmentStartRequest, Message
from mosaic.messages.codec import encode_message
from tests.e2e.cli import REPO, mosaic_command, query, write_experiment
from tests.hostile import every_request, hostile_messages, send_not_zeromq
from tests.processes import TAG_VARIABLE, component_children, kill_all, tagged_processes

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
#: Connections opened one after another against each endpoint.
CONNECTIONS = 200
RSS_GROWTH_LIMIT_KIB = 20 * 1024
RUN_TIMEOUT_S = 180.0
#: How long an attacker waits for an answer that must not come.
SILENCE_MS = 1000
#: The user another local user is played by, where the test runs as root.
NOBODY = 65534


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
        return Outcome(status, steps, digest, int(state["brain/state/count"][0]))


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
    children = component_children(launched.proc.pid)
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


# -- what an attacker without the run's secrets sends ----------------------------------------


def attack_frames(marker: Path) -> list[list[bytes]]:
    """Every request type, the worst requests, and the hostile set, as multipart frames."""
    worst: list[Message] = [
        EnvironmentStartRequest("cartpole", "subprocess:run", {"args": ["touch", str(marker)]}, 1),
        *[EnvironmentResetRequest(3) for _ in range(20)],
        EnvironmentResetRequest(2**1000),  # a seed far beyond 64 bits
    ]
    frames = [[encode_message(message, index)]
              for index, message in enumerate([*every_request(), *worst])]
    frames += [item.frames for item in hostile_messages(oversized=False)]
    return frames


def guessed_credentials() -> list[dict[int, bytes]]:
    """What an attacker can try: nothing, a guessed token, keys of its own."""
    public, secret = zmq.curve_keypair()
    return [
        {},
        {zmq.PLAIN_USERNAME: b"mosaic", zmq.PLAIN_PASSWORD: b"guess"},
        {zmq.CURVE_SERVERKEY: public, zmq.CURVE_PUBLICKEY: public, zmq.CURVE_SECRETKEY: secret},
    ]


def attack(endpoint: str, frames: list[list[bytes]]) -> int:
    """Send ``frames`` with every guess of credentials; return how many answers came back."""
    answers = 0
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        for options in guessed_credentials():
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDTIMEO, 0)
            for option, value in options.items():
                sock.setsockopt(option, value)
            sock.connect(endpoint)
            for parts in frames:
                try:
                    sock.send_multipart(parts)
                except zmq.Again:
                    break  # never connected: nothing queues
            while sock.poll(SILENCE_MS, zmq.POLLIN):
                sock.recv_multipart()
                answers += 1
            sock.close(linger=0)
        for _ in range(CONNECTIONS):
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
            sock.close(linger=0)
    finally:
        context.term()
    return answers


#: Another user's attack needs nothing of mosaic's: a plain Python, plain sockets, and the
#: bytes of a ZeroMQ handshake (ZMTP 3.0, NULL mechanism) with one mosaic request behind it.
ATTACK_AS_ANOTHER_USER = """\
import socket, struct, sys, time
greeting = b"\\xff" + bytes(8) + b"\\x7f\\x03\\x00" + b"NULL".ljust(20, b"\\0") + bytes(32)
ready = b"\\x05READY" + bytes([11]) + b"Socket-Type" + struct.pack(">I", 6) + b"DEALER"
def frame(flags, body):
    if len(body) < 256:
        return bytes([flags, len(body)]) + body
    return bytes([flags | 2]) + struct.pack(">Q", len(body)) + body
request = bytes.fromhex(sys.argv[1])
for endpoint in sys.argv[2:]:
    scheme, address = endpoint.split("://", 1)
    try:
        if scheme == "tcp":
            host, port = address.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=5)
        else:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(address)
    except PermissionError:
        print("denied", flush=True)
        continue
    sock.settimeout(0.2)
    try:
        sock.sendall(greeting + frame(4, ready) + frame(0, b"") + frame(0, request))
        deadline = time.monotonic() + 3
        verdict = "open"
        while time.monotonic() < deadline:
            try:
                if not sock.recv(4096):
                    verdict = "closed"
                    break
            except socket.timeout:
                continue
            except OSError:
                verdict = "closed"
                break
    except OSError:
        verdict = "closed"
    sock.close()
    print(verdict, flush=True)
"""


def attack_as_another_user(endpoints: list[str], marker: Path) -> list[str]:
    """A plain-socket attack from a process of user ``nobody``: per endpoint, whether the
    file system denied the connection, the server closed it, or it stayed open."""
    request = EnvironmentStartRequest("cartpole", "subprocess:run",
                                      {"args": ["touch", str(marker)]}, 1)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    done = subprocess.run([python, "-c", ATTACK_AS_ANOTHER_USER,
                           encode_message(request, 1).hex(), *endpoints],
                          user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True,
                          text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


# -- the test ---------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_no_peer_without_the_run_s_secrets_is_heard(tmp_path, process_tag, left_alone, transport):
    launched = launch(tmp_path, transport, process_tag, gates=True)
    marker = tmp_path / "attacker-was-here"
    frames = attack_frames(marker)
    figures: dict[str, object] = {}
    try:
        steps_at_start = wait_for_gate(launched, START_GATE)
        endpoints = discover(launched, transport)
        before = {pid: rss_kib(pid) for pid in endpoints}
        open_gate(launched, START_GATE)
        started = time.monotonic()
        answers = sum(attack(endpoint, frames) for endpoint in endpoints.values())
        for endpoint in endpoints.values():
            send_not_zeromq(endpoint)
        figures["attack s"] = round(time.monotonic() - started, 2)
        if os.geteuid() == 0:
            verdicts = attack_as_another_user(list(endpoints.values()), marker)
            figures["as nobody"] = verdicts
            expected = "denied" if transport == "ipc" else "closed"  # a private folder; CURVE
            assert verdicts == [expected] * len(endpoints), verdicts
        steps_during = query(launched.store, "SELECT COUNT(*) FROM steps")[0][0]
        after = {pid: rss_kib(pid) for pid in endpoints}
        assert launched.proc.poll() is None, launched.stderr_text()[-3000:]
        assert steps_during > steps_at_start  # the run stepped on while it was attacked
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

    # Not a byte processed: no answer, no command run, no request handled or even decoded.
    assert answers == 0
    assert not marker.exists()
    assert "rejected a malformed message" not in stderr
    assert "refused EnvironmentResetRequest" not in stderr
    # Unharmed: the very trajectory, and the very brain, of the run left alone.
    assert outcome(launched) == left_alone

    for pid, sizes in after.items():
        grown = sizes["VmRSS"] - before[pid]["VmRSS"]
        figures[f"{endpoints[pid].rsplit('/', 1)[-1]} KiB"] = (before[pid]["VmRSS"], grown)
        assert grown < RSS_GROWTH_LIMIT_KIB, figures

    # Logged: every component warned of the peers it refused, in a bounded number of lines.
    for uid in COMPONENTS:
        assert re.search(rf"WARNING.*{re.escape(uid)}: refused a peer that did not "
                         rf"authenticate", stderr), uid
    lines = stderr.count("\n")
    assert lines < 500, f"{lines} lines of log for {len(COMPONENTS) * CONNECTIONS} connections"
    figures["log lines"] = lines
    print(f"\n{transport}: {figures}")
