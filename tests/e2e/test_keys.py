"""``mosaic keys generate`` through the real CLI: private files, no silent overwrite."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.e2e.cli import run_mosaic

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

SECRETS = ["server.key_secret", "client.key_secret"]
PUBLICS = ["server.key", "client.key"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_generate_writes_private_keys_and_says_how_to_use_them(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    result = run_mosaic("keys", "generate", str(folder))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted(SECRETS + PUBLICS)
    assert mode(folder) == 0o700
    assert all(mode(folder / name) == 0o600 for name in SECRETS)
    assert all(mode(folder / name) == 0o644 for name in PUBLICS)
    for name in SECRETS + PUBLICS:
        assert str(folder / name) in result.stdout
    assert "transport: tcp" in result.stdout
    assert f"curve_keys: {folder}" in result.stdout
    assert b"secret-key" in (folder / "server.key_secret").read_bytes()
    assert b"secret-key" not in (folder / "server.key").read_bytes()


def test_existing_keys_are_refused_then_replaced_with_force(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    assert run_mosaic("keys", "generate", str(folder)).returncode == 0
    first = snapshot(folder)

    again = run_mosaic("keys", "generate", str(folder))
    assert again.returncode == 2
    assert "already holds keys" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr
    assert snapshot(folder) == first

    forced = run_mosaic("keys", "generate", "--force", str(folder))
    assert forced.returncode == 0, forced.stderr
    replaced = snapshot(folder)
    assert sorted(replaced) == sorted(first)
    assert all(replaced[name] != first[name] for name in SECRETS)
    assert all(mode(folder / name) == 0o600 for name in SECRETS)


def test_a_folder_that_cannot_be_written_is_exit_2_without_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for target in (blocker / "keys", blocker):
        result = run_mosaic("keys", "generate", str(target))
        assert result.returncode == 2
        assert result.stderr.startswith(f"error: {target}: ")
        assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
