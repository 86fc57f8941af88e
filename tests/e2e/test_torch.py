"""End to end, the deep-learning path: the PyTorch PPO example runs in processes, a torch model of
the user's own (examples/torch_custom_agent.py) learns CartPole, and without torch the files are
refused at load, naming the extra."""

from __future__ import annotations

import shutil
import statistics

import pytest

from tests.e2e.cli import REPO, query, run_mosaic

pytest.importorskip("torch", reason="the torch extra: pip install -e '.[torch]'")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

METRICS = ["policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"]


def _shortened(tmp_path, name: str, *replacements: tuple[str, str]):
    text = (REPO / "examples" / name).read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_torch_ppo_example_trains_and_tests_in_processes(tmp_path, process_tag):
    path = _shortened(tmp_path, "cartpole_torch_ppo.yml", ("episodes: 300", "episodes: 40"),
                      ("episodes: 24", "episodes: 8"),
                      ("placement: thread", "placement: process"))
    store = tmp_path / "torch.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=200)
    assert result.returncode == 0, result.stderr
    (train, train_steps), (test, _) = query(store, "SELECT id, steps FROM runs ORDER BY id")
    names = [name for (name,) in query(store, "SELECT name FROM metrics WHERE run_id = ? "
                                       "ORDER BY id", train)]
    assert len(names) >= 6 * (train_steps // 256 - 1) > 0
    assert names == METRICS * (len(names) // 6)
    assert query(store, "SELECT COUNT(*) FROM episodes WHERE run_id = ?", test) == [(8,)]


def test_a_torch_model_of_ones_own_learns_cartpole(tmp_path, process_tag):
    path = _shortened(tmp_path, "torch_custom_agent.yml",
                      ("    episodes: 300", "    episodes: 60"))
    # Its module beside it, as in examples/; the command runs in the repository's root.
    shutil.copy(REPO / "examples" / "torch_custom_agent.py", tmp_path)
    store = tmp_path / "custom.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=200)
    assert result.returncode == 0, result.stderr
    returns = [r for (r,) in query(store, "SELECT total_return FROM episodes ORDER BY id")]
    assert len(returns) == 60
    first, last = statistics.mean(returns[:20]), statistics.mean(returns[-20:])
    # Measured (seed 0): 51 over the first 20 episodes, 175 over the last 20 (random: about 22).
    assert last >= 100 and last >= 2 * first, (first, last)
    assert (store.parent / "custom-checkpoints").is_dir()  # the brain state of the phase


@pytest.mark.parametrize("name", ["cartpole_torch_ppo.yml", "torch_custom_agent.yml"])
def test_without_torch_the_file_is_refused_naming_the_extra(tmp_path, name):
    blocked = tmp_path / "blocked" / "torch"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('torch is not installed here')\n")
    result = run_mosaic("experiment-check", f"examples/{name}",
                        PYTHONPATH=f"{blocked.parent}:{REPO}")
    assert result.returncode == 2, result.stderr
    assert "agents[0].brain" in result.stderr and "torch" in result.stderr
    assert "Traceback" not in result.stderr
    if name == "cartpole_torch_ppo.yml":
        assert "pip install 'mosaic[torch]'" in result.stderr
