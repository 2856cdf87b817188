"""Retries and backoff, against a scripted local HTTP server (no autoui needed)."""

import errno
import json
import os
import random
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autoui_client import AutouiError, Client
from autoui_client.client import MAX_RETRY_AFTER, _one_line, _retry_after

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
                    if "Content-Type" not in headers:
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


@pytest.mark.parametrize("value,said", [("60", "1m0s"), ("999999", "277h46m39s")])
def test_long_retry_after_beyond_max_wait_fails_at_once(value, said):
    # ... and says that is why (as the Go client), keeping the server's answer.
    with Script([(503, {"Retry-After": value}, _err("not_ready", "the model is still loading"))]) as s:
        t0 = time.monotonic()
        with pytest.raises(AutouiError) as e:
            Client(s.url, max_wait=5).predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind, e.value.retry_after) == (503, "not_ready", float(value))
    assert e.value.message.startswith(f"the server asked to retry after {said}, more than the ")
    assert e.value.message.endswith(" left of max_wait 5s: the model is still loading")
    assert time.monotonic() - t0 < 1 and len(s.requests) == 1


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
    [("2", 2.0), (" 3 ", 3.0), ("+1", 1.0), ("0", 0.0), ("-0", 0.0), (None, None), ("1.5", None), ("-1", None),
     ("soon", None), ("inf", None), ("nan", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
     ("9223372036", MAX_RETRY_AFTER), ("99999999999999999999", MAX_RETRY_AFTER), ("9" * 5000, MAX_RETRY_AFTER),
     ("-" + "9" * 5000, None), ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_RETRY_AFTER)],
)  # fmt: skip
def test_retry_after_read_as_the_go_client(value, want):
    # Whole seconds or an HTTP date (past: 0), at most 100 years; anything else
    # is no Retry-After.
    assert _retry_after(value) == want


def test_retry_after_date():
    from email.utils import formatdate

    got = _retry_after(formatdate(time.time() + 30, usegmt=True))
    assert 28 <= got <= 30


@pytest.mark.parametrize(
    "headers,body",
    [({"Content-Type": "text/html"}, b"<html><body>login</body></html>"), ({}, "a string"), ({}, b'{"raw": "tru'),
     ({}, b"[" * 100000), ({}, {"tokens": {"not": "a number"}})],
    ids=["html", "not-an-object", "cut-json", "deep-json", "bad-field"],
)  # fmt: skip
def test_answer_that_is_not_a_prediction_fails_at_once(headers, body):
    # As the Go client: a 200 answer that is not a prediction (a login page, a
    # proxy's, a wrong server) would be the same the next time: one attempt.
    with Script([(200, headers, body), (200, {}, CANNED)]) as s:
        c = Client(s.url, max_wait=5)
        t0 = time.monotonic()
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind) == (200, "bad_answer")
    assert "answer is not a prediction (Content-Type " in e.value.message and "\n" not in str(e.value)
    assert len(s.requests) == 1 and c.last_retries == 0 and time.monotonic() - t0 < 1


def test_answer_over_the_limit_says_so():
    body = b'{"raw": "' + b"a" * (64 << 20) + b'"}'
    with Script([(200, {}, body), (200, {}, CANNED)]) as s:
        c = Client(s.url, max_wait=5)
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind) == (200, "bad_answer")
    assert e.value.message == "answer is over the 64 MiB limit: not a prediction" and len(s.requests) == 1


class Raw:
    """A TCP server that hands each connection (and its number, from 0) to ``serve``."""

    def __init__(self, serve):
        self.serve = serve
        self.connections = 0

    def __enter__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

        def loop():
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                n, self.connections = self.connections, self.connections + 1
                with conn:
                    try:
                        self.serve(conn, n)
                    except OSError:
                        pass

        threading.Thread(target=loop, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.sock.close()


def _read_request(conn):
    """Reads one HTTP request (head and Content-Length body) from conn."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += conn.recv(65536)
    return data


def _answer(status_line, body):
    return status_line + f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


def test_tls_error_fails_at_once():
    # https:// to a plain-HTTP server: every retry would fail the same way.
    def serve(conn, n):
        conn.recv(65536)
        conn.sendall(_answer(b"HTTP/1.1 400 Bad Request", b"Client sent an HTTP request to an HTTPS server."))

    with Raw(serve) as r:
        c = Client(r.url.replace("http://", "https://"), max_wait=5)
        t0 = time.monotonic()
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
        elapsed = time.monotonic() - t0
    assert (e.value.status, e.value.kind) == (None, "connection") and "TLS error" in e.value.message
    assert "\n" not in str(e.value) and r.connections == 1 and c.last_retries == 0 and elapsed < 1


def test_protocol_error_fails_at_once():
    def serve(conn, n):
        _read_request(conn)
        conn.sendall(b"garbage\r\n\r\n")

    with Raw(serve) as r:
        c = Client(r.url, max_wait=5)
        t0 = time.monotonic()
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
        elapsed = time.monotonic() - t0
    assert (e.value.status, e.value.kind) == (None, "connection") and "malformed HTTP answer" in e.value.message
    assert "\n" not in str(e.value) and r.connections == 1 and elapsed < 1


def test_connection_closed_before_the_answer_retried():
    # A server restarting: closed before any answer, then an answer cut short,
    # then the answer. The first two are retried.
    data = json.dumps(CANNED).encode()

    def serve(conn, n):
        _read_request(conn)
        if n == 1:
            conn.sendall(b"HTTP/1.1 200 OK\r\n" + f"Content-Length: {len(data)}\r\n\r\n".encode() + data[:10])
        elif n >= 2:
            conn.sendall(_answer(b"HTTP/1.1 200 OK", data))

    with Raw(serve) as r:
        c = Client(r.url, max_wait=10)
        p = c.predict(features=[0.0], goal="go")
    assert p.raw == "canned" and c.last_retries == 2 and r.connections == 3


@pytest.fixture
def resolver(monkeypatch):
    """Makes the host autoui.test resolve to 127.0.0.1 after the listed failures."""
    real = socket.getaddrinfo
    state = {"fail": [], "calls": 0}

    def getaddrinfo(host, *args, **kw):
        if host != "autoui.test":
            return real(host, *args, **kw)
        state["calls"] += 1
        if state["fail"]:
            code = state["fail"].pop(0)
            msg = "Temporary failure in name resolution" if code == socket.EAI_AGAIN else "Name or service not known"
            raise socket.gaierror(code, msg)
        return real("127.0.0.1", *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return state


def test_unknown_host_fails_at_once(resolver):
    resolver["fail"] = [socket.EAI_NONAME]
    with Script([(200, {}, CANNED)]) as s:
        c = Client(s.url.replace("127.0.0.1", "autoui.test"), max_wait=5)
        with pytest.raises(AutouiError) as e:
            c.predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind) == (None, "connection") and "unknown host" in e.value.message
    assert resolver["calls"] == 1 and not s.requests


def test_temporary_dns_failure_retried(resolver):
    resolver["fail"] = [socket.EAI_AGAIN, socket.EAI_AGAIN]
    with Script([(200, {}, CANNED)]) as s:
        c = Client(s.url.replace("127.0.0.1", "autoui.test"), max_wait=10)
        p = c.predict(features=[0.0], goal="go")
    assert p.raw == "canned" and c.last_retries == 2 and resolver["calls"] == 3


@pytest.mark.parametrize(
    "code,retried",
    [(errno.ENETUNREACH, True), (errno.EHOSTUNREACH, True), (errno.ECONNABORTED, True), (errno.EACCES, False)],
    ids=["ENETUNREACH", "EHOSTUNREACH", "ECONNABORTED", "EACCES"],
)
def test_unreachable_network_retried(monkeypatch, code, retried):
    # A network briefly unreachable is retried; another socket error is not.
    real = socket.create_connection
    fails = [code]

    def create_connection(*args, **kw):
        if fails:
            c = fails.pop()
            raise OSError(c, os.strerror(c))
        return real(*args, **kw)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    with Script([(200, {}, CANNED)]) as s:
        c = Client(s.url, max_wait=5)
        if retried:
            assert c.predict(features=[0.0], goal="go").raw == "canned" and c.last_retries == 1
        else:
            with pytest.raises(AutouiError) as e:
                c.predict(features=[0.0], goal="go")
            assert e.value.kind == "connection" and not s.requests and c.last_retries == 0


def test_timeout_retried():
    # An attempt that times out is sent again (as the Go client), here to an answer.
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


_TRACEBACK = "Traceback (most recent call last):\n  File \"x\", line 1\n\tboom\x1b[0m\n" + "\u00e9" * 300


@pytest.mark.parametrize(
    "status,body,kind,want",
    [(500, _TRACEBACK.encode(), "internal",
      'Traceback (most recent call last): File "x", line 1 boom [0m ' + "\u00e9" * 69 + "..."),
     (500, {"error": "line one\nline two\r\n", "kind": "internal"}, "internal", "line one line two"),
     (400, b"<html>\n<body>\n  <h1>Bad\x00request</h1>\n</body>\n</html>\n", "bad_request",
      "<html> <body> <h1>Bad request</h1> </body> </html>"),
     (418, b"\xff\xfe teapot \x85\xe2\x80\xa8 here", "http_418", "\ufffd teapot \ufffd here"),
     (500, b"", "internal", "Internal Server Error"),
     (413, {"error": 5, "kind": ["x"]}, "too_large", '{"error": 5, "kind": ["x"]}')],
    ids=["traceback", "json", "html", "bad-utf8", "empty", "json-not-the-servers"],
)  # fmt: skip
def test_error_messages_are_one_line(status, body, kind, want):
    # As the Go client's oneLine: control characters and runs of white space
    # become one space, invalid UTF-8 is replaced, at most 200 bytes (+ "...").
    with Script([(status, {"Content-Type": "text/plain"}, body)]) as s:
        with pytest.raises(AutouiError) as e:
            Client(s.url, max_wait=5).predict(features=[0.0], goal="go")
    assert (e.value.status, e.value.kind, e.value.message) == (status, kind, want)
    assert "\n" not in str(e.value) and len(e.value.message.encode()) <= 203


def test_one_line_cuts_on_a_character_boundary():
    assert _one_line("a" * 200) == "a" * 200
    assert _one_line("a" * 199 + "\u00e9") == "a" * 199 + "..."  # not half of the é
    assert _one_line("a" * 198 + "\u20ac") == "a" * 198 + "..."
    assert _one_line("\ud800 x\u2028\u3000y\t") == "\ufffd x y"
    assert _one_line(b" \n\r\t ") == ""


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://exa mple.com", "127.0.0.1:8080",
     "localhost:8080", "ftp://x", "http://", "http://:8080", "http://h/?q=1", "http://h/?", "http://h/#f",
     "http://h:abc", "http://h:+80", "http://h:0080000", "http://[::1]x", "http://h\n", "http://h/%zz",
     "http://h{x}", "https//h"],
)  # fmt: skip
def test_malformed_base_url_refused(url):
    # As the Go client's BaseURL: refused at once, not retried until max_wait.
    with pytest.raises(ValueError) as e:
        Client(url)
    msg = str(e.value)
    assert msg.startswith(f"server URL {url!r}") and "\n" not in msg, msg


def test_malformed_base_url_messages():
    for url, want in [("127.0.0.1:8080", "has no scheme: want http://HOST:PORT or https://HOST[:PORT]"),
                      ("ftp://x", "scheme 'ftp'"), ("http://:8080", "has no host"),
                      ("http://h:99999", "port 99999: want 1-65535"), ("http://h/?q=1", "takes no query or fragment")]:  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(want)):
            Client(url)


def test_base_url_kept_without_trailing_slashes():
    for url, want in [("http://127.0.0.1:8080/", "http://127.0.0.1:8080"), ("https://h", "https://h"),
                      ("HTTP://h:1//", "HTTP://h:1"), ("http://[::1]:80/prefix/", "http://[::1]:80/prefix")]:  # fmt: skip
        assert Client(url).base_url == want
    with Script([(200, {}, CANNED)]) as s:  # the path is a prefix of the API's
        assert Client(s.url + "/autoui/").predict(features=[0.0], goal="go").raw == "canned"
    assert s.requests[0][1] == "/autoui/v1/predict"
