"""tcp beyond loopback through the real CLI: only with CURVE keys, and the same trajectory."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli import query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

EXPERIMENT = """\
    uid: curve
    seed: 11
    episodes: 3
    placement: process
    {network}
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: learner
        brain: tests.fixtures.agents:CountingBrain
        muscle: tests.fixtures.agents:ExperienceMuscle
"""


def bindable(address: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


def public_address() -> str:
    """This machine's first non-loopback IPv4 address; the wildcard 0.0.0.0 if it has none."""
    try:
        listed = subprocess.run(["hostname", "-I"], capture_output=True, text=True,
                                timeout=5).stdout.split()
    except (OSError, subprocess.SubprocessError):
        listed = []
    for text in listed:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if address.version == 4 and not address.is_loopback and bindable(text):
            return text
    return "0.0.0.0"


def network(transport: str, host: str | None = None, keys: str | None = None) -> str:
    lines = [f"transport: {transport}"]
    if host is not None:
        lines.append(f"host: {host}")
    if keys is not None:
        lines.append(f"curve_keys: {keys}")
    return "\n    ".join(lines)


def run(folder: Path, name: str, text: str, *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                                 Path]:
    path = write_experiment(folder, EXPERIMENT.format(network=text), name)
    store = folder / f"{path.stem}.sqlite"
    return run_mosaic("experiment-start", str(path), "--store", str(store), *extra), store


def test_curve_over_a_public_address_gives_the_ipc_trajectory(tmp_path: Path,
                                                              process_tag: str) -> None:
    host = public_address()
    generated = run_mosaic("keys", "generate", str(tmp_path / "keys"))
    assert generated.returncode == 0, generated.stderr
    # A relative curve_keys is read from the experiment file's folder, not the current one.
    result, store = run(tmp_path, "over_tcp.yml", network("tcp", host, "keys"), "-vv")
    assert result.returncode == 0, result.stderr[-3000:]
    [(status, steps, digest)] = query(store, "SELECT status, steps, digest FROM runs")
    assert status == "finished" and steps > 0
    assert query(store, "SELECT COUNT(*) FROM steps")[0][0] == steps
    # Every component process let its peers in through the authenticator.
    for child in ("cartpole", "learner", "learner@cartpole"):
        assert (f"DEBUG mosaic.child.{child}: {child}: let in a peer holding the run's "
                "credentials (CURVE)") in result.stderr, child
    assert "refused a peer" not in result.stderr

    plain, plain_store = run(tmp_path, "over_ipc.yml", network("ipc"))
    assert plain.returncode == 0, plain.stderr[-3000:]
    [(plain_steps, plain_digest)] = query(plain_store, "SELECT steps, digest FROM runs")
    assert (plain_steps, plain_digest) == (steps, digest)
    assert len(digest) == 32


def test_a_public_address_without_keys_starts_nothing(tmp_path: Path, process_tag: str) -> None:
    host = public_address()
    result, store = run(tmp_path, "no_keys.yml", network("tcp", host))
    assert result.returncode == 2
    assert f"no_keys.yml:6: host: {host} is not a loopback address" in result.stderr
    assert 'run "mosaic keys generate DIR" and set curve_keys: DIR' in result.stderr
    assert "Traceback" not in result.stderr
    assert not store.exists()
