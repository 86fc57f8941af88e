"""The driver side of the worker protocol: :class:`OperatorLauncher` starts worker subprocesses,
and their handles speak the JSON-lines protocol (:mod:`mosaic.operators.protocol`) to them."""
