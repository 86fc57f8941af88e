"""mosaic's built-in operator workers.

Each module runs as ``python -m workers.<name> [options]`` and speaks the JSON-lines protocol of
:mod:`mosaic.operators.protocol` on stdin/stdout through
:class:`mosaic.operators.worker.runtime.InteractiveRuntime`. All of them log to stderr only and
answer ``--help``. They also accept MOSAIC's launcher flags (``--run-id --env-name --task
--telemetry-dir [--interactive] --seed``) and then speak MOSAIC's dialect
(:mod:`mosaic.operators.dialect`); ``--dialect`` chooses it explicitly.

========================  ===========================================================
``random_worker``         uniform random actions, from the operator's seed (``--seed``)
``passive_worker``        the no-op action every step
``scripted_worker``       a user function ``module:function(observation, legal_actions)``
``rl_worker``             a greedy policy checkpoint (``.npz``, :mod:`mosaic.agents.policies`)
``llm_worker``            an OpenAI-compatible chat-completions endpoint
``chess_worker``          an LLM playing PettingZoo chess (FEN, legal moves, one conversation)
``balrog_worker``         an LLM playing BabyAI / MiniGrid from BALROG-style text
``vlm_worker``            a vision LLM sent each image observation
``bdi_worker``            an AgentSpeak plan library, a BDI agent (:mod:`mosaic.operators.bdi`)
``human_worker``          keyboard input on a terminal
========================  ===========================================================
"""
