"""A handler may put its answer off (Later): the host answers once the component gives it,
the actor keeps serving meanwhile, and a direct call refuses to wait for one."""

from __future__ import annotations

import pytest

from mosaic.core.errors import RequestTimeout, TransportError
from mosaic.messages import PingRequest, PongResponse
from mosaic.runtime.component import Component, Later, handles
from mosaic.runtime.direct import DirectClient
from mosaic.runtime.placement import ThreadPlaced
from mosaic.runtime.watchdog import Watchdog
from mosaic.transport import RequestClient

pytestmark = pytest.mark.timeout(30)


class Pairs(Component):
    """Answers pings two by two: the first of a pair waits for the second."""

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self.waiting: int | None = None

    @handles(PingRequest)
    def _ping(self, request: PingRequest) -> Later | None:
        key = id(request)
        if self.waiting is None:
            self.waiting = key
            return Later(key)
        self.answer(self.waiting, PongResponse("first"))
        self.waiting = None
        self.answer(key, PongResponse("second"))
        return Later(key)


def test_answers_put_off_go_to_their_own_requesters() -> None:
    placed = ThreadPlaced(Pairs("pairs"), "test", "inproc://later-pairs")
    first = RequestClient(placed.endpoint, peer="pairs", sender="one")
    second = RequestClient(placed.endpoint, peer="pairs", sender="two")
    try:
        pending = first.send(PingRequest())
        with pytest.raises(RequestTimeout):
            first.receive(pending, 0.3, PongResponse)
        # The actor serves on while the first answer waits.
        asked = second.send(PingRequest())
        assert second.receive(asked, 5, PongResponse).uid == "second"
        assert first.receive(pending, 5, PongResponse).uid == "first"
    finally:
        first.close()
        second.close()
        placed.stop(5)


def test_a_direct_call_does_not_wait_for_an_answer_put_off() -> None:
    placed = ThreadPlaced(Pairs("pairs"), "test", "inproc://later-direct")
    watchdog = Watchdog("test", lambda error: None)
    client = DirectClient(placed, {PingRequest}, watchdog, peer="pairs", sender="me")
    try:
        with pytest.raises(TransportError, match="puts off its answer"):
            client.request(PingRequest(), PongResponse, 5)
    finally:
        client.close()
        watchdog.close()
        placed.stop(5)
