"""The process runtime: how a component lives, in a thread or in a process of its own.

* :mod:`~mosaic.runtime.component`: the :class:`Component` base (handlers by message type,
  ``on_setup``, ``on_shutdown``);
* :mod:`~mosaic.runtime.host`: :class:`ActorHost`, the pykka actor that owns a component's socket;
* :mod:`~mosaic.runtime.placement`: placing a component in a thread or a process, and stopping it;
* :mod:`~mosaic.runtime.process_main`: the entry point of a component process;
* :mod:`~mosaic.runtime.processes`: supervising every child process, component or operator
  worker, from both sides (start, stderr, exit cause, ordered stop; dying with the parent);
* :mod:`~mosaic.runtime.heartbeat`: telling a hung process from a starved one;
* :mod:`~mosaic.runtime.bootstrap`: the run's secrets, handed to a child through a pipe.

It knows nothing of environments, agents or operators: what a component does is the business of
the layers above (see :mod:`mosaic.actors`), and so is what a worker says on its pipes.
"""
