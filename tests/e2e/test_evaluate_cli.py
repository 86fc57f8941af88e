"""``mosaic evaluate`` and ``mosaic manual`` through the real CLI: help, and a bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import run_mosaic

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

BAD = """\
uid: x
operators:
  - id: a
    type: random
    env: CartPole-v1
    setings: {}
seeds: [1]
"""


@pytest.mark.parametrize("command", ["evaluate", "manual"])
def test_help_names_the_mosaic_command_and_its_options(command: str) -> None:
    result = run_mosaic(command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: mosaic {command} [OPTIONS] FILE")
    for option in ("--telemetry", "--log-level", "-h, --help"):
        assert option in result.stdout
    assert ("--quiet" in result.stdout) == (command == "evaluate")
    assert "python -m" not in result.stdout


@pytest.mark.parametrize("command", ["evaluate", "manual"])
def test_a_bad_key_exits_2_naming_file_line_key_and_hint(command: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD)
    result = run_mosaic(command, str(bad), "--telemetry", str(tmp_path / "t.jsonl"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(
        f"error: {bad}:6: operators[0].setings: unknown key 'setings' "
        "(hint: did you mean 'settings'?")
    assert list(tmp_path.iterdir()) == [bad]  # nothing started, no telemetry


@pytest.mark.parametrize("command", ["evaluate", "manual"])
def test_a_bad_option_is_a_usage_error(command: str, tmp_path: Path) -> None:
    result = run_mosaic(command, str(tmp_path / "any.yml"), "--log-level", "loud")
    assert result.returncode == 2
    assert f"Usage: mosaic {command}" in result.stderr and "--log-level" in result.stderr
