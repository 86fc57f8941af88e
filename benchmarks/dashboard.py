"""How fast the dashboard's pages load from a large store, against the terminal's own readers.

Run: ``python benchmarks/dashboard.py [--runs 1000] [--episodes 100000] [--repeat 5]
[--no-browser]``

A SQLite store is written with the real :class:`StoreWriter`: ``--runs`` finished runs of 20
episodes each (in experiments of 50 runs, with sweep parameters and digests), and one run of
``--episodes`` episodes with a metric reported every 10 of them. The dashboard is served on
loopback and timed, median of ``--repeat``:

- ``runs page``: the HTML of ``/`` with every run;
- ``big run page``: the HTML of ``/runs/<id>``, which carries its learning curve downsampled
  on the server;
- with Chromium (``/usr/bin/chromium``), the same two pages in the headless browser, from
  navigation to the table shown / the curve drawn.

Baselines in the same run, on the same store: ``mosaic runs list`` 's reading and formatting
(``Store.list_runs`` + ``format_runs_table``) for the runs page, and ``mosaic runs plot`` 's
reading of the curve (:func:`mosaic.results.load_curves`, through pandas) for the big run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mosaic.dashboard import BackgroundServer, Dashboard
from mosaic.store import StoreWriter, format_runs_table, open_store


def build(path: Path, runs: int, episodes: int) -> int:
    """Write the store; returns the id of the big run."""
    rng = np.random.default_rng(0)
    writer = StoreWriter(path, batch_rows=5000)
    writer.start()
    try:
        experiment = None
        for index in range(runs):
            if index % 50 == 0:
                experiment = writer.experiment_started(f"sweep-{index // 50}", None,
                                                       {"environments": []})
            assert experiment is not None
            run = writer.run_started(experiment, f"sweep-{index // 50}-r{index}", index % 50,
                                     index, params={"agents.lr": 10.0 ** -(index % 5)})
            writer.record_transition(run, None, "running", None)
            for episode in range(20):
                writer.record_episode(run, "env", episode, 50, float(rng.normal(20, 5)), {},
                                      True, False, episode)
            writer.record_transition(run, "running", "finished", None)
            writer.run_finished(run, "finished", None, 20, 1000, digest=f"{index:032x}")
        big_experiment = writer.experiment_started("long-run", None, {"environments": []})
        big = writer.run_started(big_experiment, "long-run-r0", 0, 1)
        returns = np.cumsum(rng.normal(0.01, 1.0, episodes))
        for episode in range(episodes):
            writer.record_episode(big, "env", episode, 100, float(returns[episode]), {}, True,
                                  False, episode)
        writer.record_metrics([(big, "agent", "brain", "loss", float(1.0 / (1 + e)), e, e * 100,
                                time.time()) for e in range(0, episodes, 10)])
        writer.run_finished(big, "finished", None, episodes, episodes * 100, digest="f" * 32)
    finally:
        writer.close(timeout=600)  # a loaded machine commits slowly
    return big


def timed(action: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Seconds of the first call (cold: the dashboard has cached nothing yet) and the median
    of ``repeat`` more."""
    times = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times[0], statistics.median(times[1:])


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        body: bytes = response.read()
        return body


def browser_times(url: str, big: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Seconds from navigation to the runs table shown / the big run's curve drawn."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.dashboard.browser import chromium

    profile = Path(tempfile.mkdtemp(prefix="mosaic-bench-chromium-"))
    driver = chromium(profile)
    try:
        driver.get(url + "/manual")  # the browser's own start-up is not the dashboard's
        def runs_page() -> None:
            driver.get(url + "/")  # returns after the load event: the table is in the HTML
            driver.execute_script("return document.querySelectorAll('.row[data-run]').length")

        def run_page() -> None:
            driver.get(f"{url}/runs/{big}")
            while driver.execute_script(
                    "return document.getElementById('chart').dataset.drawn") != "1":
                time.sleep(0.005)

        return {"runs page (browser)": timed(runs_page, repeat),
                "big run page (browser)": timed(run_page, repeat)}
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    from mosaic.results import load_curves

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.sqlite"
        started = time.perf_counter()
        big = build(path, args.runs, args.episodes)
        print(f"store: {args.runs} runs of 20 episodes + 1 run of {args.episodes:,} episodes, "
              f"written in {time.perf_counter() - started:.1f} s")
        store = open_store(path)
        baseline_list = timed(lambda: format_runs_table(store.list_runs()), args.repeat)[1]
        baseline_curve = timed(lambda: load_curves(store, [big]), args.repeat)[1]
        pages: dict[str, tuple[float, float]] = {}
        with BackgroundServer(Dashboard(store)) as server:  # a fresh server: nothing cached
            url = server.url
            pages["runs page (HTTP)"] = timed(lambda: fetch(url + "/"), args.repeat)
            pages["big run page (HTTP)"] = timed(lambda: fetch(f"{url}/runs/{big}"), args.repeat)
        if not args.no_browser:
            with BackgroundServer(Dashboard(open_store(path))) as server:
                pages.update(browser_times(server.url, big, args.repeat))
        print(f"{'':26}{'first':>9}{'median':>9}{'baseline':>10}{'ratio':>7}")
        for name, (first, median) in pages.items():
            runs_page = name.startswith("runs")
            base = baseline_list if runs_page else baseline_curve
            what = "runs list + table" if runs_page else "results.load_curves"
            verdict = "ok" if max(first, median) < 1.0 else "OVER 1 s"
            print(f"{name:26}{first * 1000:>6.0f} ms{median * 1000:>6.0f} ms{base * 1000:>7.0f} ms"
                  f"{median / base:>7.2f}  vs {what}; {verdict}")
        print(f"load average: {', '.join(f'{v:.1f}' for v in os.getloadavg())} "
              f"on {os.cpu_count()} cores")

if __name__ == "__main__":
    main()
