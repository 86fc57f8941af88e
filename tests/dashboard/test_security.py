"""Who may reach the dashboard: loopback by default, the token on every request and live
channel beyond it, and no path from a request to the file system."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from mosaic.dashboard.security import MAX_BODY_BYTES, check_bind, is_loopback
from tests.dashboard.conftest import REPO, served

TOKEN = "s3cret-token-of-the-test"


def _get(url: str, path: str, headers: dict[str, str] | None = None,
         method: str = "GET", body: str | None = None) -> tuple[int, str, dict[str, str]]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        # A live channel never ends: read its first bytes only.
        data = response.readline() if "event-stream" in (response.getheader("content-type")
                                                        or "") else response.read()
        return response.status, data.decode(), dict(response.getheaders())
    finally:
        connection.close()


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("192.168.1.4", False), ("example.org", False),
    ("::", False),
])
def test_loopback_is_told_from_the_rest(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_binding_beyond_loopback_needs_a_long_token() -> None:
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(ValueError, match="--token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(ValueError, match="16 characters"):
        check_bind("0.0.0.0", "short")


def test_the_command_refuses_a_public_bind_without_a_token(cartpole_store: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mosaic", "dashboard", "--store",
                           str(cartpole_store), "--host", "0.0.0.0"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--token" in done.stderr and "Traceback" not in done.stderr


def test_the_command_names_a_missing_store(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mosaic", "dashboard", "--store",
                           str(tmp_path / "none.sqlite")], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "none.sqlite" in done.stderr and "Traceback" not in done.stderr


def test_every_request_and_the_live_channel_need_the_token(cartpole_store: Path) -> None:
    with served(cartpole_store, token=TOKEN) as server:
        for path in ("/", "/runs/1", "/api/events", "/api/curves?runs=1", "/static/chart.js"):
            status, _, _ = _get(server.url, path)
            assert status == 401, path
            status, _, _ = _get(server.url, path, {"Authorization": "Bearer wrong-token-xxxxxx"})
            assert status == 401, path
        status, _, headers = _get(server.url, f"/?token={TOKEN}")
        assert status == 200
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"]
        for path in ("/runs/1", "/api/curves?runs=1"):
            assert _get(server.url, path, {"Cookie": cookie})[0] == 200
            assert _get(server.url, path, {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        status, body, _ = _get(server.url, "/api/events", {"Cookie": cookie})
        assert status == 200 and body.startswith("retry:")


def test_without_a_token_only_loopback_host_names_are_served(cartpole_store: Path) -> None:
    with served(cartpole_store) as server:
        assert _get(server.url, "/")[0] == 200
        status, body, _ = _get(server.url, "/", {"Host": "attacker.example:8765"})
        assert status == 403 and "not loopback" in body


def test_commands_must_be_json_from_the_same_origin(tmp_path: Path) -> None:
    evaluation = REPO / "examples" / "manual_frozenlake.yml"
    with served(None, (evaluation,)) as server:
        status, body, _ = _get(server.url, "/api/manual/0/close", method="POST",
                               body="x=1", headers={"Content-Type":
                                                    "application/x-www-form-urlencoded"})
        assert status == 403 and "application/json" in body
        status, body, _ = _get(server.url, "/api/manual/0/close", method="POST", body="{}",
                               headers={"Content-Type": "application/json",
                                        "Origin": "http://attacker.example"})
        assert status == 403 and "origin" in body
        status, body, _ = _get(server.url, "/api/manual/5", {})
        assert status == 400 and "no manual-mode file 5" in body


def test_requests_name_runs_by_number_only(cartpole_store: Path) -> None:
    with served(cartpole_store) as server:
        assert _get(server.url, "/runs/..%2F..%2Fetc%2Fpasswd")[0] == 404
        status, body, _ = _get(server.url, "/api/curves?runs=/etc/passwd")
        assert status == 400 and "run ids" in body
        assert _get(server.url, "/static/../../store/reader.py")[0] == 404
        status, body, _ = _get(server.url, "/runs/99")
        assert status == 404 and "no run with id 99" in body


MANUAL = REPO / "examples" / "manual_frozenlake.yml"


def _post(url: str, path: str, headers: dict[str, str], parts: Iterable[bytes]) -> tuple[int, str]:
    """POST ``parts`` as they come (the server may answer, and close, before all are sent);
    return the answer's status and body. Fails on a server that waits for more (10 s)."""
    host, port = url.removeprefix("http://").split(":")
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"{host}:{port}",
                                                "Content-Type": "application/json",
                                                **headers}.items())
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode())
        with contextlib.suppress(OSError):
            for part in parts:
                sock.sendall(part)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, response.read().decode()


def test_a_body_over_1_mb_is_refused_with_413_without_reading_it() -> None:
    assert MAX_BODY_BYTES == 1024 * 1024
    kib = b" " * 1024
    with served(None, (MANUAL,)) as server:
        # Says 100 MB, sends 64 KiB of it: the answer comes at once.
        status, body = _post(server.url, "/api/manual/0/close",
                             {"Content-Length": str(100_000_000)}, [kib * 64])
        assert status == 413 and "over 1048576 bytes" in body
        # Chunked, without a length: refused once the chunks pass 1 MiB (no last chunk is sent:
        # a server that read on would wait for it).
        chunk = f"{len(kib) * 64:x}\r\n".encode() + kib * 64 + b"\r\n"
        status, body = _post(server.url, "/api/manual/0/close",
                             {"Transfer-Encoding": "chunked"}, [chunk] * 20)
        assert status == 413 and "over 1048576 bytes" in body
        # Just under the limit, the command runs.
        padded = b'{"pad": "' + b"x" * (MAX_BODY_BYTES - 20) + b'"}'
        status, body = _post(server.url, "/api/manual/0/close",
                             {"Content-Length": str(len(padded))}, [padded])
        assert status == 200, body


@pytest.mark.parametrize(("body", "says"), [
    (b"[" * 200_000 + b"]" * 200_000, "nested too deep"),
    (b'{"n": ', "must be a JSON object"),
    (b"\xff\xfe", "must be a JSON object"),
    (b"[1, 2]", "must be a JSON object"),
], ids=["too-deep", "truncated", "not-utf8", "not-an-object"])
def test_a_body_that_is_not_a_json_object_is_400_without_a_traceback(body: bytes,
                                                                     says: str) -> None:
    with served(None, (MANUAL,)) as server:
        status, answer = _post(server.url, "/api/manual/0/step",
                               {"Content-Length": str(len(body))}, [body])
    assert status == 400, answer
    assert says in answer and "Traceback" not in answer and len(answer) < 200
