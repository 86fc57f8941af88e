"""Finding processes a test left behind, by a tag in their environment."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

TAG_VARIABLE = "MOSAIC_TEST_TAG"


def tagged_processes(tag: str) -> list[int]:
    """Pids of live processes (other than this one) whose environment carries ``tag``."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def children_of(parent: int) -> dict[int, str]:
    """The processes whose parent is ``parent``, with their state letter (``Z``: not reaped)."""
    children: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children[int(entry.name)] = fields[0]
    return children


def kill_and_reap_children() -> dict[int, str]:
    """SIGKILL and reap every child of this process still present; return what was found."""
    found = children_of(os.getpid())
    for pid, state in found.items():
        if state != "Z":
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    return found


def _components(parent: int) -> dict[int, list[bytes]]:
    """The children of ``parent`` that run a component (``process_main KIND UID ...``), with
    their arguments after ``process_main``. Not the command's zygote: it runs none."""
    found = {}
    for pid in children_of(parent):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mosaic.runtime.process_main" in argv:
            found[pid] = argv[argv.index(b"mosaic.runtime.process_main") + 1:]
    return found


def component_children(parent: int) -> list[int]:
    """The pids of ``parent``'s component processes that have not exited."""
    return [pid for pid in _components(parent) if not gone(pid)]


def component_pids(parent: int, kind: str, uid: str) -> list[int]:
    """Every child of ``parent`` running component ``kind uid`` (``process_main KIND UID``;
    one per run of the experiment)."""
    return [pid for pid, args in _components(parent).items()
            if args[:2] == [kind.encode(), uid.encode()]]


def component_pid(parent: int, kind: str, uid: str) -> int | None:
    """The pid of ``parent``'s one component process ``kind uid``, or None."""
    pids = component_pids(parent, kind, uid)
    return pids[0] if pids else None


def gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie has)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status
