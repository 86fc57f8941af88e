"""The rollout worker without a run around it: its handlers called directly, as its host calls
them, with a real environment and muscle. What it keeps for the controller is bounded."""

from __future__ import annotations

from mosaic.messages.codec import pack
from mosaic.orchestration.rollout_worker import MAX_UNCOLLECTED_BYTES
from tests.orchestration.hosted_worker import collect, hosted_worker


def test_large_observations_pause_the_worker_until_they_are_collected() -> None:
    with hosted_worker("tests.fixtures.envs:LargeObservations",
                       {"size": 1 << 20, "length": 50}, copies=2, episodes=1000,
                       steps=True) as worker:
        chunks = 0
        while worker.has_work():
            worker.do_work()
            chunks += 1
            assert chunks < 1000
        # Paused at the bound (one chunk of work past it at most), well within a frame.
        answer = collect(worker)
        size = len(pack(answer.records))
        assert MAX_UNCOLLECTED_BYTES <= size < 4 * MAX_UNCOLLECTED_BYTES
        assert worker.has_work()  # collected: it steps on


def test_a_worker_reports_its_episodes_once_and_its_digest_when_done() -> None:
    with hosted_worker("gymnasium:CartPole-v1", {}, copies=3, episodes=12,
                       steps=False) as worker:
        returns, steps, episodes = [], 0, []
        answer = collect(worker)
        while not answer.finished:
            worker.do_work()
            answer = collect(worker)
            returns.extend(answer.returns)
            steps += answer.steps
            episodes += [args for kind, args in answer.records if kind == "episode"]
        assert len(answer.digest) == 32 and not worker.has_work()
        # Each episode once, with its copy; the episodes past the 12th of the last step too.
        assert len(returns) == len(episodes) >= 12 and steps > 0
        assert {args[9] for args in episodes} == {0, 1, 2}
        assert [args[4] for args in episodes] == returns
