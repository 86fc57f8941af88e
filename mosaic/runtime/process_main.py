"""Entry point of a component process:
``python -m mosaic.runtime.process_main KIND UID ENDPOINT --component module:Class``.

It runs the same :class:`~mosaic.runtime.host.ActorHost` as a thread placement would, prints
``READY <endpoint>`` once bound (or ``FAILED <reason>``), and exits when the host stops: after its
shutdown request, on SIGTERM, or when the parent process is gone. SIGINT is ignored: a Ctrl-C at
the terminal is the run's to orchestrate, not each child's.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from mosaic.core.affinity import pin_current_thread
from mosaic.core.imports import user_folder_last
from mosaic.core.process_exit import exit_process
from mosaic.runtime.heartbeat import start_beating
from mosaic.runtime.processes.parent import PARENT_CHECK_S, die_with_parent, on_first_sigterm
from mosaic.transport.context import REPLY_LINGER_MS, deliver_pending
from mosaic.transport.security import stop_gatekeeper

#: How long an orphan (its parent gone) waits for its orderly stop before it exits anyway.
ORPHAN_STOP_S = 5.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mosaic.runtime.process_main")
    parser.add_argument("kind")
    parser.add_argument("uid")
    parser.add_argument("endpoint")
    parser.add_argument("--component", required=True,
                        help="the component's class path (see mosaic.runtime.component)")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--start-timeout", type=float, default=30.0)
    parser.add_argument("--cpu", type=int, default=None, help="CPU of the actor thread")
    parser.add_argument("--heartbeat-fd", type=int, default=None,
                        help="a pipe to beat on (see mosaic.runtime.heartbeat)")
    parser.add_argument("--bootstrap-fd", type=int, default=None,
                        help="a pipe to read credentials from (see mosaic.runtime.bootstrap)")
    args = parser.parse_args(argv)
    # Before any third-party import: the user's folder (this process's, as the command's) was
    # put first by ``python -m``.
    user_folder_last()

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The parent check is the main loop's, below, once the component serves.
    lifeline = die_with_parent(args.parent_pid, check_every=None)
    # Pin once, first, while this is the only thread: every thread started later (the
    # heartbeat, the actor, ZeroMQ's I/O threads) inherits the CPU, and a move that the kernel
    # is slow to make on a busy machine delays the start-up, not a heartbeat.
    pin_current_thread(args.cpu)
    if args.heartbeat_fd is not None:
        start_beating(args.heartbeat_fd)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format=f"%(levelname)s {args.uid}: %(message)s")

    # Imported after the lifeline is armed: these imports are the slow part of a start.
    from mosaic.core.imports import allow_only
    from mosaic.runtime.bootstrap import NO_TRUST, read
    from mosaic.runtime.component import make_component
    from mosaic.runtime.host import ActorHost, HostStatus

    status = HostStatus()
    try:
        trust = NO_TRUST if args.bootstrap_fd is None else read(args.bootstrap_fd)
        allow_only(trust.allowed_imports)
        component = make_component(args.component, args.uid)
        component.credentials = trust.credentials
        component.allowed_imports = trust.allowed_imports
    except Exception as error:
        print(f"FAILED {type(error).__name__}: {error}", flush=True)
        return 1
    ref = ActorHost.start(component, args.endpoint, status)  # already on args.cpu
    if not status.bound.wait(args.start_timeout) or status.failure is not None:
        print(f"FAILED {status.failure or 'start-up timed out'}", flush=True)
        ref.stop(block=False)
        return 1
    print(f"READY {status.endpoint}", flush=True)

    on_first_sigterm(lambda: ref.stop(block=False))
    while not status.stopped.wait(PARENT_CHECK_S):
        if lifeline.check():  # the parent is gone, and this process has its SIGTERM
            status.stopped.wait(ORPHAN_STOP_S)
            break
    # The component's last answer (to its shutdown) may still be in ZeroMQ's I/O thread, which
    # the exit below would end with it: the run's last metrics and checkpoint path were lost so.
    stop_gatekeeper()
    deliver_pending(REPLY_LINGER_MS / 1000 + 0.5)
    return 0 if status.failure is None else 1


if __name__ == "__main__":
    # Without the interpreter's teardown: on a busy machine it held the cores that the rest of
    # the run's shut-down was waiting for (see mosaic.core.process_exit).
    exit_process(main())
