"""The CTranslate2 and OpenVINO peers (scripts/peers/ct2.py, ov.py). Their packages come from
scripts/peers/requirements.txt, which only `make bench` installs: the tests that need them skip
when they are not importable."""

import json
import os

import pytest

from scripts.peers import common, compare, ct2
from scripts.tests.conftest import TESTDATA, TINY, TOKENIZER

SCREEN = os.path.join(TESTDATA, "screens", "home_1080x2400.png")
PROMPTS = ['Previous Actions: "action_type": "PRESS_HOME", "touch_point": "[-1.0, -1.0]", '
           '"lift_point": "[-1.0, -1.0]", "typed_text": "" Goal: Open the settings app',
           "Goal: Search for hotels in Paris"]


def _tok():
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(TOKENIZER)
    t.no_padding()
    return t


def test_vocabulary_is_padded_with_unique_names():
    tok = _tok()
    n = tok.get_vocab_size()
    v = ct2.vocabulary(tok, n + 70)
    assert len(v) == n + 70 and len(set(v)) == len(v)  # CTranslate2's own "<extra_id_%d>" padding would collide
    assert v[:3] == [tok.id_to_token(i) for i in range(3)]
    with pytest.raises(ValueError):
        ct2.vocabulary(tok, n - 1)


def test_ct2_conversion_of_a_tiny_t5_decodes_pytorch_greedy_tokens(tmp_path):
    pytest.importorskip("ctranslate2")
    import numpy as np
    from scripts import autoui_model as am
    tok = _tok()
    model = am.random_model("tiny", am.round_vocab(tok.get_vocab_size()), 32, seed=3)
    t5 = ct2.torch_t5(model)
    to_id = {t: i for i, t in enumerate(ct2.vocabulary(tok, model.config.vocab_size))}
    n = 12
    for quant in ("float32", "int8"):
        out = str(tmp_path / quant)
        ct2.converter(model, tok, am.PAD_ID, am.EOS_ID, am.UNK_ID).convert(out, quantization=quant)
        tr = ct2.translator(out, quant, 1)
        for text in PROMPTS:
            ids = tok.encode(text).ids
            ref, ref_logits = ct2.torch_greedy(t5, ids, n, am.EOS_ID)
            res = ct2.translate(tr, [tok.id_to_token(i) for i in ids], n, return_logits_vocab=True)
            got = [to_id[t] for t in res.hypotheses[0]]
            assert len(got) == n and am.EOS_ID not in got  # forced length: </s> masked until n
            if quant == "float32":
                assert got == ref
                for step in range(n):
                    lg = np.asarray(res.logits[0][step], dtype=np.float32).reshape(-1)
                    lg[am.EOS_ID] = ref_logits[step][am.EOS_ID]  # CTranslate2 masks </s> (min length)
                    assert np.max(np.abs(lg - ref_logits[step])) < 1e-4, step


def _inputs(tmp_path, tokens):
    if not os.path.exists(SCREEN):
        pytest.skip(f"no screen {SCREEN}")
    path = tmp_path / "inputs.json"
    cases = [{"id": f"c{i}", "screen": SCREEN, "goal": "", "history": [], "source_text": t, "source_tokens": -1}
             for i, t in enumerate(PROMPTS)]
    path.write_text(json.dumps({"tokens": tokens, "cases": cases}))
    return str(path)


def test_openvino_runs_the_bundle_graphs_to_ort_tokens(tmp_path, capsys):
    pytest.importorskip("openvino")
    from scripts.peers import ov
    if not os.path.exists(os.path.join(TINY, "manifest.json")):
        pytest.skip("no committed tiny bundle")
    inputs = _inputs(tmp_path, 8)
    res = ov.verify(TINY, common.load_inputs(inputs), 1, log=lambda s: None)
    assert all(c["equal"] for c in res["cases"]), res
    assert all(c["first_step_logit_maxdiff"] < 1e-3 for c in res["cases"]), res
    out = tmp_path / "ov.json"
    assert ov.main(["--model", TINY, "--inputs", inputs, "--threads", "1", "--runs", "1", "--warmup", "0",
                    "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["runner"] == "openvino" and doc["tokens"] == 8 and doc["decoder_calls"] == 8
    for st in ("vision", "encoder", "fusion", "first_step", "decode_step"):
        assert doc["stages"][st]["median_ms"] > 0, st


def test_report_rows_for_ct2_and_openvino(tmp_path):
    def doc(text, **stages):
        st = {k: {"median_ms": v} for k, v in stages.items()}
        st["total"], st["text_path"] = {"median_ms": text}, {"median_ms": text}
        return {"model": "base", "threads": 2, "stages": st, "peak_rss_mb": 1000, "decoder_calls": 80,
                "generated_ids": [1, 2, 3]}

    ours = doc(800, vision=1, encoder=100, first_step=20, decode_step=8)
    ours["cases"] = [{"source_tokens": 30}]
    c = doc(1200, generate=1190, first_step=150, decode_step=13)
    c["first_step_includes_encoder"] = True
    o = doc(1500, vision=1, encoder=110, first_step=25, decode_step=15)

    class A:
        tokens, threads, runs, warmup = 80, 2, 1, 0

    text = compare.write_report(str(tmp_path), "base-vtiny", {"ours": ours, "ct2": c, "ct2_int8": dict(c), "ov": o},
                                {}, A)
    assert "| CTranslate2 fp32, text path | – | 1.20 s | 1.50× | – | – | 150.0 ms (incl. encoder) |" in text
    assert "| OpenVINO (bundle's ONNX graphs) | 1.50 s |" in text
    assert "CTranslate2 runs the text path only" in text and "CTranslate2 int8 vs fp32" in text
