"""End to end through the CLI: examples/pursuit_mappo.yml (MAPPO on PettingZoo's SISL
pursuit_v5, whose (7, 7, 3) observations the MLP takes flattened and whose ``state()`` its
critic sees, with ``critic: state``) runs, cut short, to one digest in threads and processes; a
map whose global state is larger than an info carries is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import REPO, query, run_mosaic

pytest.importorskip("scipy")  # pursuit_v5 imports it (the pursuit extra)
pytest.importorskip("pygame")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXAMPLE = REPO / "examples" / "pursuit_mappo.yml"
#: The example cut short: 3 training episodes of 20 steps, updates every 40 slot steps, one
#: greedy test episode.
SHORT = ("phases.0.episodes=3", "phases.1.episodes=1", "environments.0.params.max_cycles=20",
         "agents.0.params.rollout_steps=40", "agents.0.params.minibatch_size=20",
         "agents.0.params.epochs=2", "agents.0.params.hidden_sizes=[16]")
METRICS = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"}


def start(store: Path, *settings: str) -> tuple[int, str]:
    """The example, cut short and changed by ``settings``: the exit code and stderr."""
    sets = [arg for setting in (*SHORT, *settings) for arg in ("--set", setting)]
    result = run_mosaic("experiment-start", str(EXAMPLE), "--store", str(store), "--quiet",
                        *sets, timeout=240)
    return result.returncode, result.stderr


def test_the_pursuit_example_gives_one_digest_in_threads_and_processes(
        tmp_path: Path, process_tag: str) -> None:
    digests = {}
    for placement in ("thread", "process"):
        store = tmp_path / f"{placement}.sqlite"
        code, stderr = start(store, f"placement={placement}")
        assert code == 0, stderr
        runs = query(store, "SELECT uid, status, steps, digest FROM runs ORDER BY id")
        assert [(uid.rsplit("-", 1)[1], status) for uid, status, _, _ in runs] == [
            ("train", "finished"), ("test", "finished")], runs
        train_steps = runs[0][2]
        assert 0 < train_steps <= 3 * 20
        digests[placement] = [digest for _, _, _, digest in runs]
        # The 4 pursuers' slot steps make at least one rollout of 40 in the 3 episodes.
        names = {name for (name,) in query(store, "SELECT DISTINCT name FROM metrics")}
        assert names == METRICS, names
    assert digests["thread"] == digests["process"]


def test_a_global_state_larger_than_an_info_is_refused_with_the_reason(
        tmp_path: Path, process_tag: str) -> None:
    # A 20 x 20 map: state() has 20 * 20 * 3 = 1200 values.
    code, stderr = start(tmp_path / "refused.sqlite", "environments.0.params.x_size=20",
                         "environments.0.params.y_size=20")
    assert code != 0
    assert "its global state (state) has 1200 values, more than the 1024 an info carries; a " \
           "centralised critic cannot take it (leave out params.global_state and give the " \
           "agent critic: local)" in stderr, stderr
    assert "Traceback" not in stderr, stderr
