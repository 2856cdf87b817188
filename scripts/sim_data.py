"""Reading the simulator's synthetic AITW-style dataset (what `autoui dataset` writes: gzip
TFRecords of tf.train.Example steps), for training (scripts.train_sim) and the tokenizer trained
on it (scripts.sim_tokenizer)."""

from __future__ import annotations

import gzip
import json
import os
import struct
from dataclasses import dataclass, field

from . import autoui_model as am
from .aitw_fixtures import Example, masked_crc


def read_records(path: str, check_crc: bool = False):
    """Payloads of a (gzip) TFRecord file. The length CRC is always checked (8 bytes); the
    payload CRC only on request (pure-Python CRC32C is slow on raw screenshots)."""
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        off = 0
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                raise ValueError(f"{path}: truncated record header at byte {off}")
            (n,) = struct.unpack("<Q", head[:8])
            if struct.unpack("<I", head[8:])[0] != masked_crc(head[:8]):
                raise ValueError(f"{path}: corrupt record header at byte {off}")
            data = f.read(n)
            crc = f.read(4)
            if len(data) < n or len(crc) < 4:
                raise ValueError(f"{path}: truncated record at byte {off}")
            if check_crc and struct.unpack("<I", crc)[0] != masked_crc(data):
                raise ValueError(f"{path}: corrupt record at byte {off}")
            off += 16 + n
            yield data


@dataclass
class Step:
    episode_id: str
    step_id: int
    goal: str
    action: am.Action
    height: int = 0
    width: int = 0
    pixels: bytes = b""
    ann: list = field(default_factory=list)  # [text, centre y, centre x] per annotated element


def annotations(f) -> list:
    pos = list(f["image/ui_annotations_positions"].float_list.value)
    texts = [b.decode() for b in f["image/ui_annotations_text"].bytes_list.value]
    return [[t, round(pos[4 * i] + pos[4 * i + 2] / 2, 4), round(pos[4 * i + 1] + pos[4 * i + 3] / 2, 4)]
            for i, t in enumerate(texts) if t]


def parse_step(payload: bytes) -> Step:
    ex = Example()
    ex.ParseFromString(payload)
    f = ex.features.feature

    def one(name, kind):
        return getattr(f[name], kind).value[0]

    t = am.ACTION_TYPES[int(one("results/action_type", "int64_list"))]
    a = am.Action(t, tuple(f["results/yx_touch"].float_list.value), tuple(f["results/yx_lift"].float_list.value),
                  one("results/type_action", "bytes_list").decode())
    return Step(one("episode_id", "bytes_list").decode(), int(one("step_id", "int64_list")),
                one("goal_info", "bytes_list").decode(), a, int(one("image/height", "int64_list")),
                int(one("image/width", "int64_list")), one("image/encoded", "bytes_list"), annotations(f))


def load_split(data_dir: str, split: str, families=None, limit_episodes: int = 0, keep_pixels: bool = True):
    """Episodes of a split as lists of Steps (pixels included), ordered by episode id."""
    d = os.path.join(data_dir, split)
    eps: dict[str, list[Step]] = {}
    for name in sorted(os.listdir(d)):
        if not name.endswith(".tfrecord.gz"):
            continue
        fam = name[: -len(".tfrecord.gz")]
        if families and fam not in families:
            continue
        for payload in read_records(os.path.join(d, name)):
            s = parse_step(payload)
            if not keep_pixels:
                s.pixels = b""
            eps.setdefault(s.episode_id, []).append(s)
    out = []
    for eid in sorted(eps):
        steps = sorted(eps[eid], key=lambda s: s.step_id)
        out.append(steps)
    if limit_episodes:
        out = out[:limit_episodes]
    return out


def stream_episodes(data_dir: str, split: str, limit_episodes: int = 0):
    """Episodes in file order, one at a time (a split's raw screens do not fit in memory).
    The writer keeps an episode's records together and in step order."""
    d = os.path.join(data_dir, split)
    for name in sorted(os.listdir(d)):
        if not name.endswith(".tfrecord.gz"):
            continue
        done = 0
        cur: list[Step] = []
        for payload in read_records(os.path.join(d, name)):
            s = parse_step(payload)
            if cur and s.episode_id != cur[0].episode_id:
                yield cur
                done += 1
                if limit_episodes and done >= limit_episodes:
                    break
                cur = []
            cur.append(s)
        else:
            if cur:
                yield cur


def count_steps(data_dir: str, split: str, limit_episodes: int = 0) -> int:
    """Steps of a split: from dataset.json when the whole split is used, else by a pass."""
    meta = os.path.join(data_dir, "dataset.json")
    if not limit_episodes and os.path.exists(meta):
        with open(meta) as f:
            return json.load(f)["steps"][split]
    return sum(len(e) for e in stream_episodes(data_dir, split, limit_episodes))
