"""A command for the zygote tests to fork: ``python -m tests.runtime.zygote_target ACTION ...``.

It prints one line of JSON on stdout (what it sees of itself), then ``exit N`` exits with N,
``wait`` waits for a signal (dying with its parent like a component process), ``write FD``
writes ``hello`` to the descriptor FD and exits.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys

import numpy as np


def main(argv: list[str]) -> int:
    action = argv[0]
    print(json.dumps({
        "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "argv": argv,
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "random": random.random(), "numpy": float(np.random.random()),
        "main": __name__,
    }), flush=True)
    if action == "exit":
        return int(argv[1])
    if action == "write":
        os.write(int(argv[1]), b"hello")
        return 0
    if action == "wait":
        from mosaic.runtime.processes.parent import die_with_parent

        die_with_parent(int(argv[1]), check_every=None)
        signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
