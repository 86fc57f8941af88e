"""Supervising child processes, from both sides: every process mosaic starts lives by these.

Component processes (:class:`~mosaic.runtime.placement.ProcessPlaced`) and operator workers
(:class:`~mosaic.operators.driver.handle.OperatorProcessHandle`) are started, read, stopped and
reaped the same way; both kinds of child hold the same lifeline to their parent.

In the parent:

* :mod:`~mosaic.runtime.processes.child`: :func:`spawn` (a session of its own, with pipes) and
  :class:`ChildProcess` (its stderr in the log and in a tail for crash reports, how it ended,
  signals to its process group, the reap);
* :mod:`~mosaic.runtime.processes.stderr`: the stderr reader behind it;
* :mod:`~mosaic.runtime.processes.stop`: the ordered stop, each step bounded in time: ask, EOF,
  SIGTERM, SIGKILL;
* :mod:`~mosaic.runtime.processes.zygote_client`: a zygote to fork component processes from
  (:func:`fork_process`: a fork of it, or None, and the caller spawns), and
  :mod:`~mosaic.runtime.processes.adopted`: such a fork, supervised as a spawned child.

In the zygote (:mod:`~mosaic.runtime.processes.zygote`): the preloaded modules, the forks,
and what each fork becomes (its descriptors, its session, its command line:
:mod:`~mosaic.runtime.processes.title`). The two sides speak
:mod:`~mosaic.runtime.processes.zygote_wire`.

In the child:

* :mod:`~mosaic.runtime.processes.parent`: die with the parent (the kernel's parent-death
  signal and a parent check), and act once on SIGTERM however many come.

On both sides, :mod:`~mosaic.runtime.processes.lines` reads a pipe line by line, each line
bounded in length.

Nothing is imported here: a child imports only the module it uses, as early as it can.
"""
