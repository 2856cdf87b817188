"""The peer runners: same inputs, same fixed length, same tokens as each other (tiny bundle),
and the comparison report and chart they feed."""

import json
import os
import shutil
import xml.etree.ElementTree as ET

import pytest

from scripts.peers import common, compare, svg, torch_ref
from scripts.tests.conftest import ROOT, TESTDATA, TINY

SCREEN = os.path.join(TESTDATA, "screens", "home_1080x2400.png")
TOKENS = 6


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The committed tiny bundle, or (until it exists) a fresh tiny export."""
    if os.path.exists(os.path.join(TINY, "manifest.json")):
        return TINY
    from scripts import export
    out = str(tmp_path_factory.mktemp("tiny"))
    export.main(["--random", "--size", "tiny", "--seed", "0", "--out", out, "--no-check"])
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    if not os.path.exists(SCREEN):
        pytest.skip(f"no screen {SCREEN}")
    text = ('Previous Actions: "action_type": "PRESS_HOME", "touch_point": "[-1.0, -1.0]", '
            '"lift_point": "[-1.0, -1.0]", "typed_text": "" Goal: Open the settings app')
    path = str(tmp_path_factory.mktemp("inputs") / "inputs.json")
    doc = {"tokens": TOKENS, "cases": [{"id": "h1", "screen": SCREEN, "goal": "Open the settings app", "history": [],
                                        "source_text": text, "source_tokens": -1}]}
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def test_summarize_matches_go():
    s = common.summarize([0.005, 0.001, 0.004, 0.002, 0.003])
    assert s == {"n": 5, "min_ms": 1.0, "median_ms": 3.0, "p90_ms": 5.0}
    s = common.summarize([i / 1000 for i in range(1, 11)])
    assert s["median_ms"] == 5.5 and s["p90_ms"] == 9.0


def test_finish_action_derives_text_path_and_total():
    st = common.finish_action({"decode_image": 1, "preprocess": 1, "vision": 2, "tokenize": 1, "encoder": 3,
                               "fusion": 1, "first_step": 1, "later_steps": 5, "parse": 1})
    assert st["text_path"] == 12 and st["total"] == 16
    st = common.finish_action({"tokenize": 1, "generate": 10, "encoder": 3, "parse": 1})
    assert st["text_path"] == 12  # encoder is inside generate: not counted twice


def test_parse_source():
    assert torch_ref.parse_source("random:base:seed=0;vision=random:vitg") == ("base", 0, "vitg")
    assert torch_ref.parse_source("random:tiny:seed=7") == ("tiny", 7, None)
    assert torch_ref.parse_source("checkpoint:x;vision=blip2:y") is None


def test_ort_and_torch_decode_the_same_fixed_length(bundle, inputs):
    from scripts.peers import ort_python
    with open(inputs) as f:
        case = json.load(f)["cases"][0]
    o = ort_python.Runner(bundle, 1).one(case, TOKENS)
    src = common.load_manifest(bundle)["exporter"]["source"]
    if src.startswith("checkpoint:"):  # the committed tiny bundle: exported from the test checkpoint
        testdata = os.path.dirname(bundle)
        t = torch_ref.Runner(bundle, 1, os.path.join(testdata, "tiny_checkpoint"),
                             os.path.join(testdata, "tiny_blip2")).one(case, TOKENS)
    else:
        t = torch_ref.Runner(bundle, 1).one(case, TOKENS)
    eos = common.load_manifest(bundle)["tokens"]["eos_id"]
    assert len(o["ids"]) == TOKENS and eos not in o["ids"]
    assert o["ids"] == t["ids"]  # same seed, same weights, same greedy tokens
    assert o["decoder_calls"] == t["decoder_calls"] == TOKENS
    for st in ("decode_image", "preprocess", "vision", "tokenize", "encoder", "fusion", "first_step",
               "later_steps", "decode_step", "parse"):
        assert o["stages"][st] > 0, st
    for st in ("vision", "encoder", "first_step", "later_steps", "generate"):
        assert t["stages"][st] > 0, st


def test_peer_json_report(bundle, inputs, tmp_path):
    from scripts.peers import ort_python
    out = tmp_path / "ort.json"
    assert ort_python.main(["--model", bundle, "--inputs", inputs, "--threads", "1", "--runs", "1", "--warmup", "0",
                            "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    for k in ("model", "threads", "provider", "stages", "total_median_ms", "tokens", "decoder_calls", "peak_rss_mb"):
        assert k in doc, k
    assert doc["tokens"] == TOKENS and doc["runner"] == "onnxruntime-python"
    assert doc["stages"]["total"]["median_ms"] >= doc["stages"]["text_path"]["median_ms"] > 0


@pytest.mark.skipif(shutil.which("node") is None, reason="no node")
def test_node_runner_present():
    # The runner itself needs `npm ci` (make bench); here only that its pins are exact.
    with open(os.path.join(ROOT, "bench", "node", "package.json")) as f:
        deps = json.load(f)["dependencies"]
    assert deps and all(v[0].isdigit() for v in deps.values()), deps
    assert os.path.exists(os.path.join(ROOT, "bench", "node", "package-lock.json"))


def _doc(runner, total, text, rss, **stages):
    st = {k: {"median_ms": v} for k, v in stages.items()}
    st["total"], st["text_path"] = {"median_ms": total}, {"median_ms": text}
    return {"runner": runner, "model": "base", "threads": 2, "stages": st, "peak_rss_mb": rss,
            "generated_ids": [5, 6, 7, 8]}


def test_report_table_ratios_and_chart(tmp_path):
    ours = _doc("autoui-go", 1000, 800, 500, vision=150, encoder=100, first_step=20, decode_step=8, later_steps=600)
    ours["cases"] = [{"source_tokens": 30}, {"source_tokens": 250}]
    ours["limits"] = [{"stage": "encoder", "measured_ms": 100, "bound_ms": 50, "ratio": 2.0, "basis": "flops"}]
    ours["machine"] = {"cpu": "Test CPU", "bandwidth_gbps": 20.0, "gemm_gflops": 100.0}
    torch = _doc("pytorch", 4000, 3000, 2000, vision=600, encoder=400, first_step=50, decode_step=30, later_steps=2500)
    torch["fusion_inside_steps"] = True
    torch["generated_ids"] = [5, 6, 9, 9]
    tjs = _doc("tjs", 1600, 1600, 750, encoder=200, first_step=20, decode_step=16, later_steps=1300)

    class A:
        tokens, threads, runs, warmup = 80, 2, 3, 1

    text = compare.write_report(str(tmp_path), "base-vitg", {"ours": ours, "torch": torch, "tjs": tjs},
                                {"ort": "exit status 1"}, A)
    assert "| autoui (Go + ORT) | 1.00 s | 800.0 ms | 1.00× |" in text
    assert "| PyTorch + HF generate | 4.00 s | 3.00 s | 3.75× |" in text and "| 4.00× |" in text
    assert "| transformers.js, Node | – | 1.60 s | 2.00× |" in text  # no vision: no full-action time
    assert "| ONNX Runtime, Python | failed: exit status 1 |" in text
    assert text.count("| 80 |") == 0 and "| 12 | 2000 MB |" not in text
    assert "| encoder | 100.0 ms | 50.0 ms | 2.00× | flops |" in text
    assert "PyTorch + HF generate 2/4" in text and "Test CPU" in text
    root = ET.parse(tmp_path / "bench.svg").getroot()
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title") is not None]
    assert len(rects) >= 10
    assert compare.chart_values(torch)[4] == 0.0  # fusion inside the steps is not drawn twice


def test_svg_escapes_and_scales():
    doc = svg.stacked_bars("a <b> & c", "s", ["x", "y"], [("r<1>", [1.0, 2.0]), ("r2", [0.5, 0.0])])
    root = ET.fromstring(doc)
    assert root.tag.endswith("svg")
    assert "a &lt;b&gt; &amp; c" in doc
    # the axis reaches past the longest bar (3.0): its last tick label is >= 3
    ticks = [float(t.text) for t in root.iter("{http://www.w3.org/2000/svg}text")
             if t.text and t.text.replace(".", "", 1).isdigit() and t.get("fill") == "#555"]
    assert max(ticks) >= 3.0
