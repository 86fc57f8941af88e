"""A PostgreSQL server of the tests' own: initdb in a temporary folder, on 127.0.0.1 and a free
port, with password authentication; stopped and removed afterwards.

initdb refuses to run as root, so as root the server runs as the ``postgres`` user (Debian's
postgresql package creates it) through ``runuser``. Anything that keeps the server from starting
is a :class:`ServerError` with the reason: the tests fail with it, they never skip.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

#: The server's superuser, and its password (which no mosaic output may show).
USER = "mosaic"
PASSWORD = "pw-Zq81-never-shown"
#: Bounds on the server's programs; a loaded machine takes seconds, not minutes.
INITDB_TIMEOUT_S = 120.0
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


class ServerError(RuntimeError):
    """The test server could not be started (or stopped); the message says why."""


@dataclass(frozen=True)
class Server:
    """A running test server: its folder (data, socket, log), port and how to run its programs."""

    folder: Path
    port: int
    bindir: Path
    as_user: tuple[str, ...]

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, database: str, *, password: str = PASSWORD,
            driver: str = "postgresql", port: int | None = None) -> str:
        """A URL of ``database`` on this server, as a user gives it to mosaic."""
        return f"{driver}://{USER}:{password}@127.0.0.1:{port or self.port}/{database}"

    def create_database(self) -> str:
        """A new, empty database; returns its name."""
        import psycopg

        name = f"mosaic_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(host="127.0.0.1", port=self.port, user=USER, password=PASSWORD,
                             dbname="postgres", autocommit=True, connect_timeout=20) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def query(self, database: str, sql: str) -> list[tuple[object, ...]]:
        """The rows of ``sql`` in ``database``."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=USER, password=PASSWORD,
                             dbname=database, connect_timeout=20) as conn:
            return [tuple(row) for row in conn.execute(sql).fetchall()]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def find_bindir() -> Path:
    """The folder of initdb and pg_ctl: ``pg_config --bindir``, else Debian's layout, else PATH."""
    candidates: list[Path] = []
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                               timeout=10, check=True)
        candidates.append(Path(found.stdout.strip()))
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted((Path(p) for p in versions),
                         key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                         reverse=True)
    initdb = shutil.which("initdb")
    if initdb is not None:
        candidates.append(Path(initdb).resolve().parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise ServerError("PostgreSQL's initdb and pg_ctl were not found (pg_config --bindir, "
                      "/usr/lib/postgresql/*/bin, PATH): apt-get install postgresql")


def start() -> Server:
    """Create and start a server; :func:`stop` it. Raises :class:`ServerError` with the reason."""
    bindir = find_bindir()
    folder = Path(tempfile.mkdtemp(prefix="mosaic-pg-"))
    try:
        as_user = _unprivileged(folder)
        password_file = folder / "password"
        password_file.write_text(PASSWORD + "\n")
        _give(password_file, as_user)
        _run(as_user, bindir / "initdb", "-D", str(folder / "data"), "-U", USER,
             "--auth=scram-sha-256", f"--pwfile={password_file}", "-E", "UTF8", "--no-sync",
             folder=folder, timeout=INITDB_TIMEOUT_S, what="initdb")
        password_file.unlink()
        last = ""
        for _ in range(3):  # another program may take the free port first
            server = Server(folder, free_port(), bindir, as_user)
            try:
                _run(as_user, bindir / "pg_ctl", "-D", str(server.data), "-l",
                     str(folder / "server.log"), "-w", "-t", str(START_TIMEOUT_S), "-o",
                     _options(server.port, folder), "start",
                     folder=folder, timeout=START_TIMEOUT_S + 10, what="pg_ctl start")
                return server
            except ServerError as error:
                last = str(error)
                _kill_postmaster(server)
        raise ServerError(last)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def halt(server: Server) -> None:
    """Stop the server as an administrator's restart does (``fast``: clients are cut off), its
    data kept; :func:`resume` starts it again on the same port."""
    _run(server.as_user, server.bindir / "pg_ctl", "-D", str(server.data), "-m", "fast", "-w",
         "-t", str(STOP_TIMEOUT_S), "stop", folder=server.folder, timeout=STOP_TIMEOUT_S + 10,
         what="pg_ctl stop")


def resume(server: Server) -> None:
    """Start a :func:`halt`-ed server again, on its port."""
    _run(server.as_user, server.bindir / "pg_ctl", "-D", str(server.data), "-l",
         str(server.folder / "server.log"), "-w", "-t", str(START_TIMEOUT_S), "-o",
         _options(server.port, server.folder), "start", folder=server.folder,
         timeout=START_TIMEOUT_S + 10, what="pg_ctl start")


def stop(server: Server) -> None:
    """Stop the server (immediate: its data is removed next; else SIGKILL), remove its folder."""
    try:
        with contextlib.suppress(ServerError):
            _run(server.as_user, server.bindir / "pg_ctl", "-D", str(server.data), "-m",
                 "immediate", "-w", "-t", str(STOP_TIMEOUT_S), "stop", folder=server.folder,
                 timeout=STOP_TIMEOUT_S + 10, what="pg_ctl stop")
        _kill_postmaster(server)
    finally:
        shutil.rmtree(server.folder, ignore_errors=True)


def _options(port: int, folder: Path) -> str:
    # The data is thrown away afterwards: no need to wait for the disk.
    return f"-p {port} -k {folder} -h 127.0.0.1 -c fsync=off"


def _unprivileged(folder: Path) -> tuple[str, ...]:
    """How to run the server's programs: as root, as the postgres user, owning ``folder``."""
    if os.geteuid() != 0:
        return ()
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise ServerError("initdb refuses to run as root, and there is no 'postgres' user to "
                          "run it as (Debian's postgresql package creates one)") from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ServerError("runuser (util-linux) is needed to run PostgreSQL as 'postgres'")
    os.chown(folder, user.pw_uid, user.pw_gid)
    return (runuser, "-u", "postgres", "--")


def _give(path: Path, as_user: tuple[str, ...]) -> None:
    if as_user:
        user = pwd.getpwnam("postgres")
        os.chown(path, user.pw_uid, user.pw_gid)


def _run(as_user: tuple[str, ...], program: Path, *args: str, folder: Path, timeout: float,
         what: str) -> None:
    try:
        done = subprocess.run([*as_user, str(program), *args], cwd=folder, capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ServerError(f"{what} failed: {error}") from None
    if done.returncode != 0:
        log = folder / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise ServerError(f"{what} exited {done.returncode}: {done.stderr.strip()}\n{tail}")


def _kill_postmaster(server: Server) -> None:
    """SIGKILL a postmaster that is still there, and wait (10 s at most) until it is gone."""
    pid_file = server.data / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
