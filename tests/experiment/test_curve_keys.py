"""``curve_keys`` in an experiment file: read from the file's folder, checked before any run."""

from __future__ import annotations

from pathlib import Path

import pytest

from mosaic.core.errors import ConfigError
from mosaic.experiment import load_experiment
from mosaic.transport.keys import generate_keys

BODY = """\
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""


def write(folder: Path, head: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "exp.yml"
    path.write_text("uid: ok\n" + head + BODY)
    return path


def test_without_curve_keys_there_is_no_key_folder(tmp_path: Path) -> None:
    experiment = load_experiment(write(tmp_path, "transport: tcp\n"))
    assert (experiment.curve_keys, experiment.curve_keys_dir) == (None, None)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "192.0.2.10"])
def test_tcp_with_keys_on_any_host_resolves_them_against_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    generate_keys(tmp_path / "sub" / "keys")
    path = write(tmp_path / "sub", f"transport: tcp\nhost: {host}\ncurve_keys: keys\n")
    monkeypatch.chdir(tmp_path)  # not the file's folder: the path must not depend on it
    experiment = load_experiment(path)
    assert experiment.curve_keys == "keys"
    assert experiment.curve_keys_dir == (tmp_path / "sub" / "keys").resolve()
    assert experiment.run_config(0).host == host


def test_an_absolute_key_folder_is_taken_as_it_is(tmp_path: Path) -> None:
    generate_keys(tmp_path / "keys")
    path = write(tmp_path / "exp", f"transport: tcp\ncurve_keys: {tmp_path / 'keys'}\n")
    assert load_experiment(path).curve_keys_dir == (tmp_path / "keys").resolve()


def test_keys_that_do_not_belong_together_are_named_with_their_line(tmp_path: Path) -> None:
    generate_keys(tmp_path / "keys")
    generate_keys(tmp_path / "other")
    # A certificate pasted together from two: the other folder's public key, this secret key.
    secret = (tmp_path / "keys" / "client.key_secret").read_text().splitlines()
    public = [line for line in (tmp_path / "other" / "client.key_secret").read_text().splitlines()
              if "public-key" in line]
    mixed = [public[0] if "public-key" in line else line for line in secret]
    (tmp_path / "keys" / "client.key_secret").write_text("\n".join(mixed) + "\n")
    path = write(tmp_path, "transport: tcp\ncurve_keys: keys\n")
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    error = caught.value
    assert (error.location, error.line) == ("curve_keys", 3)
    assert str(tmp_path / "keys" / "client.key_secret") in error.message
    assert "public-key does not belong to secret-key" in error.message
