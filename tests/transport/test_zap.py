"""The ZAP handler on its own: answers by the rule it is given, refuses what is malformed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from mosaic.transport.zap import ZAP_ENDPOINT, ZapHandler

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def asked() -> Iterator[tuple[zmq.Socket[Any], list[tuple[str, bytes, list[bytes]]]]]:
    ctx: zmq.Context[zmq.Socket[Any]] = zmq.Context()
    seen: list[tuple[str, bytes, list[bytes]]] = []

    def decide(domain: str, mechanism: bytes, proof: list[bytes]) -> bool:
        seen.append((domain, mechanism, proof))
        return proof == [b"user", b"secret"]

    handler = ZapHandler(ctx, decide, name="zap-under-test")
    handler.start()
    ask = ctx.socket(zmq.REQ)
    ask.linger = 0
    ask.rcvtimeo = 5000
    ask.connect(ZAP_ENDPOINT)
    try:
        yield ask, seen
    finally:
        ask.close()
        handler.stop()
        assert not any(t.name == "zap-under-test" for t in threading.enumerate())
        ctx.term()


def request(mechanism: bytes, *proof: bytes) -> list[bytes]:
    return [b"1.0", b"id-7", b"run-domain", b"127.0.0.1", b"", mechanism, *proof]


def test_an_admitted_peer_gets_200_and_the_rule_sees_domain_mechanism_and_proof(asked) -> None:
    ask, seen = asked
    ask.send_multipart(request(b"PLAIN", b"user", b"secret"))
    assert ask.recv_multipart() == [b"1.0", b"id-7", b"200", b"OK", b"mosaic", b""]
    assert seen == [("run-domain", b"PLAIN", [b"user", b"secret"])]


def test_a_refused_peer_gets_400(asked) -> None:
    ask, _ = asked
    ask.send_multipart(request(b"PLAIN", b"user", b"guess"))
    assert ask.recv_multipart()[1:4] == [b"id-7", b"400", b"unknown credentials"]


@pytest.mark.parametrize("frames", [[b"1.0", b"id-7"], [b"2.0", *request(b"NULL")[1:]]],
                         ids=["short", "unknown version"])
def test_a_malformed_request_gets_400_without_asking_the_rule(asked, frames) -> None:
    ask, seen = asked
    ask.send_multipart(frames)
    assert ask.recv_multipart()[1:4] == [b"id-7", b"400", b"malformed ZAP request"]
    assert seen == []
    ask.send_multipart(request(b"PLAIN", b"user", b"secret"))  # and it still answers
    assert ask.recv_multipart()[2] == b"200"
