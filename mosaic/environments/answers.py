"""A per-player environment's answers to the step core's requests.

The one translation of an adapter's :class:`~mosaic.environments.adapter.Outcome` into the
messages the step core (:mod:`mosaic.stepping`) takes, for whoever steps the environment: the
environment actor, for the simulation controller, and the in-process
:class:`~mosaic.agents.learners.Harness`. Infos are cut to what the codec carries
(:class:`~mosaic.environments.info.InfoFilter`).
"""

from __future__ import annotations

from mosaic.core.seeding import check_seed
from mosaic.environments.adapter import EnvironmentAdapter
from mosaic.environments.info import InfoFilter
from mosaic.messages import (
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
)

__all__ = ["reset_answer", "update_answer"]


def reset_answer(env: EnvironmentAdapter, request: EnvironmentResetRequest,
                 info: InfoFilter) -> EnvironmentResetResponse:
    """Reset ``env`` with the request's seed."""
    o = env.reset(check_seed(request.seed))
    return EnvironmentResetResponse(o.observations, o.acting, o.legal_actions,
                                    info.per_slot(o.infos))


def update_answer(env: EnvironmentAdapter, request: EnvironmentUpdateRequest,
                  info: InfoFilter) -> EnvironmentUpdateResponse:
    """Step ``env`` with the request's actions."""
    o = env.step(request.actions)
    infos = o.infos
    return EnvironmentUpdateResponse(o.observations, o.rewards, o.terminated, o.truncated,
                                     o.acting, o.legal_actions,
                                     info.per_slot(infos) if infos else infos)
