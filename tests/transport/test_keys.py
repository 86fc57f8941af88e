"""CURVE key folders: written private and complete, read back only when every key checks out."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import zmq
import zmq.auth

from mosaic.transport.keys import KeyFileError, generate_keys, key_files, load_keys

NAMES = ["server.key", "server.key_secret", "client.key", "client.key_secret"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_generate_writes_two_keypairs_private_and_load_reads_them(tmp_path: Path) -> None:
    folder = tmp_path / "deep" / "keys"
    written = generate_keys(folder)
    assert [path.name for path in written] == NAMES
    assert sorted(p.name for p in folder.iterdir()) == sorted(NAMES)  # no staging left behind
    assert mode(folder) == 0o700
    assert {p.name: mode(p) for p in written} == {
        "server.key": 0o644, "server.key_secret": 0o600,
        "client.key": 0o644, "client.key_secret": 0o600,
    }
    keys = load_keys(folder)
    assert keys.directory == folder
    assert zmq.curve_public(keys.server_secret) == keys.server_public
    assert zmq.curve_public(keys.client_secret) == keys.client_public
    assert keys.server_public != keys.client_public
    # The public certificates carry the same public keys.
    assert zmq.auth.load_certificate(folder / "server.key") == (keys.server_public, None)
    assert zmq.auth.load_certificate(folder / "client.key") == (keys.client_public, None)


def test_an_existing_folder_keeps_its_mode(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    generate_keys(folder)
    assert mode(folder) == 0o755
    assert mode(folder / "server.key_secret") == 0o600


def test_existing_keys_are_kept_unless_forced(tmp_path: Path) -> None:
    generate_keys(tmp_path)
    before = load_keys(tmp_path)
    with pytest.raises(KeyFileError, match=r"already holds keys .*--force"):
        generate_keys(tmp_path)
    assert load_keys(tmp_path) == before
    generate_keys(tmp_path, force=True)
    after = load_keys(tmp_path)
    assert after.server_secret != before.server_secret
    assert after.client_secret != before.client_secret


def test_one_leftover_file_is_enough_to_refuse(tmp_path: Path) -> None:
    (tmp_path / "client.key").write_text("not mine to overwrite\n")
    with pytest.raises(KeyFileError, match=r"\(client.key\)"):
        generate_keys(tmp_path)
    assert (tmp_path / "client.key").read_text() == "not mine to overwrite\n"
    assert not (tmp_path / "server.key_secret").exists()


def test_a_folder_that_cannot_be_created_is_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(KeyFileError, match="cannot create the folder"):
        generate_keys(blocker / "keys")
    with pytest.raises(KeyFileError, match="not a folder"):
        generate_keys(blocker)


def test_repr_never_shows_a_secret(tmp_path: Path) -> None:
    generate_keys(tmp_path)
    keys = load_keys(tmp_path)
    text = repr(keys)
    assert keys.server_public.decode() in text
    assert keys.server_secret.decode() not in text and keys.client_secret.decode() not in text


def _certificate(public: bytes | str | None, secret: bytes | str | None) -> str:
    lines = ["metadata", "curve"]
    for name, key in (("public-key", public), ("secret-key", secret)):
        if key is not None:
            lines.append(f'    {name} = "{key.decode() if isinstance(key, bytes) else key}"')
    return "\n".join(lines) + "\n"


PUBLIC, SECRET = zmq.curve_keypair()
OTHER_PUBLIC, _ = zmq.curve_keypair()


@pytest.mark.parametrize("content, problem", [
    ("", "no public-key line"),
    (_certificate(PUBLIC, None), "no secret-key line"),
    (_certificate(PUBLIC, SECRET[:-1]), "secret-key is 39 characters long"),
    (_certificate(PUBLIC[:30], SECRET), "public-key is 30 characters long"),
    (_certificate(PUBLIC, "~" * 40), "secret-key is not Z85 text"),
    (_certificate(PUBLIC, "%" * 40), "secret-key is not Z85 text"),
    (_certificate(OTHER_PUBLIC, SECRET), "public-key does not belong to secret-key"),
    (b"\xff\xfe binary", "no public-key line"),
])
def test_a_malformed_certificate_is_named(tmp_path: Path, content: str | bytes,
                                          problem: str) -> None:
    generate_keys(tmp_path)
    target = tmp_path / "client.key_secret"
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    with pytest.raises(KeyFileError) as caught:
        load_keys(tmp_path)
    assert caught.value.path == target
    assert problem in caught.value.problem


def test_missing_folder_and_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError) as caught:
        load_keys(tmp_path / "nowhere")
    assert (caught.value.path, caught.value.problem) == (tmp_path / "nowhere", "no such folder")
    generate_keys(tmp_path)
    for name in ("server.key_secret", "client.key_secret"):
        (tmp_path / name).rename(tmp_path / "aside")
        with pytest.raises(KeyFileError) as caught:
            load_keys(tmp_path)
        assert (caught.value.path, caught.value.problem) == (tmp_path / name, "no such file")
        (tmp_path / "aside").rename(tmp_path / name)
    # The public certificates are for other tools; mosaic does not need them.
    for name in ("server.key", "client.key"):
        (tmp_path / name).unlink()
    assert load_keys(tmp_path).directory == tmp_path


def test_key_files_lists_the_folder_layout(tmp_path: Path) -> None:
    assert key_files(tmp_path) == [tmp_path / name for name in NAMES]
