"""The step core (mosaic.stepping.episodes) on its own: no sockets, no threads, no run.

The environment is a scripted list of answers and the muscles a callable that records what it
was asked, so each test reads the bookkeeping directly: rewards, rows, records and the digest.
"""

from __future__ import annotations

import copy as copying
import hashlib
from typing import Any

import numpy as np
import pytest

from mosaic.core.seeding import episode_seed, evaluation_episode_seed
from mosaic.messages import (
    AgentBatchResponse,
    AgentEvaluateRequest,
    AgentUpdateRequest,
    AgentUpdateResponse,
    BatchOutcome,
    EnvironmentPosition,
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    Request,
    Response,
    TerminationSpec,
    VectorResetRequest,
    VectorStepRequest,
    VectorStepResponse,
)
from mosaic.messages.codec import pack
from mosaic.stepping.copy_episodes import CopyEpisodes
from mosaic.stepping.episodes import Recording, Schedule
from mosaic.stepping.ledger import Ledger, chained
from mosaic.stepping.player_episodes import PlayerEpisodes
from mosaic.stepping.progress import Progress
from mosaic.stepping.termination import Termination

RUN_ID = 7
SEED = 1234


class Book:
    """The store's side of a ledger: what was handed over and recorded, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.ledger: Ledger | None = None

    def hand_over(self) -> None:
        assert self.ledger is not None
        self.events.append(("rows", list(self.ledger.rows)))
        self.ledger.rows = []

    def record_episode(self, *args: Any, **kwargs: Any) -> None:
        self.events.append(("episode", (args, kwargs)))

    @property
    def episodes(self) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [value for kind, value in self.events if kind == "episode"]


def ledger_and_book(chain: str = "", termination: TerminationSpec | None = None
                    ) -> tuple[Ledger, Book]:
    book = Book()
    ledger = Ledger(RUN_ID, Progress(), Termination.from_spec(termination), chain,
                    book.hand_over, book.record_episode)
    book.ledger = ledger
    return ledger, book


class Muscles:
    """Plays every acting slot's action 0 (or ``snapshot`` for the self-play record), and keeps
    every request."""

    def __init__(self, agent: str = "agent", snapshot: int | None = None) -> None:
        self.agent = agent
        self.snapshot = snapshot
        self.requests: list[AgentUpdateRequest | AgentEvaluateRequest] = []

    def __call__(self, request: AgentUpdateRequest | AgentEvaluateRequest
                 ) -> list[tuple[str, AgentUpdateResponse]]:
        self.requests.append(request)
        snapshot = self.snapshot if request.step == 0 else None
        return [(self.agent, AgentUpdateResponse({slot: 0 for slot in request.acting},
                                                 snapshot=snapshot))]


class Script:
    """An environment that answers with ``replies`` in order, and keeps every request."""

    def __init__(self, replies: list[Response]) -> None:
        self.replies = list(replies)
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Response:
        self.requests.append(copying.deepcopy(request))  # as sent: its arrays change later
        return self.replies.pop(0)


def game(p0_wins: bool = True) -> list[Response]:
    """A three-move game of two players taking turns: p0, p1, p0; the last move ends it."""
    final = {"p0": 1.0, "p1": -1.0} if p0_wins else {"p0": -1.0, "p1": 1.0}
    return [
        EnvironmentResetResponse({"p0": 0, "p1": 0}, ("p0",), {}),
        EnvironmentUpdateResponse({"p0": 1, "p1": 1}, {"p0": 0.0, "p1": 0.0}, False, False,
                                  ("p1",), {}),
        EnvironmentUpdateResponse({"p0": 2, "p1": 2}, {"p0": 0.0, "p1": 0.0}, False, False,
                                  ("p0",), {}),
        EnvironmentUpdateResponse({"p0": 3, "p1": 3}, final, True, False, (), {}),
    ]


def players(ledger: Ledger, muscles: Muscles, episodes: int = 1, *, index: int = 0,
            every: int = 0, evaluations: int = 0, max_steps: int | None = None
            ) -> PlayerEpisodes:
    return PlayerEpisodes(index, "board", {"p0": "agent", "p1": "agent"}, ledger,
                          Schedule(SEED, episodes, max_steps, every, evaluations),
                          Recording(steps=True, episodes=True), muscles)


def run(loop: PlayerEpisodes | CopyEpisodes, environment: Script) -> None:
    while not loop.finished:
        loop.advance(environment)


def test_a_turn_based_players_reward_goes_to_its_last_action() -> None:
    ledger, book = ledger_and_book()
    muscles = Muscles()
    loop = players(ledger, muscles)
    run(loop, Script(game(p0_wins=False)))

    # p0's first action is settled (reward 0) when p0 is about to act again; the loser's -1
    # comes with the winner's move and goes to p0's second action, p1's +1 to its only one.
    assert [r.rewards for r in muscles.requests] == [{}, {}, {"p0": 0.0},
                                                    {"p0": -1.0, "p1": 1.0}]
    rows = [r for kind, value in book.events if kind == "rows" for r in value]
    assert [(r[3], r[5], r[7], r[8], r[9]) for r in rows] == [
        (0, "p0", 0, 0.0, False),  # step, slot, action, reward, terminated
        (1, "p1", 0, 1.0, True),  # at the end, in the order the actions were taken
        (2, "p0", 0, -1.0, True),
    ]
    # The observation kept with an action is the one it was chosen on.
    assert [r[6] for r in rows] == [0, 1, 2]
    ((args, _kwargs),) = book.episodes
    assert args[:9] == (RUN_ID, "board", 0, 3, 0.0, {"p0": -1.0, "p1": 1.0}, True, False,
                        episode_seed(SEED, 0, 0))
    assert ledger.progress.steps == 3
    assert ledger.progress.episodes == 1
    assert ledger.progress.agent_return_sums == {"agent": 0.0}


def test_settle_then_ask_is_accept_with_the_muscles_asked_only_when_told() -> None:
    whole_ledger, whole_book = ledger_and_book()
    run(players(whole_ledger, Muscles()), Script(game()))

    ledger, book = ledger_and_book()
    muscles = Muscles()
    loop = players(ledger, muscles)
    environment = Script(game())
    with pytest.raises(RuntimeError, match="nothing to ask"):
        loop.ask()
    while not loop.finished:
        loop.settle(environment(loop.request()))
        asked = len(muscles.requests)
        assert loop.ending == (asked == 3)  # the game's third step ends it
        loop.ask()  # only now: a driver that waits for a person's move asks here
        assert len(muscles.requests) == asked + 1
    assert not loop.ending
    assert ledger.digest.hexdigest() == whole_ledger.digest.hexdigest()
    assert ledger.chain == whole_ledger.chain != ""
    assert book.events == whole_book.events
    assert [r.rewards for r in muscles.requests] == [{}, {}, {"p0": 0.0},
                                                    {"p0": 1.0, "p1": -1.0}]


def test_an_episode_end_links_the_digest_chain_after_handing_over_its_steps() -> None:
    start = hashlib.blake2b(b"a saved run", digest_size=16).hexdigest()
    ledger, book = ledger_and_book(chain=start)
    loop = players(ledger, Muscles())
    run(loop, Script(game()))

    expected = hashlib.blake2b(digest_size=16)
    expected.update(bytes.fromhex(start))
    for slot, observation, reward, terminated in (("p0", 0, 0.0, False), ("p1", 1, -1.0, True),
                                                  ("p0", 2, 1.0, True)):
        expected.update(pack(("board", slot, observation, 0, reward, terminated, False)))
    link = expected.digest().hex()
    assert ledger.chain == link
    assert book.episodes[0][1]["chain"] == link
    # The steps reach the store before the record of their episode.
    assert [kind for kind, _ in book.events] == ["rows", "episode"]
    # The next episode's digest starts from the new link, and the position says so.
    assert ledger.digest.hexdigest() == chained(link).hexdigest()
    ledger.report_position()
    assert ledger.progress.chain == link
    assert ledger.progress.positions == {"board": (1, 0, 0)}


def test_a_step_of_many_slots_settles_each_in_the_order_they_act() -> None:
    """A simultaneous game of three slots of one muscle: every step settles each slot's action
    (in the order the environment lists them acting), the digest takes them in that order,
    one row each, and each slot's reward goes back to it alone."""
    slots = ("p0", "p1", "p2")
    ledger, book = ledger_and_book()
    muscles = Muscles()
    loop = PlayerEpisodes(0, "crowd", dict.fromkeys(slots, "agent"), ledger,
                          Schedule(SEED, 1, None, 0, 0), Recording(steps=True, episodes=True),
                          muscles)

    def seen(step: int) -> dict[str, np.ndarray]:
        return {slot: np.full(2, 10 * step + index, dtype=np.float32)
                for index, slot in enumerate(slots)}

    later = ("p2", "p0", "p1")
    run(loop, Script([
        EnvironmentResetResponse(seen(0), slots, {}),
        EnvironmentUpdateResponse(seen(1), {"p0": 1.0, "p1": 2.0, "p2": 3.0}, False, False,
                                  later, {}),
        EnvironmentUpdateResponse(seen(2), {"p0": 4.0, "p1": 5.0, "p2": 6.0}, False, True,
                                  (), {}),
    ]))

    assert [r.rewards for r in muscles.requests] == [
        {}, {"p2": 3.0, "p0": 1.0, "p1": 2.0}, {"p2": 6.0, "p0": 4.0, "p1": 5.0}]
    settled = [(0, slot) for slot in later] + [(1, slot) for slot in later]
    rewards = {(0, "p0"): 1.0, (0, "p1"): 2.0, (0, "p2"): 3.0,
               (1, "p0"): 4.0, (1, "p1"): 5.0, (1, "p2"): 6.0}
    rows = [r for kind, value in book.events if kind == "rows" for r in value]
    assert [(r[3], r[5], r[8], r[10]) for r in rows] == [
        (step, slot, rewards[step, slot], step == 1) for step, slot in settled]
    expected = chained("")
    for (step, slot), row in zip(settled, rows, strict=True):
        observation = seen(step)[slot]
        assert np.array_equal(row[6], observation)  # the one the action was chosen on
        expected.update(pack(("crowd", slot, observation, 0, rewards[step, slot], False,
                              step == 1)))
    assert ledger.chain == expected.digest().hex()
    ((args, _kwargs),) = book.episodes
    assert args[5] == {"p0": 5.0, "p1": 7.0, "p2": 9.0}


def test_equal_trajectories_give_equal_digests_and_others_differ() -> None:
    digests = []
    for _ in range(2):
        ledger, _book = ledger_and_book()
        run(players(ledger, Muscles(), episodes=2), Script(game() + game(p0_wins=False)))
        digests.append(ledger.digest.hexdigest())
    assert digests[0] == digests[1]
    ledger, _book = ledger_and_book()
    run(players(ledger, Muscles(), episodes=2), Script(game() + game()))
    assert ledger.digest.hexdigest() != digests[0]


def test_max_steps_truncates_and_settles_every_outstanding_action() -> None:
    ledger, book = ledger_and_book()
    muscles = Muscles()
    run(players(ledger, muscles, max_steps=2), Script(game()[:3]))
    assert muscles.requests[-1].truncated and not muscles.requests[-1].terminated
    assert muscles.requests[-1].rewards == {"p0": 0.0, "p1": 0.0}
    assert book.episodes[0][0][3] == 2


def test_an_evaluation_round_asks_the_greedy_instances_and_counts_for_nothing() -> None:
    ledger, book = ledger_and_book()
    muscles = Muscles()
    loop = players(ledger, muscles, episodes=1, every=1, evaluations=1)
    environment = Script(game() + game())
    loop.advance(environment)
    for _ in range(3):
        loop.advance(environment)
    assert not loop.finished and loop.evaluating == 1
    digest, steps = ledger.digest.hexdigest(), ledger.progress.steps
    run(loop, environment)

    reset = environment.requests[4]
    assert isinstance(reset, EnvironmentResetRequest)
    assert reset.seed == evaluation_episode_seed(SEED, 0, 0, 0)
    assert all(isinstance(r, AgentEvaluateRequest) for r in muscles.requests[4:])
    assert ledger.digest.hexdigest() == digest
    assert ledger.progress.steps == steps
    assert ledger.progress.episodes == 1
    ((args, kwargs),) = book.episodes[1:]
    assert kwargs["evaluation"] is True and args[2] == 0  # the first evaluation episode
    assert loop.position == (1, 1, 1)


def test_a_self_play_snapshot_goes_with_its_episode_record() -> None:
    ledger, book = ledger_and_book()
    run(players(ledger, Muscles(agent="mirror", snapshot=3)), Script(game()))
    assert book.episodes[0][1]["snapshots"] == {"mirror": 3}


def test_a_resumed_loop_numbers_its_episodes_on_and_runs_its_own_count() -> None:
    ledger, book = ledger_and_book()
    loop = players(ledger, Muscles(), episodes=1)
    loop.resume(EnvironmentPosition(episode=5))
    environment = Script(game())
    run(loop, environment)
    # The environment is told the episode's number too (a recorded video is named by it).
    assert environment.requests[0] == EnvironmentResetRequest(episode_seed(SEED, 0, 5), 5)
    assert book.episodes[0][0][2] == 5
    assert loop.position == (6, 0, 0)


def test_a_termination_condition_finishes_every_loop_of_the_run() -> None:
    ledger, _book = ledger_and_book(termination=TerminationSpec(reward_threshold=0.0, window=1))
    first = players(ledger, Muscles(), episodes=5)
    second = players(ledger, Muscles(), episodes=5, index=1)
    run(first, Script(game()))
    assert first.finished and second.finished


# -- copies -------------------------------------------------------------------------------
def outcome(rewards: list[float], terminated: list[bool], starts: list[bool],
            observations: list[float], acted: list[bool] | None = None) -> VectorStepResponse:
    count = len(rewards)
    return VectorStepResponse(BatchOutcome(
        np.array(observations), np.array(rewards, dtype=np.float64), np.array(terminated),
        np.zeros(count, dtype=bool), np.array(acted if acted is not None else [True] * count),
        np.array(starts), {}, None))


class BatchMuscle:
    def __init__(self) -> None:
        self.outcomes: list[BatchOutcome] = []

    def __call__(self, request: Any) -> tuple[str, AgentBatchResponse]:
        self.outcomes.append(request.outcome)
        return "agent", AgentBatchResponse(np.zeros(len(request.outcome.rewards), dtype=np.int64))


def copies(ledger: Ledger, muscle: BatchMuscle, episodes: int, reseeds: bool = True
           ) -> CopyEpisodes:
    return CopyEpisodes(2, "cartpole", {"agent_0": "agent"}, ledger, Schedule(SEED, episodes),
                        Recording(steps=True, episodes=True), muscle, "agent_0", 2, reseeds)


def test_copies_reset_themselves_when_their_episode_ends() -> None:
    ledger, book = ledger_and_book()
    muscle = BatchMuscle()
    loop = copies(ledger, muscle, episodes=10)
    environment = Script([
        outcome([0.0, 0.0], [False, False], [True, True], [0.0, 10.0]),
        outcome([1.0, 1.0], [False, True], [False, True], [1.0, 20.0]),
        outcome([1.0, 1.0], [False, False], [False, False], [2.0, 21.0]),
    ])
    loop.advance(environment)
    first = [episode_seed(SEED, 2, 0, copy) for copy in range(2)]
    assert isinstance(environment.requests[0], VectorResetRequest)
    assert environment.requests[0].seeds.tolist() == first
    assert loop.seeds.tolist() == first
    assert loop.next_seeds.tolist() == [episode_seed(SEED, 2, 1, copy) for copy in range(2)]

    loop.advance(environment)  # copy 1 ends its episode and begins the next
    assert isinstance(environment.requests[1], VectorStepRequest)
    assert loop.episode.tolist() == [0, 1]
    assert loop.step.tolist() == [1, 0]
    assert loop.returns.tolist() == [1.0, 0.0]
    assert loop.seeds.tolist() == [first[0], episode_seed(SEED, 2, 1, 1)]
    assert loop.next_seeds.tolist() == [episode_seed(SEED, 2, 1, 0), episode_seed(SEED, 2, 2, 1)]
    ((args, kwargs),) = book.episodes
    assert args == (RUN_ID, "cartpole", 0, 1, 1.0, {"agent_0": 1.0}, True, False, first[1], 1)
    assert kwargs["chain"] == ledger.chain
    assert ledger.progress.steps == 2 and ledger.progress.episodes == 1

    loop.advance(environment)
    assert loop.step.tolist() == [2, 1]
    rows = [r for kind, value in book.events if kind == "rows" for r in value] + ledger.rows
    # (episode, step, copy, observation) of each copy's steps, the ended episode's first.
    assert [(r[2], r[3], r[11], r[6]) for r in rows] == [
        (0, 0, 0, 0.0), (0, 0, 1, 10.0), (0, 1, 0, 1.0), (1, 0, 1, 20.0)]
    assert len(muscle.outcomes) == 3


def test_copies_count_no_episode_past_the_environments_total() -> None:
    ledger, book = ledger_and_book()
    loop = copies(ledger, BatchMuscle(), episodes=1, reseeds=False)
    run(loop, Script([
        outcome([0.0, 0.0], [False, False], [True, True], [0.0, 0.0]),
        outcome([1.0, 1.0], [True, True], [True, True], [0.0, 0.0]),
    ]))
    assert loop.episodes_done == 1 and ledger.progress.episodes == 1
    ((args, _kwargs),) = book.episodes
    assert args[8] is None  # a vector that seeds its copies itself: no seed per episode
    assert loop.copy_episodes == (1, 1)  # see tests/orchestration/test_copy_resume.py


@pytest.mark.parametrize("acted", [[True, False], [False, True]])
def test_a_copy_that_did_not_act_takes_no_step(acted: list[bool]) -> None:
    ledger, _book = ledger_and_book()
    loop = copies(ledger, BatchMuscle(), episodes=5)
    environment = Script([
        outcome([0.0, 0.0], [False, False], [True, True], [0.0, 0.0]),
        outcome([1.0, 1.0], [False, False], [False, False], [0.0, 0.0], acted),
    ])
    loop.advance(environment)
    loop.advance(environment)
    assert loop.step.tolist() == [int(a) for a in acted]
    assert ledger.progress.steps == 1
    assert [r[11] for r in ledger.rows] == [acted.index(True)]


def test_the_loops_own_requests_hold_what_their_validating_constructors_would() -> None:
    """The loop builds its step requests without validating them again (trusted_constructor):
    each must be what the class itself builds from the same fields, of every kind of step
    (a reset, a turn, a truncation by max_steps, an evaluation round)."""
    ledger, _ = ledger_and_book()
    muscles = Muscles()
    environment = Script(game()[:3] * 4)  # cut after two moves by max_steps
    loop = players(ledger, muscles, episodes=2, every=1, evaluations=1, max_steps=2)
    run(loop, environment)
    built = [*muscles.requests, *environment.requests]
    assert {type(request) for request in built} == {
        AgentUpdateRequest, AgentEvaluateRequest, EnvironmentResetRequest,
        EnvironmentUpdateRequest}
    for request in built:
        fields = [getattr(request, name) for name in type(request).__dataclass_fields__]
        assert type(request)(*fields) == request  # validates, and normalises nothing
