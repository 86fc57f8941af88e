"""End to end on a real PostgreSQL server: ``--store postgresql://...`` and ``store.url`` record
the same run as SQLite does, every command reads it back, and no output shows the password.

The server is the tests' own (:mod:`tests.e2e.postgres_server`), started once for the module on
127.0.0.1; each test gets a database of its own. A server that cannot be started fails the
tests with the reason.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import postgres_server
from tests.e2e.cli import REPO, cartpole, query, run_mosaic, selfplay, write_experiment
from tests.e2e.postgres_server import PASSWORD, Server
from tests.e2e.test_evaluate_store import write_evaluation

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

EPISODES = ("SELECT environment, episode, steps, total_return, terminated, truncated, seed, copy "
            "FROM episodes ORDER BY episode")
STEPS = ("SELECT episode, step, agent, slot, observation, action, reward, terminated, truncated "
         "FROM steps ORDER BY episode, step")


def assert_clean(result: subprocess.CompletedProcess[str]) -> None:
    """No traceback, and the password nowhere in what the command printed."""
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert PASSWORD not in output, output


def test_a_run_into_postgresql_is_the_run_into_sqlite(
    tmp_path: Path, server: Server, database: str, process_tag: str
) -> None:
    path = write_experiment(tmp_path, cartpole(uid="pg", episodes=4, seed=11))
    url = server.url(database)
    into_pg = run_mosaic("experiment-start", str(path), "--store", url)
    assert into_pg.returncode == 0, into_pg.stderr
    assert_clean(into_pg)
    masked = url.replace(PASSWORD, "***")
    assert f"Results: {masked}" in into_pg.stdout

    sqlite = tmp_path / "results.sqlite"
    into_sqlite = run_mosaic("experiment-start", str(path), "--store", str(sqlite))
    assert into_sqlite.returncode == 0, into_sqlite.stderr

    runs = "SELECT status, seed, episodes, steps, digest FROM runs"
    [pg_run] = server.query(database, runs)
    [sqlite_run] = query(sqlite, runs)
    assert pg_run == sqlite_run
    assert pg_run[0] == "finished" and pg_run[4]
    assert server.query(database, EPISODES) == query(sqlite, EPISODES)
    pg_steps = server.query(database, STEPS)
    assert len(pg_steps) == pg_run[3]
    assert [(*row[:4], bytes(row[4]), bytes(row[5]), *row[6:]) for row in pg_steps] == \
        query(sqlite, STEPS)
    # What the store records of the run's configuration names the store masked.
    [(config,)] = server.query(database, "SELECT config FROM experiments")
    assert PASSWORD not in str(config) and masked in str(config)


def test_runs_list_and_show_read_postgresql(
    tmp_path: Path, server: Server, database: str, process_tag: str
) -> None:
    path = write_experiment(tmp_path, cartpole(uid="listed", episodes=2))
    url = server.url(database, driver="postgresql+psycopg")
    started = run_mosaic("experiment-start", str(path), "--store", url, "--quiet")
    assert started.returncode == 0, started.stderr
    [(uid, digest)] = server.query(database, "SELECT uid, digest FROM runs")

    listing = run_mosaic("runs", "list", "--store", url)
    assert listing.returncode == 0, listing.stderr
    assert_clean(listing)
    [line] = [line for line in listing.stdout.splitlines() if line.startswith(uid)]
    assert " listed " in line and " finished " in line

    shown = run_mosaic("runs", "show", uid[:-2], "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert_clean(shown)
    assert uid in shown.stdout and digest[:16] in shown.stdout
    for state in ("setting_up", "running", "stopping", "finished"):
        assert f" {state}" in shown.stdout

    # --experiment finds the store through the file, a URL as well as a path.
    text = cartpole(uid="listed") + f"    store:\n      url: {url}\n"
    with_url = write_experiment(tmp_path, text, name="with_url.yml")
    found = run_mosaic("runs", "list", "--experiment", str(with_url))
    assert found.returncode == 0, found.stderr
    assert uid in found.stdout

    # Export and plot read it too, by its URL or through the file.
    exported = run_mosaic("runs", "export", uid, "--store", url)
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 3  # the header and the two episodes
    plotted = run_mosaic("runs", "plot", "--experiment", str(with_url), "--out",
                         str(tmp_path / "curve.png"))
    assert plotted.returncode == 0, plotted.stderr
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_each_agents_mean_reads_the_same_from_postgresql_as_from_sqlite(
    tmp_path: Path, server: Server, database: str, process_tag: str
) -> None:
    # The means per agent are summed in the database, from its JSON: PostgreSQL's own way.
    path = write_experiment(tmp_path, selfplay(episodes=12))
    sqlite = tmp_path / "selfplay.sqlite"
    listed = []
    for store in (server.url(database), str(sqlite)):
        done = run_mosaic("experiment-start", str(path), "--store", store, "--quiet")
        assert done.returncode == 0, done.stderr
        listing = run_mosaic("runs", "list", "--store", store)
        assert listing.returncode == 0, listing.stderr
        [line] = [line for line in listing.stdout.splitlines() if line.startswith("selfplay-")]
        listed.append(line.split("finished", 1)[1].split(None, 4)[4])
    assert listed[0] == listed[1] and "learner " in listed[0] and ", past " in listed[0]


def test_the_file_store_url_is_where_the_run_goes(
    tmp_path: Path, server: Server, database: str, process_tag: str
) -> None:
    url = server.url(database)
    path = write_experiment(tmp_path, cartpole(uid="filed", episodes=2)
                            + f"    store:\n      url: {url}\n      record_steps: episodes\n")
    checked = run_mosaic("experiment-check", str(path))
    assert checked.returncode == 0, checked.stderr
    assert_clean(checked)
    assert f"results go to {url.replace(PASSWORD, '***')}" in checked.stdout

    started = run_mosaic("experiment-start", str(path))
    assert started.returncode == 0, started.stderr
    assert_clean(started)
    assert server.query(database, "SELECT status, episodes FROM runs") == [("finished", 2)]
    assert server.query(database, "SELECT COUNT(*) FROM steps") == [(0,)]  # record_steps
    assert not (tmp_path / "experiment.sqlite").exists()


def test_evaluate_records_into_postgresql(
    tmp_path: Path, server: Server, database: str, process_tag: str
) -> None:
    url = server.url(database)
    result = run_mosaic("evaluate", str(write_evaluation(tmp_path)), "--store", url)
    assert result.returncode == 0, result.stderr
    assert_clean(result)
    assert f"Results: {url.replace(PASSWORD, '***')}" in result.stdout
    assert server.query(database, "SELECT status, episodes FROM runs ORDER BY id") == [
        ("finished", 3), ("finished", 3)]


@pytest.mark.parametrize("problem", ["wrong password", "no server"])
def test_a_store_that_cannot_be_reached_is_exit_2_without_the_password(
    tmp_path: Path, server: Server, database: str, problem: str, process_tag: str
) -> None:
    if problem == "wrong password":
        url = server.url(database, password="wrong-Zq81-secret")
        expected = "password authentication failed"
    else:
        url = server.url(database, password="wrong-Zq81-secret",
                         port=postgres_server.free_port())
        expected = "Connection refused"
    path = write_experiment(tmp_path, cartpole(uid="refused", episodes=2))
    for command in (["experiment-start", str(path), "--store", url],
                    ["runs", "list", "--store", url],
                    ["evaluate", str(write_evaluation(tmp_path)), "--store", url]):
        result = run_mosaic(*command, timeout=90)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "wrong-Zq81-secret" not in result.stdout + result.stderr
        assert_clean(result)
        [error] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert url.replace("wrong-Zq81-secret", "***").split("://")[1] in error
        assert expected in error, error
    assert not (tmp_path / "t.jsonl").exists()  # the evaluation started nothing
    assert server.query(database, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'"
                        ) == [(0,)]


def test_without_the_driver_a_postgresql_url_names_the_extra(
    tmp_path: Path, server: Server, database: str
) -> None:
    """As if psycopg were not installed: its import is blocked before mosaic starts."""
    path = write_experiment(tmp_path, cartpole(uid="nodriver", episodes=2))
    url = server.url(database)
    blocked = ("import sys; sys.modules['psycopg'] = None; from mosaic.cli import main; "
               "main(sys.argv[1:])")
    for command in (["experiment-start", str(path), "--store", url],
                    ["experiment-check", str(path)],
                    ["runs", "list", "--store", url],
                    ["evaluate", str(write_evaluation(tmp_path)), "--store", url]):
        if command[0] == "experiment-check":
            path.write_text(path.read_text() + f"store:\n  url: {url}\n")
        result = subprocess.run([sys.executable, "-c", blocked, *command], cwd=REPO,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, (command, result.stderr)
        assert_clean(result)
        [line] = result.stderr.splitlines()
        assert line.startswith("error: ") and "PostgreSQL driver psycopg is not installed" in line
        assert line.endswith("pip install 'mosaic[postgres]'")
    assert server.query(database, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'"
                        ) == [(0,)]
