"""Train the default Auto-UI model on the simulator's AITW-format dataset, on CPU.

  python -m scripts.train_sim --data .cache/simdata --out .cache/simtrain [--minutes 45] [--bundle models/default]

The data is what `autoui dataset` writes (gzip TFRecords of tf.train.Example steps, read
here without TensorFlow). The model is Auto-UI's architecture at a small size: a T5 text
model with image_dense / mha_layer / gate_dense fusion (scripts.autoui_model) and a
BLIP-2-architecture vision tower (scripts.vision) producing the one image vector, trained
jointly from scratch. Prompt and target are Auto-UI's exactly (history window 8, plan of
the current and up to 3 next action types, fixed scroll map); prompts longer than 512
tokens drop their oldest previous actions, as the Go engine's default does.

Outputs in --out: checkpoint/ (Auto-UI-style save_pretrained + tokenizer.json),
vision/ (a local BLIP-2 directory), train_log.jsonl, and with --bundle an exported bundle
(python -m scripts.export). Preprocessed 224x224 screens are cached next to the data.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from PIL import Image

from . import autoui_model as am
from . import vision as vis
from .sim_data import Step, count_steps, load_split, stream_episodes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOKENIZER = os.path.join(ROOT, "models", "testdata", "tokenizer", "tokenizer.json")

# Model sizes. "default" is what models/default is trained with; "smoke" is for tests.
MODEL_SIZES = {
    "default": dict(t5=dict(d_model=192, d_kv=32, d_ff=512, num_layers=2, num_decoder_layers=2, num_heads=6),
                    # 448 px input with 32 px patches: as many patches as 224/16 (same transformer cost),
                    # but a row label is ~7 px tall instead of ~4 and becomes legible.
                    vision=dict(hidden_size=128, num_hidden_layers=3, num_attention_heads=4, intermediate_size=512,
                                image_size=448, patch_size=32)),
    "smoke": dict(t5=dict(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4),
                  vision=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                              patch_size=32)),
}


def family_of(episode_id: str) -> str:
    # sim_<family>_<seed>
    return episode_id[len("sim_"):].rsplit("_", 1)[0]


# ---------------------------------------------------------------- samples

def resize(step: Step, size: int) -> np.ndarray:
    """The uint8 size x size RGB image BlipImageProcessor normalizes (PIL bicubic, antialiased)."""
    img = Image.frombytes("RGB", (step.width, step.height), step.pixels)
    return np.asarray(img.resize((size, size), Image.BICUBIC), dtype=np.uint8)


def build_source_ids(tok, goal: str, history: list, max_len: int = am.MAX_SOURCE_TOKENS) -> list[int]:
    """Source ids; over max_len, drop the oldest previous actions first (the engine's keep-goal)."""
    hist = list(history)[-am.HISTORY_WINDOW:]
    while True:
        ids = tok(am.source_text(goal, hist), add_special_tokens=True)["input_ids"]
        if len(ids) <= max_len or not hist:
            return ids[:max_len]
        hist = hist[1:]


def episode_samples(tok, steps: list[Step]):
    """(source ids, target ids) per step: gold history, plan of the current + 3 next types."""
    acts = [am.normalize_action(s.action, "fixed") for s in steps]
    out = []
    for i, s in enumerate(steps):
        plan = [a.action_type for a in acts[i:i + 4]]
        src = build_source_ids(tok, s.goal, acts[:i])
        tgt = tok(am.target_text(plan, acts[i]), add_special_tokens=True)["input_ids"][:am.MAX_TARGET_TOKENS]
        out.append((src, tgt))
    return out


@dataclass
class SplitData:
    images: np.ndarray                 # (n, size, size, 3) uint8
    src: list = field(default_factory=list)
    tgt: list = field(default_factory=list)
    episode: list = field(default_factory=list)  # episode id per sample
    ann: list = field(default_factory=list)      # annotations per sample (auxiliary layout targets)
    aux: object = None                           # (presence, yx) arrays over the label vocabulary


def prepare(data_dir: str, split: str, tok, cache_dir: str, limit_episodes: int = 0, log=print,
            size: int = vis.IMAGE_SIZE) -> SplitData:
    """Samples of a split, with the resized screens cached in cache_dir (keyed by the split's
    record files' sizes and mtimes) so later runs skip decoding."""
    d = os.path.join(data_dir, split)
    key = json.dumps(sorted((n, os.path.getsize(os.path.join(d, n))) for n in os.listdir(d)) + [limit_episodes])
    os.makedirs(cache_dir, exist_ok=True)
    img_path = os.path.join(cache_dir, f"{split}_{size}.npy")
    meta_path = os.path.join(cache_dir, f"{split}_{size}_meta.json" if size != 224 else f"{split}_meta.json")
    t0 = time.time()
    if os.path.exists(meta_path) and os.path.exists(img_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta["key"] == key:
            images = np.load(img_path, mmap_mode="r")
            data = SplitData(images)
            eps = meta["episodes"]
            if eps and "ann" not in eps[0][1][0]:  # a cache from before annotations were kept
                by_id = {st[0].episode_id: st for st in load_split(data_dir, split, limit_episodes=limit_episodes,
                                                                   keep_pixels=False)}
                for eid, steps in eps:
                    for i, s in enumerate(steps):
                        s["ann"] = by_id[eid][i].ann
                with open(meta_path, "w") as f:
                    json.dump(meta, f)
            for eid, steps in eps:
                for src, tgt in episode_samples(tok, [Step(eid, i, s["goal"], am.Action.from_json(s["action"]))
                                                       for i, s in enumerate(steps)]):
                    data.src.append(src)
                    data.tgt.append(tgt)
                    data.episode.append(eid)
                data.ann += [s["ann"] for s in steps]
            log(f"{split}: {len(data.src)} samples from cache in {time.time() - t0:.1f}s")
            return data
    n = count_steps(data_dir, split, limit_episodes)
    images = np.lib.format.open_memmap(img_path + ".tmp", mode="w+", dtype=np.uint8,
                                       shape=(n, size, size, 3))
    data = SplitData(images)
    meta_eps = []
    k = 0
    for steps in stream_episodes(data_dir, split, limit_episodes):
        for s in steps:
            images[k] = resize(s, size)
            k += 1
        for src, tgt in episode_samples(tok, steps):
            data.src.append(src)
            data.tgt.append(tgt)
            data.episode.append(steps[0].episode_id)
        data.ann += [s.ann for s in steps]
        meta_eps.append([steps[0].episode_id, [{"goal": s.goal, "action": s.action.to_json(), "ann": s.ann}
                                               for s in steps]])
    assert k == n, (k, n)
    images.flush()
    del images
    os.replace(img_path + ".tmp", img_path)
    with open(meta_path, "w") as f:
        json.dump({"key": key, "episodes": meta_eps}, f)
    data.images = np.load(img_path, mmap_mode="r")
    log(f"{split}: {len(meta_eps)} episodes, {n} samples decoded and cached in {time.time() - t0:.1f}s")
    return data


MEAN = np.array(vis.MEAN, dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array(vis.STD, dtype=np.float32).reshape(1, 3, 1, 1)


def pixel_batch(images: np.ndarray, idx) -> torch.Tensor:
    x = np.asarray(images[idx], dtype=np.float32).transpose(0, 3, 1, 2)
    x = (x * np.float32(vis.RESCALE) - MEAN) / STD
    return torch.from_numpy(np.ascontiguousarray(x))


def pad(seqs, value=0):
    n = max(len(s) for s in seqs)
    out = torch.full((len(seqs), n), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def batches(data: SplitData, batch_size: int, rng: random.Random):
    """Endless batches of indices, bucketed by source length so little padding is computed."""
    n = len(data.src)
    while True:
        order = list(range(n))
        rng.shuffle(order)
        chunk = batch_size * 32
        out = []
        for c in range(0, n, chunk):
            part = sorted(order[c:c + chunk], key=lambda i: len(data.src[i]))
            out += [part[b:b + batch_size] for b in range(0, len(part), batch_size)]
        rng.shuffle(out)
        yield from out


# ---------------------------------------------------------------- model

def build_model(size: str, vocab: int, seed: int):
    spec = MODEL_SIZES[size]
    torch.manual_seed(seed)
    cfg = am.t5_config("tiny", vocab)
    for k, v in spec["t5"].items():
        setattr(cfg, k, v)
    cfg.dropout_rate = 0.0
    vcfg = vis.vision_config("tiny")
    for k, v in spec["vision"].items():
        setattr(vcfg, k, v)
    from transformers import Blip2VisionModel
    tower = vis.VisionTower(Blip2VisionModel(vcfg))
    model = am.AutoUIModel(cfg, image_dim=vcfg.hidden_size)
    # HF initializes an untied lm_head with std 1, which makes the first logits ~sqrt(d_model)
    # large (initial loss ~50); d_model**-0.5 starts near uniform and trains much faster.
    torch.nn.init.normal_(model.lm_head.weight, std=cfg.d_model ** -0.5)
    return model, tower


# ---------------------------------------------------------------- auxiliary layout loss
#
# The image reaches the text model as ONE pooled vector, so the vision tower must put the
# whole layout into it ("where is each app, row, item"), and the only training signal for
# that in Auto-UI's loss is the few coordinate tokens of the target. A training-only head
# on the pooled vector that predicts, for the most frequent annotation texts, whether each
# is on screen and where its centre is gives the tower a dense signal for exactly that.
# The head is dropped at export: the exported architecture is Auto-UI's.

def label_vocab(data: SplitData, k: int) -> list:
    import collections
    c = collections.Counter(t for ann in data.ann for t, _, _ in ann)
    return [t for t, _ in c.most_common(k)]


def set_aux_targets(data: SplitData, vocab: list) -> None:
    index = {t: i for i, t in enumerate(vocab)}
    n, k = len(data.ann), len(vocab)
    pres = np.zeros((n, k), dtype=np.float32)
    yx = np.zeros((n, k, 2), dtype=np.float32)
    for j, ann in enumerate(data.ann):
        for t, y, x in ann:
            i = index.get(t)
            if i is not None and pres[j, i] == 0:
                pres[j, i] = 1
                yx[j, i] = (y, x)
    data.aux = (pres, yx)


class AuxHead(torch.nn.Module):
    """Pooled image vector -> per label: on-screen logit and centre (y, x). An MLP, so the
    pooled vector may hold the layout as any code the text model can also learn to read."""

    def __init__(self, dim: int, k: int, hidden: int = 512):
        super().__init__()
        self.k = k
        self.proj = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, 3 * k))

    def outputs(self, feats: torch.Tensor):
        out = self.proj(feats).view(-1, self.k, 3)
        return out[..., 0], torch.sigmoid(out[..., 1:])

    def loss(self, feats: torch.Tensor, pres: torch.Tensor, yx: torch.Tensor) -> torch.Tensor:
        logit, pyx = self.outputs(feats)
        bce = torch.nn.functional.binary_cross_entropy_with_logits(logit, pres)
        err = (pyx - yx).abs().sum(-1)
        l1 = (err * pres).sum() / pres.sum().clamp(min=1)
        return bce + 10 * l1


@torch.no_grad()
def aux_metrics(tower, aux_head, data: SplitData, n: int, batch_size: int = 64) -> dict:
    """On the first n samples: presence accuracy, and the share of present labels whose
    predicted centre is within 0.05 (L1) of the truth."""
    tower.eval()
    pres_ok = pres_n = near = present = 0
    sample = np.linspace(0, len(data.ann) - 1, min(n, len(data.ann))).astype(int)  # spread over families
    for b in range(0, len(sample), batch_size):
        idx = sample[b:b + batch_size]
        logit, pyx = aux_head.outputs(tower(pixel_batch(data.images, idx)))
        pres, yx = torch.from_numpy(data.aux[0][idx]), torch.from_numpy(data.aux[1][idx])
        pres_ok += int(((logit > 0).float() == pres).sum())
        pres_n += pres.numel()
        close = ((pyx - yx).abs().sum(-1) < 0.05).float() * pres
        near += int(close.sum())
        present += int(pres.sum())
    tower.train()
    return {"presence_acc": pres_ok / max(1, pres_n), "centre_within_0.05": near / max(1, present)}


def pretrain_vision(tower, aux_head, train_data: SplitData, val_data: SplitData, minutes: float, batch_size: int,
                    lr: float, seed: int, log) -> None:
    """Vision tower + layout head alone (no text model: ~3x cheaper per image), so joint
    training starts from a tower whose pooled vector already encodes the layout."""
    params = list(tower.parameters()) + list(aux_head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    rng = np.random.default_rng(seed)
    t0 = time.time()
    step = 0
    losses = []
    while time.time() - t0 < minutes * 60:
        frac = (time.time() - t0) / (minutes * 60)
        for g in opt.param_groups:
            g["lr"] = lr * (min(1.0, frac / 0.05) if frac < 0.05 else 0.5 * (1 + math.cos(math.pi * frac)))
        idx = np.sort(rng.choice(len(train_data.ann), size=batch_size, replace=False))
        pres, yx = train_data.aux
        loss = aux_head.loss(tower(pixel_batch(train_data.images, idx)), torch.from_numpy(pres[idx]),
                             torch.from_numpy(yx[idx]))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss))
        step += 1
        if step % 25 == 0:
            log(f"vision pretrain step {step} aux {np.mean(losses[-25:]):.4f} {time.time() - t0:.0f}s",
                pretrain_step=step, aux=float(np.mean(losses[-25:])), seconds=round(time.time() - t0, 1))
    m = aux_metrics(tower, aux_head, val_data, 512)
    log(f"vision pretrain done: {step} steps; validation {json.dumps(m)}", pretrain_done=step, **m)


def forward_loss(model, tower, data: SplitData, idx, aux_head=None):
    src = pad([data.src[i] for i in idx])
    tgt = pad([data.tgt[i] for i in idx])
    labels = tgt.masked_fill(tgt == am.PAD_ID, -100)
    feats = tower(pixel_batch(data.images, idx))
    out = model(input_ids=src, attention_mask=(src != am.PAD_ID).long(), image_features=feats, labels=labels)
    aux = None
    if aux_head is not None:
        pres, yx = data.aux
        aux = aux_head.loss(feats, torch.from_numpy(pres[idx]), torch.from_numpy(yx[idx]))
    return out.loss, out.logits, labels, aux


@torch.no_grad()
def token_accuracy(model, tower, data: SplitData, n: int, batch_size: int) -> float:
    """Teacher-forced target token accuracy on the first n samples (a cheap progress signal)."""
    model.eval()
    tower.eval()
    right = total = 0
    for b in range(0, min(n, len(data.src)), batch_size):
        idx = list(range(b, min(b + batch_size, n, len(data.src))))
        _, logits, labels, _ = forward_loss(model, tower, data, idx)
        m = labels != -100
        right += int(((logits.argmax(-1) == labels) & m).sum())
        total += int(m.sum())
    model.train()
    tower.train()
    return right / max(1, total)


def save(model, tower, tok_path: str, out: str) -> None:
    from .export import write_blip2_vision_dir
    ck, vd = os.path.join(out, "checkpoint"), os.path.join(out, "vision")
    for d in (ck, vd):
        if os.path.exists(d + ".tmp"):
            shutil.rmtree(d + ".tmp")
    am.save_checkpoint(model, ck + ".tmp")
    shutil.copyfile(tok_path, os.path.join(ck + ".tmp", "tokenizer.json"))
    write_blip2_vision_dir(tower, vd + ".tmp")
    for d in (ck, vd):
        if os.path.exists(d):
            shutil.rmtree(d)
        os.replace(d + ".tmp", d)


def pick_threads(setting: str) -> int:
    """'auto': 2 threads when the machine is otherwise idle, else 1 (on a shared 2-core box,
    a second intra-op thread that keeps getting descheduled makes every op wait for it)."""
    if setting != "auto":
        return int(setting)
    cores = os.cpu_count() or 1
    return max(1, min(cores, 2)) if os.getloadavg()[0] < cores + 0.5 else 1


def train(args) -> dict:
    threads = pick_threads(args.threads)
    torch.set_num_threads(threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, "train_log.jsonl")
    logf = open(log_path, "a")

    def log(msg, **rec):
        print(msg, file=sys.stderr, flush=True)
        if rec:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()

    if args.tokenizer == "sim":
        from . import sim_tokenizer
        t0 = time.time()
        info = sim_tokenizer.build(args.data, os.path.join(args.out, "tokenizer"), limit_episodes=args.limit_episodes)
        args.tokenizer = info["path"]
        log(f"tokenizer trained on the training split: {info['vocab_size']} ids in {time.time() - t0:.0f}s")
    tok = am.load_tokenizer(args.tokenizer)
    size = MODEL_SIZES[args.size]["vision"].get("image_size", vis.IMAGE_SIZE)
    cache = args.cache or os.path.join(args.data, "cache224")
    train_data = prepare(args.data, "train", tok, cache, args.limit_episodes, log, size)
    val_data = prepare(args.data, "validation", tok, cache, args.limit_episodes, log, size)
    model, tower = build_model(args.size, am.round_vocab(len(tok)), args.seed)
    n_params = sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in tower.parameters())
    log(f"model {args.size}: {n_params / 1e6:.2f}M parameters ({n_params * 4 / 1e6:.1f} MB fp32)")
    aux_head = None
    if args.aux_labels:
        vocab = label_vocab(train_data, args.aux_labels)
        set_aux_targets(train_data, vocab)
        torch.manual_seed(args.seed + 1)
        aux_head = AuxHead(tower.config.hidden_size, len(vocab))
        set_aux_targets(val_data, vocab)
        log(f"auxiliary layout head over {len(vocab)} annotation texts (training only)")
        if args.init_vision:
            tower = vis.load_vision(os.path.join(args.init_vision, "vision")).train()
            aux_head.load_state_dict(torch.load(os.path.join(args.init_vision, "aux_head.pt"), weights_only=True))
            log(f"vision tower and layout head from {args.init_vision}: validation "
                f"{json.dumps(aux_metrics(tower, aux_head, val_data, 512))}")
        if args.pretrain_vision:
            pretrain_vision(tower, aux_head, train_data, val_data, args.pretrain_vision, 2 * args.batch, args.lr,
                            args.seed, log)
            from .export import write_blip2_vision_dir
            write_blip2_vision_dir(tower, os.path.join(args.out, "vision"))
            torch.save(aux_head.state_dict(), os.path.join(args.out, "aux_head.pt"))
    if not args.minutes and not args.steps:
        return {"pretrain_vision_minutes": args.pretrain_vision}
    model.train()
    tower.train()
    params = list(model.parameters()) + list(tower.parameters()) + (list(aux_head.parameters()) if aux_head else [])
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98))
    rng = random.Random(args.seed)
    it = batches(train_data, args.batch, rng)
    budget = args.minutes * 60 if args.minutes else None
    t0 = time.time()
    last_save = t0
    step = 0
    losses = []
    aux_losses = []

    def progress() -> float:
        if budget:
            return min(1.0, (time.time() - t0) / budget)
        return min(1.0, step / args.steps)

    while True:
        frac = progress()
        if frac >= 1.0 or (args.steps and step >= args.steps):
            break
        # Linear warmup over the first 3%, then cosine decay to 5% of the peak, by
        # progress through the budget (time when --minutes is given).
        w = min(1.0, frac / 0.03) if frac < 0.03 else 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * (frac - 0.03) / 0.97))
        for g in opt.param_groups:
            g["lr"] = args.lr * max(w, 0.02)
        idx = next(it)
        loss, _, _, aux = forward_loss(model, tower, train_data, idx, aux_head)
        opt.zero_grad(set_to_none=True)
        (loss + args.aux_weight * aux if aux is not None else loss).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        losses.append(float(loss))
        aux_losses.append(float(aux) if aux is not None else 0.0)
        if step % args.log_every == 0:
            t = pick_threads(args.threads)
            if t != threads:
                threads = t
                torch.set_num_threads(t)
            el = time.time() - t0
            log(f"step {step} loss {np.mean(losses[-args.log_every:]):.4f} aux {np.mean(aux_losses[-args.log_every:]):.4f} lr {opt.param_groups[0]['lr']:.2e} "
                f"{el:.0f}s ({el / step:.2f}s/step, {threads} threads)",
                step=step, loss=float(np.mean(losses[-args.log_every:])), aux=float(np.mean(aux_losses[-args.log_every:])), lr=opt.param_groups[0]["lr"], seconds=round(el, 1))
        if args.save_every and time.time() - last_save > args.save_every * 60:
            save(model, tower, args.tokenizer, args.out)
            last_save = time.time()
            acc = token_accuracy(model, tower, val_data, args.val_samples, args.batch)
            log(f"saved at step {step}; validation token accuracy {acc:.4f}", step=step, val_token_acc=acc,
                seconds=round(time.time() - t0, 1))
    seconds = time.time() - t0
    model.eval()
    tower.eval()
    save(model, tower, args.tokenizer, args.out)
    acc = token_accuracy(model, tower, val_data, args.val_samples, args.batch)
    stats = {"size": args.size, "params": n_params, "steps": step, "batch": args.batch,
             "samples_seen": step * args.batch, "train_samples": len(train_data.src),
             "epochs": round(step * args.batch / max(1, len(train_data.src)), 2), "seconds": round(seconds, 1),
             "final_loss": float(np.mean(losses[-50:])) if losses else None, "val_token_acc": acc,
             "threads": args.threads, "lr": args.lr, "aux_labels": args.aux_labels, "aux_weight": args.aux_weight}
    log(f"done: {json.dumps(stats)}", done=stats)
    with open(os.path.join(args.out, "train_stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
        f.write("\n")
    logf.close()
    return stats


def export(out: str, bundle: str, name: str) -> None:
    cmd = [sys.executable, "-m", "scripts.export", "--checkpoint", os.path.join(out, "checkpoint"),
           "--vision", os.path.join(out, "vision"), "--out", bundle, "--scroll-map", "fixed", "--name", name]
    subprocess.run(cmd, check=True, cwd=ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="dataset directory written by `autoui dataset`")
    ap.add_argument("--out", required=True, help="training output directory (checkpoint/, vision/, logs)")
    ap.add_argument("--size", choices=sorted(MODEL_SIZES), default="default")
    ap.add_argument("--minutes", type=float, default=0, help="wall-time budget; the LR schedule follows elapsed time")
    ap.add_argument("--steps", type=int, default=0, help="step budget (deterministic schedule) when --minutes is 0")
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", default="auto", help="torch threads: a number, or auto (2 when the machine is idle, else 1)")
    ap.add_argument("--limit-episodes", type=int, default=0, help="use only the first N episodes of each family")
    ap.add_argument("--cache", help="preprocessed screen cache (default DATA/cache224)")
    ap.add_argument("--tokenizer", default="sim",
                    help="tokenizer.json, or 'sim' to train one on the training split (scripts.sim_tokenizer)")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--save-every", type=float, default=10, help="checkpoint every N minutes (0: only at the end)")
    ap.add_argument("--val-samples", type=int, default=256)
    ap.add_argument("--aux-labels", type=int, default=256,
                    help="training-only layout head over this many annotation texts (0: off)")
    ap.add_argument("--aux-weight", type=float, default=1.0)
    ap.add_argument("--pretrain-vision", type=float, default=0,
                    help="first train the vision tower on the layout head alone for this many minutes")
    ap.add_argument("--init-vision", help="start from the vision tower and layout head of an earlier --out")
    ap.add_argument("--bundle", help="export the trained model to this bundle directory")
    ap.add_argument("--name", default="default", help="bundle name")
    args = ap.parse_args(argv)
    if not args.minutes and not args.steps and not args.pretrain_vision:
        ap.error("give --minutes, --steps or --pretrain-vision")
    train(args)
    if args.bundle:
        export(args.out, args.bundle, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
