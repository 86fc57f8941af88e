"""The lowest layer: helpers that every other part of mosaic may use, and that use none of it.

* :mod:`~mosaic.core.errors`: the one exception tree;
* :mod:`~mosaic.core.seeding`: every seed of a run, derived from one;
* :mod:`~mosaic.core.spaces`: Gymnasium spaces as plain data;
* :mod:`~mosaic.core.imports`: resolving ``package.module:Name`` paths and environment ids;
* :mod:`~mosaic.core.lifeline`: the parent-death signal, and whether a process exists;
* :mod:`~mosaic.core.affinity`: pinning a run's step loop to a CPU;
* :mod:`~mosaic.core.log_limit`: bounding how much a flood of bad input is logged;
* :mod:`~mosaic.core.checkpoints`: brain state as ``.npz`` files;
* :mod:`~mosaic.core.run_states`: a run's states and stored statuses, named once (the store
  keeps them as text; a controller names them without loading the store).

Nothing is imported here: component processes import only the helpers they use.
"""
