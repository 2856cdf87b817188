"""Fixtures: real `autoui serve` processes on the repo's tiny test model.

The binary is $AUTOUI_BIN, else <repo>/build/autoui (`make build`). Tests that need
a server are skipped, with the reason, when the binary is missing or has no
`serve` command.
"""

import ast
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TESTDATA = REPO / "models" / "testdata"
TINY = TESTDATA / "tiny"
SCREENS = TESTDATA / "screens"
GOLDEN = TESTDATA / "golden"

_LISTENING = re.compile(r"autoui serve: listening on (http://\S+)")


def autoui_bin() -> Path:
    return Path(os.environ.get("AUTOUI_BIN") or REPO / "build" / "autoui")


def _env():
    env = dict(os.environ)
    env.setdefault("ORT_DISABLE_TELEMETRY", "1")
    lib = REPO / "third_party" / "onnxruntime" / "lib" / "libonnxruntime.so.1.29.0"
    if lib.exists():
        env.setdefault("ONNXRUNTIME_SHARED_LIBRARY_PATH", str(lib))
    return env


_serve_ok = None


def require_serve():
    """Skip unless the binary exists and has a working `serve -h`."""
    global _serve_ok
    if _serve_ok is None:
        b = autoui_bin()
        if not b.exists():
            _serve_ok = f"{b} not found: run `make build` or set AUTOUI_BIN"
        else:
            try:
                r = subprocess.run([str(b), "serve", "-h"], capture_output=True, text=True, timeout=30, env=_env())
                out = r.stdout + r.stderr
                if r.returncode != 0 and "-addr" not in out:
                    _serve_ok = f"`{b} serve -h` failed (rc {r.returncode}): this build has no `autoui serve`: {out.strip().splitlines()[0] if out.strip() else ''}"
                else:
                    _serve_ok = ""
            except (OSError, subprocess.TimeoutExpired) as e:
                _serve_ok = f"`{b} serve -h`: {e}"
    if _serve_ok:
        pytest.skip(_serve_ok)


class Server:
    """One `autoui serve` child: started, waited for /readyz, SIGTERMed at stop()."""

    def __init__(self, *extra):
        self.args = [
            str(autoui_bin()), "serve", "--model", str(TINY), "--addr", "127.0.0.1:0", *extra,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            self.args, cwd=str(REPO), env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, errors="replace",
        )  # fmt: skip
        self.stderr = []
        self.url = None
        found = threading.Event()

        def drain():  # keep reading so the child never blocks on a full pipe
            for line in self.proc.stderr:
                self.stderr.append(line)
                m = _LISTENING.search(line)
                if m and self.url is None:
                    self.url = m.group(1).rstrip("/")
                    found.set()
            found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(30) or self.url is None:
            self.stop()
            raise RuntimeError(f"{' '.join(self.args)}: no 'listening on' line; stderr:\n{''.join(self.stderr)}")
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.url} never ready; stderr:\n{''.join(self.stderr)}")
            time.sleep(0.05)

    def stop(self, timeout=20):
        """SIGTERM, wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="session")
def server():
    require_serve()
    s = Server()
    yield s
    rc = s.stop()
    if rc != 0:
        sys.stderr.write("".join(s.stderr))
        pytest.fail(f"autoui serve exited {rc} on SIGTERM, want 0")


@pytest.fixture(scope="session")
def token():
    return "s3cret-token-for-tests"


@pytest.fixture(scope="session")
def auth_server(tmp_path_factory, token):
    require_serve()
    f = tmp_path_factory.mktemp("auth") / "token"
    f.write_text(token + "\n")
    f.chmod(0o600)
    s = Server("--token-file", str(f))
    yield s
    rc = s.stop()
    if rc != 0:
        pytest.fail(f"autoui serve --token-file exited {rc} on SIGTERM, want 0")


def read_npy(path):
    """A float32/float64 little-endian C-order .npy as a flat list (no numpy needed)."""
    data = Path(path).read_bytes()
    assert data[:6] == b"\x93NUMPY", path
    major = data[6]
    if major == 1:
        (hlen,), start = struct.unpack("<H", data[8:10]), 10
    else:
        (hlen,), start = struct.unpack("<I", data[8:12]), 12
    header = ast.literal_eval(data[start : start + hlen].decode("latin1"))
    assert not header["fortran_order"], path
    code = {"<f4": "f", "<f8": "d"}[header["descr"]]
    n = 1
    for d in header["shape"]:
        n *= d
    return list(struct.unpack(f"<{n}{code}", data[start + hlen : start + hlen + n * struct.calcsize(code)]))


@pytest.fixture(scope="session")
def golden():
    with open(GOLDEN / "cases.json", encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    # The reference generated with up to 128 new tokens; the server takes at
    # most the bundle's 127. No case comes near it, so the tokens are the same.
    for c in cases:
        assert len(c["generated_ids"]) < 127
        c["max_new_tokens"] = min(c["max_new_tokens"], 127)
    return {c["id"]: c for c in cases}
