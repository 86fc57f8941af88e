"""The step core: the episode loop of an environment and the run's ledger, free of transport.

What every driver of episodes shares, so that the order of calls is written once: the
SimulationController and the rollout workers (over messages, in :mod:`mosaic.orchestration`),
and the in-process :class:`~mosaic.agents.learners.Harness`. It talks to nothing but plain
callables (step the environment, ask the muscles, hand rows to the store), so it runs, and is
tested, with no socket and no thread.

* :mod:`~mosaic.stepping.episodes`: the interface, :class:`~mosaic.stepping.episodes.Episodes`,
  and what a run asks of a loop (:class:`~mosaic.stepping.episodes.Schedule`,
  :class:`~mosaic.stepping.episodes.Recording`);
* :mod:`~mosaic.stepping.player_episodes` (per-player environments) and
  :mod:`~mosaic.stepping.copy_episodes` (an environment's ``copies:``);
* :mod:`~mosaic.stepping.ledger`: the digest chain, the rows for the store, progress and
  termination, shared by the loops of a run (:mod:`~mosaic.stepping.progress`,
  :mod:`~mosaic.stepping.termination`).
"""
