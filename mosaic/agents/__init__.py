"""The agent API a user subclasses: :class:`Brain` learns, :class:`Muscle` acts."""

from mosaic.agents.batch import Batch
from mosaic.agents.brain import Brain, NoOpBrain
from mosaic.agents.context import BrainContext, Mode, MuscleContext, Slot
from mosaic.agents.muscle import Muscle, RandomMuscle

__all__ = [
    "Batch",
    "Brain",
    "BrainContext",
    "Mode",
    "Muscle",
    "MuscleContext",
    "NoOpBrain",
    "RandomMuscle",
    "Slot",
]
