"""End to end: an operator agent answering None plays the no-op action, through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from mosaic.messages.codec import unpack
from tests.e2e.cli import query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_none_from_an_operator_agent_is_the_noop_action_in_the_store(
    tmp_path: Path, process_tag: str,
) -> None:
    path = write_experiment(tmp_path, """\
        uid: passive-operator
        seed: 4
        episodes: 2
        environments:
          - uid: lake
            env: gymnasium:FrozenLake-v1
            wrappers:
              - TimeLimit: {max_episode_steps: 6}
        agents:
          - uid: idle
            muscle:
              class: mosaic.operators:OperatorMuscle
              params:
                operator: {class: passive}
                noop_action: 2
    """)
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [(status, episodes, error)] = query(store, "SELECT status, episodes, error FROM runs")
    assert (status, episodes, error) == ("finished", 2, None)
    actions = [unpack(a) for (a,) in query(store, "SELECT action FROM steps ORDER BY id")]
    assert actions and set(actions) == {2}  # every None became params.noop_action
