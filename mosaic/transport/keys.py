"""CURVE key folders: writing a new one (``mosaic keys generate``) and reading one back.

A key folder holds two keypairs in ZeroMQ's certificate format (``zmq.auth``): the *server*
pair, whose secret key every mosaic process that listens on tcp uses, and the *client* pair,
whose public key is the only one a listening process lets in. Each pair is a public
certificate (``NAME.key``) and a secret one (``NAME.key_secret``, holding both keys). mosaic
reads only the two secret certificates; the public ones are there for other ZeroMQ tools.

Whoever holds the folder can join a run, so the folder is created ``0700`` and the secret
certificates ``0600``.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import zmq
import zmq.auth
import zmq.utils.z85

from mosaic.core.errors import MosaicError

__all__ = ["CurveKeys", "KeyFileError", "generate_keys", "key_files", "load_keys"]

SERVER = "server"
CLIENT = "client"
#: What ``mosaic keys generate`` tells a user to do; repeated in every key error as the way out.
HOW_TO_GENERATE = 'run "mosaic keys generate DIR" and set curve_keys: DIR'
#: A CURVE key is 32 bytes, written in Z85 as 40 characters.
_Z85_KEY_LENGTH = 40


class KeyFileError(MosaicError):
    """A key folder or certificate is missing, unreadable, malformed, or cannot be written.

    ``path`` is the folder or file at fault; ``problem`` says what is wrong with it.
    """

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


@dataclass(frozen=True)
class CurveKeys:
    """The keys of one folder, Z85-encoded as ZeroMQ's socket options take them.

    The secret keys are left out of ``repr`` so that a log line or a traceback never shows them.
    """

    directory: Path
    server_public: bytes
    server_secret: bytes = field(repr=False)
    client_public: bytes
    client_secret: bytes = field(repr=False)


def key_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The four certificates a key folder holds, public before secret, server before client."""
    folder = Path(directory)
    return [folder / f"{name}{suffix}" for name in (SERVER, CLIENT)
            for suffix in (".key", ".key_secret")]


def generate_keys(directory: str | os.PathLike[str], *, force: bool = False) -> list[Path]:
    """Write a server and a client keypair into ``directory``; return the files written.

    The folder is created with mode ``0700`` if it does not exist (an existing one keeps its
    mode); secret certificates get ``0600``, public ones ``0644``. The certificates are written
    in a private temporary folder inside ``directory`` and moved into place, so a secret is
    never readable by others, not even for a moment, and a folder never holds half a set.

    Raises :class:`KeyFileError` if the folder already holds any of the certificates (unless
    ``force``: then they are replaced), or if it cannot be created or written.
    """
    folder = Path(directory).expanduser().absolute()
    targets = key_files(folder)
    existing = [path for path in targets if path.exists() or path.is_symlink()]
    if existing and not force:
        names = ", ".join(path.name for path in existing)
        raise KeyFileError(folder, f"already holds keys ({names}); use --force to replace them")
    try:
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True)
            folder.chmod(0o700)  # mkdir's mode is filtered by the umask
        elif not folder.is_dir():
            raise KeyFileError(folder, "exists and is not a folder")
        staging = Path(tempfile.mkdtemp(prefix=".mosaic-keys-", dir=folder))
    except OSError as error:
        raise KeyFileError(folder, f"cannot create the folder: {error.strerror or error}") from None
    try:
        for name in (SERVER, CLIENT):
            public, secret = zmq.auth.create_certificates(staging, name)
            os.chmod(secret, 0o600)
            os.chmod(public, 0o644)
        for target in targets:
            os.replace(staging / target.name, target)
    except OSError as error:
        raise KeyFileError(folder, f"cannot write the keys: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return targets


def load_keys(directory: str | os.PathLike[str]) -> CurveKeys:
    """Read and check the keys in ``directory``.

    Each secret certificate must hold a public and a secret key, each 40 Z85 characters, and
    the public key must be the one that belongs to the secret key (a certificate edited by hand
    or pasted together from two would otherwise fail later, at the handshake, without a word).

    Raises :class:`KeyFileError` naming the folder or the certificate at fault.
    """
    folder = Path(directory).expanduser().absolute()
    if not folder.is_dir():
        problem = "no such folder" if not folder.exists() else "not a folder"
        raise KeyFileError(folder, problem)
    server_public, server_secret = _load_pair(folder / f"{SERVER}.key_secret")
    client_public, client_secret = _load_pair(folder / f"{CLIENT}.key_secret")
    return CurveKeys(folder, server_public, server_secret, client_public, client_secret)


def _load_pair(path: Path) -> tuple[bytes, bytes]:
    if not path.is_file():
        raise KeyFileError(path, "no such file" if not path.exists() else "not a file")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except OSError as error:
        raise KeyFileError(path, f"cannot read the file: {error.strerror or error}") from None
    except (ValueError, UnicodeDecodeError):
        raise KeyFileError(path, "malformed certificate: no public-key line") from None
    if secret is None:
        raise KeyFileError(path, "malformed certificate: no secret-key line")
    _check_key(path, "public-key", public)
    _check_key(path, "secret-key", secret)
    try:
        derived = zmq.curve_public(secret)
    except zmq.ZMQError:
        derived = b""
    if derived != public:
        raise KeyFileError(path, "malformed certificate: public-key does not belong to secret-key")
    return public, secret


def _check_key(path: Path, name: str, key: bytes) -> None:
    if len(key) != _Z85_KEY_LENGTH:
        raise KeyFileError(path, f"malformed certificate: {name} is {len(key)} characters long, "
                                 f"expected {_Z85_KEY_LENGTH} (Z85)")
    try:
        zmq.utils.z85.decode(key)
    except (ValueError, KeyError, struct.error):
        raise KeyFileError(path, f"malformed certificate: {name} is not Z85 text") from None
