"""Retries and backoff, against a scripted local HTTP server (no autoui needed)."""

import json
import random
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autoui_client import AutouiError, Client
from autoui_client.client import _retry_after

CANNED = {
    "action_type": "PRESS_BACK", "touch_point": [-1.0, -1.0], "lift_point": [-1.0, -1.0], "typed_text": "",
    "plan": ["PRESS_BACK"], "raw": "canned", "tokens": 2, "timings_ms": {"total_ms": 1.0}, "source_tokens": 1,
    "source_text": "Goal: x", "source_ids": [5, 1], "output_ids": [7, 1], "serve": {"queue_ms": 0, "batch_size": 1, "batch": 1},
}  # fmt: skip


class Script:
    """Answers POSTs from a list of (status, headers, body[, delay s]); the last one repeats."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = []

    def __enter__(self):
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                script.requests.append((time.monotonic(), self.path, dict(self.headers), body))
                i = min(len(script.requests), len(script.answers)) - 1
                status, headers, out, *delay = script.answers[i]
                time.sleep(delay[0] if delay else 0)
                data = out if isinstance(out, bytes) else json.dumps(out).encode()
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up waiting
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _err(kind, msg="x"):
    return {"error": msg, "kind": kind}


def test_retry_after_503_then_ok():
    answers = [(503, {"Retry-After": "0"}, _err("not_ready", "loading"))] * 2 + [(200, {}, CANNED)]
    with Script(answers) as s:
        c = Client(s.url, token="t", max_wait=10)
        p = c.predict(features=[0.5] * 4, goal="go", history=[{"action_type": "PRESS_HOME"}])
    assert p.raw == "canned" and p.action_type == "PRESS_BACK" and p.serve["batch_size"] == 1
    assert c.last_retries == 2 and len(s.requests) == 3
    bodies = {r[3] for r in s.requests}
    assert len(bodies) == 1  # the same request each time
    body = json.loads(bodies.pop())
    assert body == {
        "goal": "go", "features": [0.5] * 4,
        "history": [{"action_type": "PRESS_HOME", "touch_point": [-1.0, -1.0], "lift_point": [-1.0, -1.0], "typed_text": ""}],
    }  # fmt: skip
    assert all(r[1] == "/v1/predict" and r[2]["Authorization"] == "Bearer t" for r in s.requests)


def test_retry_after_is_honoured():
    answers = [(429, {"Retry-After": "1"}, _err("queue_full"))] + [(200, {}, CANNED)]
    with Script(answers) as s:
        Client(s.url, max_wait=10).predict(features=[0.0], goal="go")
    assert s.requests[1][0] - s.requests[0][0] >= 0.9


def test_backoff_without_retry_after_grows():
    answers = [(503, {}, _err("shutting_down"))] * 4 + [(200, {}, CANNED)]
    with Script(answers) as s:
        c = Client(s.url, max_wait=10)
        c.backoff_initial = 0.05
        c.predict(features=[0.0], goal="go")
    times = [r[0] for r in s.requests]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(gaps) == 4 and gaps[-1] > gaps[0]  # 0.05*2^k, jittered by [0.5, 1]


def test_gives_up_after_max_wait():
    with Script([(429, {"Retry-After": "0"}, _err("queue_full", "queue is full"))]) as s:
        c = Client(s.url, max_wait=0.5)
        t0 = time.monotonic()
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
        elapsed = time.monotonic() - t0
    assert (e.value.status, e.value.kind, e.value.message) == (429, "queue_full", "queue is full")
    assert c.last_retries >= 2 and elapsed < 2


def test_long_retry_after_beyond_max_wait_fails_at_once():
    with Script([(503, {"Retry-After": "60"}, _err("not_ready"))]) as s:
        t0 = time.monotonic()
        with pytest.raises(AutouiError) as e:
            Client(s.url, max_wait=5).predict(features=[0.0], goal="go")
    assert e.value.kind == "not_ready" and time.monotonic() - t0 < 1 and len(s.requests) == 1


@pytest.mark.parametrize(
    "status,kind", [(502, "http_502"), (503, "shutting_down"), (504, "deadline"), (429, "queue_full")]
)
def test_retried_statuses(status, kind):
    # The Go client's Error.Temporary: 429, 502, 503 and 504 are retried (a 504
    # is the server's --request-timeout, or a proxy's), with the same backoff.
    answers = [(status, {}, _err(kind, "later"))] * 2 + [(200, {}, CANNED)]
    with Script(answers) as s:
        c = Client(s.url, max_wait=10)
        p = c.predict(features=[0.0], goal="go")
    assert p.raw == "canned" and c.last_retries == 2 and len(s.requests) == 3


def test_retried_status_gives_up_with_its_error():
    with Script([(504, {}, _err("deadline", "no answer within 60s"))]) as s:
        c = Client(s.url, max_wait=0.5)
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind, e.value.message) == (504, "deadline", "no answer within 60s")
    assert c.last_retries >= 1


@pytest.mark.parametrize(
    "status,kind", [(400, "bad_request"), (401, "unauthorized"), (413, "too_large"), (500, "internal")]
)
def test_other_errors_not_retried(status, kind):
    with Script([(status, {"Retry-After": "0"}, _err(kind, "nope"))]) as s:
        c = Client(s.url, max_wait=10)
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind, e.value.message) == (status, kind, "nope")
    assert len(s.requests) == 1 and c.last_retries == 0


def _free_port():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def test_connection_refused_retried_until_the_server_is_up():
    port = _free_port()
    holder = {}

    class Handler(BaseHTTPRequestHandler):  # the server "restarts" on the port after 0.4 s
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            data = json.dumps(CANNED).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    def serve_later():
        time.sleep(0.4)
        holder["httpd"] = httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        httpd.serve_forever()

    threading.Thread(target=serve_later, daemon=True).start()
    try:
        c = Client(f"http://127.0.0.1:{port}", max_wait=10)
        p = c.predict(features=[0.0], goal="go")
        assert p.raw == "canned" and c.last_retries >= 1
    finally:
        for _ in range(50):
            if "httpd" in holder:
                break
            time.sleep(0.05)
        if "httpd" in holder:
            holder["httpd"].shutdown()
            holder["httpd"].server_close()


def test_connection_refused_gives_up():
    c = Client(f"http://127.0.0.1:{_free_port()}", max_wait=0.3)
    with pytest.raises(AutouiError) as e:
        c.predict(features=[0.0], goal="go")
    assert e.value.status is None and e.value.kind == "connection"


def test_retry_after_is_jittered():
    # A farm of agents refused at once must not retry in step: each waits the
    # Retry-After plus a random share of its backoff, bounded.
    c = Client("http://127.0.0.1:1")
    c._random = random.Random(7)
    for attempt in range(10):
        backoff = min(c.backoff_max, c.backoff_initial * 2**attempt)
        delays = [c._delay(attempt, 1.0) for _ in range(50)]
        assert all(1.0 <= d <= 1.0 + backoff for d in delays), (attempt, delays)
        assert len(set(delays)) == 50
    no_header = [c._delay(3, None) for _ in range(50)]
    assert all(0.4 <= d < 0.8 for d in no_header) and len(set(no_header)) == 50
    # As the Go client: a Retry-After of 0 is no Retry-After (the backoff jittered).
    zero = [c._delay(3, 0.0) for _ in range(50)]
    assert all(0.4 <= d < 0.8 for d in zero) and len(set(zero)) == 50


@pytest.mark.parametrize(
    "value,want",
    [("2", 2.0), (" 3 ", 3.0), ("+1", 1.0), ("0", 0.0), (None, None), ("1.5", None), ("-1", None), ("soon", None),
     ("inf", None), ("nan", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],
)  # fmt: skip
def test_retry_after_read_as_the_go_client(value, want):
    # Whole seconds or an HTTP date (past: 0); anything else is no Retry-After.
    assert _retry_after(value) == want


def test_retry_after_date():
    from email.utils import formatdate

    got = _retry_after(formatdate(time.time() + 30, usegmt=True))
    assert 28 <= got <= 30


def test_answer_that_is_not_a_prediction_retried():
    # The Go client retries an answer it cannot read ("answer is not a prediction").
    answers = [(200, {}, b"<html>proxy</html>"), (200, {}, "a string"), (200, {}, CANNED)]
    with Script(answers) as s:
        c = Client(s.url, max_wait=10)
        p = c.predict(features=[0.0], goal="go")
    assert p.raw == "canned" and c.last_retries == 2
    with Script([(200, {}, b"{not json")]) as s:
        c = Client(s.url, max_wait=0.4)
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind) == (200, "bad_answer") and c.last_retries >= 1


def test_timeout_retried():
    # An attempt that times out is sent again (the Go client retries every
    # error that is not a refusal), here to an answer.
    with Script([(200, {}, CANNED, 1.0), (200, {}, CANNED)]) as s:
        c = Client(s.url, timeout=0.3, max_wait=10)
        p = c.predict(features=[0.0], goal="go")
    assert p.raw == "canned" and c.last_retries == 1 and len(s.requests) == 2


def test_attempts_end_by_max_wait():
    # As the Go client: a server that hangs holds the caller no longer than max_wait.
    with Script([(200, {}, CANNED, 3.0)]) as s:
        c = Client(s.url, timeout=60, max_wait=0.5)
        t0 = time.monotonic()
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
        elapsed = time.monotonic() - t0
    assert e.value.kind == "timeout" and "max_wait" in e.value.message and elapsed < 1.5


def test_metrics_not_retried():
    # Only predictions are retried, as in the Go client; metrics is a probe.
    c = Client(f"http://127.0.0.1:{_free_port()}", max_wait=30)
    t0 = time.monotonic()
    with pytest.raises(AutouiError) as e:
        c.metrics()
    assert e.value.kind == "connection" and time.monotonic() - t0 < 2


def test_answer_read_when_the_server_closes_early():
    # The server answers 401 from the headers and closes without reading the
    # body (as autoui serve does): the client reports the 401, not a reset.
    lsock = socket.create_server(("127.0.0.1", 0))
    port = lsock.getsockname()[1]

    def serve_once():
        conn, _ = lsock.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            data = json.dumps(_err("unauthorized", "missing token")).encode()
            conn.sendall(
                b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            time.sleep(0.2)

    t = threading.Thread(target=serve_once, daemon=True)
    t.start()
    try:
        with pytest.raises(AutouiError) as e:
            Client(f"http://127.0.0.1:{port}", max_wait=2).predict(features=[0.5] * (4 << 20), goal="go")
    finally:
        t.join(5)
        lsock.close()
    assert (e.value.status, e.value.kind) == (401, "unauthorized")
