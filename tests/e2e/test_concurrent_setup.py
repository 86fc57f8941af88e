"""Several environments and agents, each in a process, set up at once: the same trajectory as
one after another, and a part that fails to set up fails the run by name and leaves nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import assert_store_consistent, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: Environments (and agents: one per environment) of the experiments here.
COUNT = 3

ENVIRONMENT = """\
  - uid: env{index}
    env: {env}
    policy_mapping: {{agent_0: agent{index}}}
"""

AGENT = """\
  - uid: agent{index}
    muscle: {muscle}
"""

EXPERIMENT = """\
uid: several
seed: 11
episodes: 2
placement: {placement}
environments:
{environments}
agents:
{agents}
"""

#: The digest of ``experiment(...)`` when its components were set up one after another (it
#: changes only if Gymnasium changes CartPole or its seeding, or mosaic its digest or derived
#: seeds: the last changes made it a chain of episodes, for continued runs, and cut derived
#: seeds to 31 bits).
DIGEST_SET_UP_IN_SEQUENCE = "e8d846ca0342129a570f3d314db9f584"


def experiment(placement: str, envs: dict[int, str] | None = None,
               muscles: dict[int, str] | None = None) -> str:
    """COUNT CartPole environments, each with its own random agent, all placed in ``placement``;
    ``envs`` and ``muscles`` replace the environment or muscle of some indexes."""
    envs, muscles = envs or {}, muscles or {}
    return EXPERIMENT.format(
        placement=placement,
        environments="".join(ENVIRONMENT.format(index=i, env=envs.get(i, "gymnasium:CartPole-v1"))
                             for i in range(COUNT)).rstrip("\n"),
        agents="".join(AGENT.format(index=i, muscle=muscles.get(i, "mosaic.agents:RandomMuscle"))
                       for i in range(COUNT)).rstrip("\n"))


def run(folder: Path, text: str, name: str) -> tuple[int, str, Path]:
    """Run ``text`` with the real command: its exit code, stderr and store."""
    path = write_experiment(folder, text, f"{name}.yml")
    store = folder / f"{name}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=100)
    return result.returncode, result.stderr, store


def test_several_agents_in_processes_take_the_trajectory_of_threads(tmp_path: Path,
                                                                   process_tag: str) -> None:
    digests = {}
    for placement in ("thread", "process"):
        code, stderr, store = run(tmp_path, experiment(placement), placement)
        assert code == 0, stderr
        [(status, episodes, digest)] = query(store, "SELECT status, episodes, digest FROM runs")
        assert (status, episodes) == ("finished", 2 * COUNT)
        assert_store_consistent(store)
        digests[placement] = digest
    assert digests["process"] == digests["thread"] == DIGEST_SET_UP_IN_SEQUENCE
    # process_tag: no component process outlived the command.


@pytest.mark.parametrize(("kind", "uid", "replaced"), [
    ("environment", "env1", {"envs": {1: "tests.fixtures.envs:FailingToMake"}}),
    ("muscle", "agent1@env1", {"muscles": {1: "tests.fixtures.agents:FailingSetupMuscle"}}),
])
def test_one_failing_set_up_among_several_fails_the_run_naming_it(
        tmp_path: Path, process_tag: str, kind: str, uid: str,
        replaced: dict[str, dict[int, str]]) -> None:
    """The others, started at the same time, are all ended with the run."""
    code, stderr, store = run(tmp_path, experiment("process", **replaced), "failing")
    assert code == 1, stderr
    assert "Traceback" not in stderr, stderr
    [(status, error, steps)] = query(store, "SELECT status, error, steps FROM runs")
    assert (status, steps) == ("failed", 0)
    assert f"{kind} {uid!r}" in error and "cannot be" in error, error
    states = [s for (s,) in query(store, "SELECT to_state FROM transitions ORDER BY seq")]
    assert states == ["setting_up", "stopping", "failed"]
    # process_tag: no component process outlived the command, also of those that set up well.
