"""The worker side of the protocol: :func:`~mosaic.operators.worker.runtime.run_worker`, the main
loop every worker program in ``workers/`` shares."""
