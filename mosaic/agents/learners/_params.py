"""What the ``*_params`` modules of the built-in learners share: checking a learner's ``params``
at setup with its pydantic model, in the words of the experiment file's checks.

A learner's params are checked twice: when the experiment file is loaded (its brain's and
muscle's ``params_model``), so that a bad value is reported with the file, line and key path
before anything starts, and again by ``setup``, since params reach a learner as plain data (the
Python API, :class:`~mosaic.agents.learners.Harness`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from mosaic.core.config_problems import config_error, validate
from mosaic.core.errors import MosaicError

__all__ = ["check_params"]

_M = TypeVar("_M", bound=BaseModel)


def check_params(model: type[_M], params: Mapping[str, Any], owner: str) -> _M:
    """``params`` checked with ``model``; :class:`MosaicError` listing every problem otherwise,
    worded as when the experiment file is loaded (``<owner>: params.learning_rate: ...``)."""
    checked, problems = validate(model, dict(params), ("params",))
    if checked is None:
        raise MosaicError(str(config_error(owner, problems, {})))
    return checked
