"""Load test of `autoui serve` on this machine (issue 15; results in docs/serve.md).

Two parts, each against one real server process:

* agents: N `autoui sim` phones and N `autoui run --server` agents at once, for each
  --max-batch; actions/s over the whole run, per-step predict latency p50/p99 from the
  agents' steps.jsonl, the server's peak RSS (VmHWM). With --restart, the server is
  stopped (SIGTERM) and started again on the same port mid-episode; every trajectory
  must still end with a summary and no error.
* raw: `autoui bench serve` closed-loop /v1/predict clients at 1..32 concurrency.

Usage (after `make build`):
    python -m scripts.serve_loadtest agents --model models/default --batches 1,4,8 --out build/load
    python -m scripts.serve_loadtest agents --model models/default --batches 8 --restart --out build/load
    python -m scripts.serve_loadtest raw --model bench-models/base-vtiny --batches 1,8 --out build/load
    python -m scripts.serve_loadtest plot --out build/load   # -> docs/serve_load.svg
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("AUTOUI_BIN", os.path.join(ROOT, "build", "autoui"))
FAMILIES = ["open_app", "toggle_setting", "search", "scroll_open", "navigate", "multi_step"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_line(proc, pattern, timeout=120):
    """Reads proc's stderr until a line matches pattern; returns the match."""
    deadline = time.time() + timeout
    lines = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("process ended before %r: %s" % (pattern, "".join(lines)))
        lines.append(line)
        m = re.search(pattern, line)
        if m:
            return m
    raise RuntimeError("no %r within %ss" % (pattern, timeout))


def drain(proc):
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()


class Server:
    def __init__(self, model, max_batch, port=0, extra=()):
        self.args = [BIN, "serve", "--model", model, "--addr", "127.0.0.1:%d" % port,
                     "--max-batch", str(max_batch)] + list(extra)
        self.proc = subprocess.Popen(self.args, stderr=subprocess.PIPE, text=True)
        m = read_line(self.proc, r"listening on (http://\S+)")
        self.url = m.group(1)
        self.port = int(self.url.rsplit(":", 1)[1])
        read_line(self.proc, r"autoui serve: ready")
        drain(self.proc)

    def peak_rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def start_adb():
    port = free_port()
    subprocess.run(["adb", "-P", str(port), "start-server"], check=True, capture_output=True)
    return port


def start_phones(n, adb_port):
    phones = []
    for i in range(n):
        fam = FAMILIES[i % len(FAMILIES)]
        p = subprocess.Popen([BIN, "sim", "--port", "0", "--seed", str(1000 + i), "--task", fam],
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        addr = read_line(p, r"adb connect (\S+)").group(1)
        goal = read_line(p, r"task \S+ \(\w+ split\): (.*)$").group(1).strip()
        drain(p)
        out = subprocess.run(["adb", "-P", str(adb_port), "connect", addr], capture_output=True, text=True)
        if "connected" not in out.stdout:
            raise RuntimeError("adb connect %s: %s%s" % (addr, out.stdout, out.stderr))
        phones.append((p, addr, goal))
    return phones


def run_agents(server_url, phones, adb_port, out_dir, max_steps):
    procs = []
    for i, (_, addr, goal) in enumerate(phones):
        d = os.path.join(out_dir, "agent%d" % i)
        procs.append((d, subprocess.Popen(
            [BIN, "run", "--server", server_url, "--adb-port", str(adb_port), "--serial", addr,
             "--goal", goal, "--max-steps", str(max_steps), "--out", d, "--overwrite", "--no-annotate",
             "--settle-min", "0", "--settle-frames", "2", "--repeat-limit", str(max_steps + 1)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    return procs


def collect(procs):
    steps, lat, failed = 0, [], []
    for d, p in procs:
        _, err = p.communicate(timeout=900)
        try:
            with open(os.path.join(d, "summary.json")) as f:
                summary = json.load(f)
        except OSError:
            failed.append("%s: no summary (exit %d): %s" % (d, p.returncode, err.strip()[-300:]))
            continue
        if summary.get("error"):
            failed.append("%s: %s" % (d, summary["error"]))
        with open(os.path.join(d, "steps.jsonl")) as f:
            for line in f:
                s = json.loads(line)
                steps += 1
                lat.append(s["timings"]["predict_ms"])
    return steps, lat, failed


def pct(v, q):
    if not v:
        return float("nan")
    s = sorted(v)
    return s[max(0, -(-q * len(s) // 100) - 1)]


def agents(a):
    os.makedirs(a.out, exist_ok=True)
    rows = []
    adb_port = start_adb()
    try:
        for b in [int(x) for x in a.batches.split(",")]:
            phones = start_phones(a.agents, adb_port)
            srv = Server(a.model, b)
            t0 = time.time()
            procs = run_agents(srv.url, phones, adb_port, os.path.join(a.out, "agents-b%d" % b), a.max_steps)
            restarted = False
            if a.restart:
                time.sleep(a.restart_after)
                rss = srv.peak_rss_mb()
                code = srv.stop()
                print("server stopped (exit %d) at %.1fs; starting again on port %d" % (code, time.time() - t0, srv.port), flush=True)
                srv = Server(a.model, b, port=srv.port)
                restarted = True
            steps, lat, failed = collect(procs)
            wall = time.time() - t0
            rss = max(srv.peak_rss_mb(), rss if restarted else 0)
            srv.stop()
            for p, addr, _ in phones:
                subprocess.run(["adb", "-P", str(adb_port), "disconnect", addr], capture_output=True)
                p.send_signal(signal.SIGINT)
                p.wait(timeout=30)
            row = {"max_batch": b, "agents": a.agents, "steps": steps, "seconds": round(wall, 2),
                   "actions_per_s": round(steps / wall, 2), "predict_p50_ms": round(pct(lat, 50), 1),
                   "predict_p99_ms": round(pct(lat, 99), 1), "server_peak_rss_mb": round(rss, 1),
                   "restarted": restarted, "failed": failed}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        subprocess.run(["adb", "-P", str(adb_port), "kill-server"], capture_output=True)
    name = "agents-restart.json" if a.restart else "agents.json"
    with open(os.path.join(a.out, name), "w") as f:
        json.dump({"model": a.model, "rows": rows}, f, indent=2)
    if any(r["failed"] for r in rows):
        sys.exit("some trajectories failed: %s" % [r["failed"] for r in rows])


def raw(a):
    os.makedirs(a.out, exist_ok=True)
    res = {}
    for b in [int(x) for x in a.batches.split(",")]:
        srv = Server(a.model, b, extra=["--queue", "256", "--request-timeout", "300s"])
        out = os.path.join(a.out, "raw-b%d.json" % b)
        with open(out, "wb") as f:
            subprocess.run([BIN, "bench", "serve", "--server", srv.url, "--concurrency", a.concurrency,
                            "--duration", a.duration, "--warmup", "3s", "--max-new-tokens", str(a.max_new_tokens),
                            "--json"], check=True, stdout=f)
        rss = srv.peak_rss_mb()
        srv.stop()
        with open(out) as f:
            res[b] = {"levels": json.load(f)["levels"], "server_peak_rss_mb": round(rss, 1)}
        print("max-batch %d: peak RSS %.0f MB" % (b, rss), flush=True)
    with open(os.path.join(a.out, "raw.json"), "w") as f:
        json.dump({"model": a.model, "max_new_tokens": a.max_new_tokens, "by_max_batch": res}, f, indent=2)


def plot(a):
    """A dependency-free SVG: throughput vs concurrency per --max-batch (raw.json)."""
    with open(os.path.join(a.out, "raw.json")) as f:
        data = json.load(f)["by_max_batch"]
    W, H, L, B = 560, 320, 60, 40
    series = {b: [(l["concurrency"], l["per_second"]) for l in v["levels"]] for b, v in data.items()}
    xs = sorted({c for s in series.values() for c, _ in s})
    ymax = max(y for s in series.values() for _, y in s) * 1.15
    import math
    def px(c):
        return L + (W - L - 20) * (math.log2(c) / max(1, math.log2(xs[-1])))
    def py(y):
        return H - B - (H - B - 20) * y / ymax
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - 20, H - B),
           '<line x1="%d" y1="20" x2="%d" y2="%d" stroke="black"/>' % (L, L, H - B)]
    for c in xs:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (px(c), H - B + 16, c))
    for i in range(5):
        y = ymax * i / 4
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.1f</text>' % (L - 6, py(y) + 4, y))
    out.append('<text x="%d" y="%d" text-anchor="middle">concurrent clients</text>' % ((L + W) / 2, H - 6))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">predictions/s</text>' % (H / 2, H / 2))
    for k, (b, s) in enumerate(sorted(series.items(), key=lambda kv: int(kv[0]))):
        pts = " ".join("%.1f,%.1f" % (px(c), py(y)) for c, y in s)
        col = colors[k % len(colors)]
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (col, pts))
        out.append('<text x="%d" y="%d" fill="%s">--max-batch %s</text>' % (L + 10, 34 + 16 * k, col, b))
    out.append("</svg>")
    dst = a.svg
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("agents")
    g.add_argument("--model", default="models/default")
    g.add_argument("--batches", default="1,4,8")
    g.add_argument("--agents", type=int, default=8)
    g.add_argument("--max-steps", type=int, default=12)
    g.add_argument("--restart", action="store_true")
    g.add_argument("--restart-after", type=float, default=4.0)
    g.add_argument("--out", default="build/load")
    r = sub.add_parser("raw")
    r.add_argument("--model", default="bench-models/base-vtiny")
    r.add_argument("--batches", default="1,8")
    r.add_argument("--concurrency", default="1,2,4,8,16,32")
    r.add_argument("--duration", default="30s")
    # A random-weight model never says </s>: every request would decode the
    # model's whole limit (127). 48 keeps a level's samples many.
    r.add_argument("--max-new-tokens", type=int, default=48)
    r.add_argument("--out", default="build/load")
    p = sub.add_parser("plot")
    p.add_argument("--out", default="build/load")
    p.add_argument("--svg", default="docs/serve_load.svg")
    a = ap.parse_args()
    {"agents": agents, "raw": raw, "plot": plot}[a.cmd](a)


if __name__ == "__main__":
    main()
