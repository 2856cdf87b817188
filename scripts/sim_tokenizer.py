"""A T5 (SentencePiece unigram) tokenizer for the simulator's task suite.

  python -m scripts.sim_tokenizer --data .cache/simdata --out DIR [--vocab 3000]

The fixture tokenizer (scripts.tokenizer_fixture) is trained on generic AITW-shaped text, so
the simulator's goal words (contact names, search queries, setting names) fall apart into
single characters, and a small model must learn to copy typed text character by character.
This one is trained on the training split's goals, prompts and targets, so those words are
whole pieces and typing one is copying a few tokens. Only the training split is read: test
goals may still split into smaller pieces, which is what a real deployment sees too.

Writes DIR/spiece.model and DIR/tokenizer.json (the current Hugging Face layout, as
transformers 4.46 converts it), plus DIR/golden_ids.json: Hugging Face ids for the
validation split's prompts and targets, which the Go tokenizer must reproduce.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

from . import autoui_model as am
from . import tokenizer_fixture as tf
from .sim_data import load_split

DEFAULT_VOCAB = 3000


def _samples(data_dir: str, split: str, limit_episodes: int = 0):
    """(goal, source text, target text, typed text) per step of a split, gold history."""
    for steps in load_split(data_dir, split, limit_episodes=limit_episodes, keep_pixels=False):
        acts = [am.normalize_action(s.action, "fixed") for s in steps]
        for i, s in enumerate(steps):
            plan = [a.action_type for a in acts[i:i + 4]]
            yield (s.goal, am.source_text(s.goal, acts[:i][-am.HISTORY_WINDOW:]),
                   am.target_text(plan, acts[i]), acts[i].typed_text)


def corpus(data_dir: str, limit_episodes: int = 0) -> list[str]:
    # Distinct lines only: the action format repeats in every target and prompt, and would
    # otherwise spend the vocabulary on format fragments instead of goal words.
    seen, lines = set(), []
    for goal, src, tgt, typed in _samples(data_dir, "train", limit_episodes):
        for text in (goal, tgt, typed):
            if text and text not in seen:
                seen.add(text)
                lines.append(text)
    return lines + tf.coverage_lines(random.Random(tf.SEED))


def build(data_dir: str, out_dir: str, vocab: int = DEFAULT_VOCAB, limit_episodes: int = 0,
          golden_cases: int = 400) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    spiece = os.path.join(out_dir, "spiece.model")
    # hard_vocab_limit off: a small corpus may not support the requested size.
    tf.train_spiece(spiece, corpus(data_dir, limit_episodes), vocab_size=vocab, hard_vocab_limit=False)
    path = os.path.join(out_dir, "tokenizer.json")
    tf.dump_json(path, tf.fast_tokenizer_json(spiece, legacy=False))
    tok = am.load_tokenizer(path)

    # Goldens from the validation split (never trained on), deterministic order.
    cases = []
    for goal, src, tgt, typed in _samples(data_dir, "validation", limit_episodes):
        if len(cases) >= golden_cases:
            break
        for text in (src, tgt):
            cases.append({"text": text, "ids": tok(text, add_special_tokens=True)["input_ids"]})
    golden = {"tokenizer": "tokenizer.json", "vocab_size": len(tok), "encode": cases}
    tf.dump_golden(os.path.join(out_dir, "golden_ids.json"), golden)
    return {"vocab_size": len(tok), "golden": len(cases), "path": path}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset directory written by `autoui dataset`")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--vocab", type=int, default=DEFAULT_VOCAB, help="SentencePiece pieces (before 100 extra ids)")
    ap.add_argument("--limit-episodes", type=int, default=0)
    args = ap.parse_args(argv)
    info = build(args.data, args.out, args.vocab, args.limit_episodes)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
