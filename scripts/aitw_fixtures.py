"""Write small AITW-format fixtures into aitw/testdata/ (deterministic, no TensorFlow).

Records are gzip-compressed TFRecord files holding tf.train.Example protos with the
real AITW feature names and types (raw uint8 HxWxC pixels in image/encoded). The
Example message classes are built at run time from a hand-written descriptor of
TensorFlow's example.proto/feature.proto, so only `protobuf` is needed; the TFRecord
framing uses a pure-Python CRC32C.

Also written: corrupt files (bad payload CRC, bad header CRC, truncated record) with
the expected byte offsets, AITW and Auto-UI split files, Auto-UI-style feature
pickles (numpy arrays; and one in the torch layout fetch_features.py produces), and
a predictions file with a known mix of right, wrong and missing steps.

Run from the repository root:  python -m scripts.aitw_fixtures [--out aitw/testdata]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import io
import json
import os
import pickle
import random
import struct

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SUBSETS = ["general", "install", "google_apps", "single", "web_shopping"]
HEIGHT, WIDTH, CHANNELS = 128, 64, 3
FEATURE_DIM = 64  # the tiny bundle's image_dim

TYPE, DUAL_POINT, PRESS_BACK, PRESS_HOME, PRESS_ENTER, COMPLETE, IMPOSSIBLE = 3, 4, 5, 6, 7, 10, 11
NAMES = {3: "TYPE", 4: "DUAL_POINT", 5: "PRESS_BACK", 6: "PRESS_HOME", 7: "PRESS_ENTER",
         10: "STATUS_TASK_COMPLETE", 11: "STATUS_TASK_IMPOSSIBLE"}


# ---------------------------------------------------------------- protobuf

def _example_classes():
    """tf.train.Example and friends from a descriptor equivalent to TensorFlow's protos."""
    fdp = descriptor_pb2.FileDescriptorProto(name="autoui_fixture/example.proto", package="tensorflow", syntax="proto3")
    L = descriptor_pb2.FieldDescriptorProto

    def msg(name, fields, nested=()):
        m = fdp.message_type.add(name=name)
        for fname, num, ftype, label, type_name, packed in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
            if packed:
                f.options.packed = True
        for n in nested:
            m.nested_type.add().CopyFrom(n)
        return m

    msg("BytesList", [("value", 1, L.TYPE_BYTES, L.LABEL_REPEATED, None, False)])
    msg("FloatList", [("value", 1, L.TYPE_FLOAT, L.LABEL_REPEATED, None, True)])
    msg("Int64List", [("value", 1, L.TYPE_INT64, L.LABEL_REPEATED, None, True)])
    feat = msg("Feature", [
        ("bytes_list", 1, L.TYPE_MESSAGE, L.LABEL_OPTIONAL, ".tensorflow.BytesList", False),
        ("float_list", 2, L.TYPE_MESSAGE, L.LABEL_OPTIONAL, ".tensorflow.FloatList", False),
        ("int64_list", 3, L.TYPE_MESSAGE, L.LABEL_OPTIONAL, ".tensorflow.Int64List", False),
    ])
    feat.oneof_decl.add(name="kind")
    for f in feat.field:
        f.oneof_index = 0
    entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
    entry.field.add(name="key", number=1, type=L.TYPE_STRING, label=L.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=L.TYPE_MESSAGE, label=L.LABEL_OPTIONAL, type_name=".tensorflow.Feature")
    entry.options.map_entry = True
    msg("Features", [("feature", 1, L.TYPE_MESSAGE, L.LABEL_REPEATED, ".tensorflow.Features.FeatureEntry", False)], [entry])
    msg("Example", [("features", 1, L.TYPE_MESSAGE, L.LABEL_OPTIONAL, ".tensorflow.Features", False)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


Example = _example_classes()


def make_example(feats: dict) -> bytes:
    ex = Example()
    for key, (kind, values) in feats.items():
        f = ex.features.feature[key]
        if kind == "bytes":
            f.bytes_list.value.extend(values)
        elif kind == "float":
            f.float_list.value.extend(values)
        else:
            f.int64_list.value.extend(values)
    return ex.SerializeToString(deterministic=True)


# ---------------------------------------------------------------- TFRecord

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc(header)) + payload + struct.pack("<I", masked_crc(payload))


def write_gzip(path: str, data: bytes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    buf = io.BytesIO()
    # mtime=0 and no file name in the header: byte-deterministic output.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


# ---------------------------------------------------------------- synthetic episodes

def screen(rng: random.Random) -> bytes:
    """A flat background with a few solid blocks: compresses well, still varied."""
    img = np.zeros((HEIGHT, WIDTH, CHANNELS), dtype=np.uint8)
    img[:] = [rng.randrange(200, 256) for _ in range(CHANNELS)]
    for _ in range(3):
        y, x = rng.randrange(0, HEIGHT - 16), rng.randrange(0, WIDTH - 16)
        img[y:y + 16, x:x + 16] = [rng.randrange(0, 200) for _ in range(CHANNELS)]
    return img.tobytes()


def r4(v: float) -> float:
    return float(np.float32(round(v, 4)))


def make_action(rng: random.Random, kind: str):
    """(type, touch, lift, text) with float32-representable coordinates."""
    if kind == "tap":
        p = [r4(rng.uniform(0.1, 0.9)), r4(rng.uniform(0.1, 0.9))]
        return DUAL_POINT, p, p, ""
    if kind == "swipe_v":
        return DUAL_POINT, [0.8, 0.5], [0.25, 0.5], ""
    if kind == "swipe_h":
        return DUAL_POINT, [0.5, 0.75], [0.5, 0.25], ""
    if kind == "type":
        return TYPE, [-1.0, -1.0], [-1.0, -1.0], rng.choice(["coffee maker", "weather today", "Lowe's"])
    t = {"back": PRESS_BACK, "home": PRESS_HOME, "enter": PRESS_ENTER, "complete": COMPLETE}[kind]
    return t, [-1.0, -1.0], [-1.0, -1.0], ""


PLANS = [
    ["tap", "type", "enter", "complete"],
    ["home", "swipe_v", "tap", "complete"],
    ["tap", "swipe_h", "back", "tap", "complete"],
]
SINGLE_PLANS = [["tap"], ["type"], ["swipe_v"]]


def episodes_for(subset: str, rng: random.Random):
    plans = SINGLE_PLANS if subset == "single" else PLANS
    eps = []
    for i, plan in enumerate(plans):
        ep_id = str(10**19 + rng.randrange(10**18))
        goal = f"{subset} task {i}: open the app and check the settings"
        steps = []
        for sid, kind in enumerate(plan):
            t, touch, lift, text = make_action(rng, kind)
            boxes, texts, types = [], [], []
            for b in range(rng.randrange(0, 4)):
                boxes += [r4(rng.uniform(0, 0.8)), r4(rng.uniform(0, 0.8)), r4(rng.uniform(0.03, 0.1)), r4(rng.uniform(0.1, 0.3))]
                texts.append(f"label {b}")
                types.append(rng.choice(["TEXT", "ICON_SETTINGS", "ICON_HOME"]))
            if kind == "tap":
                # Always one box around the tap, so box matching is exercised.
                boxes += [r4(touch[0] - 0.02), r4(touch[1] - 0.05), 0.04, 0.1]
                texts.append("target")
                types.append("TEXT")
            steps.append({
                "episode_id": ep_id, "goal": goal, "step_id": sid, "episode_length": len(plan),
                "action_type": t, "touch": touch, "lift": lift, "text": text,
                "boxes": boxes, "ui_text": texts, "ui_types": types, "pixels": screen(rng),
            })
        eps.append(steps)
    return eps


def step_example(s: dict) -> bytes:
    return make_example({
        "android_api_level": ("int64", [33]),
        "current_activity": ("bytes", [b"com.google.android.apps.nexuslauncher.NexusLauncherActivity"]),
        "device_type": ("bytes", [b"pixel_6"]),
        "episode_id": ("bytes", [s["episode_id"].encode()]),
        "episode_length": ("int64", [s["episode_length"]]),
        "goal_info": ("bytes", [s["goal"].encode()]),
        "image/channels": ("int64", [CHANNELS]),
        "image/height": ("int64", [HEIGHT]),
        "image/width": ("int64", [WIDTH]),
        "image/encoded": ("bytes", [s["pixels"]]),
        "image/ui_annotations_positions": ("float", s["boxes"]),
        "image/ui_annotations_text": ("bytes", [t.encode() for t in s["ui_text"]]),
        "image/ui_annotations_ui_types": ("bytes", [t.encode() for t in s["ui_types"]]),
        "results/action_type": ("int64", [s["action_type"]]),
        "results/type_action": ("bytes", [s["text"].encode()]),
        "results/yx_touch": ("float", s["touch"]),
        "results/yx_lift": ("float", s["lift"]),
        "step_id": ("int64", [s["step_id"]]),
    })


# ---------------------------------------------------------------- pickles

def numpy_pickle_episodes(eps, rng: random.Random):
    out = []
    for steps in eps:
        data = []
        for s in steps:
            data.append({
                "goal": s["goal"],
                "step_id": s["step_id"],
                "image": np.array([rng.uniform(-1, 1) for _ in range(FEATURE_DIM)], dtype=np.float32),
                "ui_positions": np.reshape(np.array(s["boxes"], dtype=np.float64), (-1, 4)),
                "ui_text": list(s["ui_text"]),
                "ui_type": list(s["ui_types"]),
                "result_touch_yx": list(s["touch"]),
                "result_lift_yx": list(s["lift"]),
                "result_action": [NAMES[s["action_type"]], s["text"]],
            })
        out.append({"episode_id": s["episode_id"], "data": data})
    return out


def _global_bytes(module: str, name: str) -> bytes:
    # Protocol-2 GLOBAL opcode, as torch's legacy serializer writes it.
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def torch_legacy_storage_bytes(values: np.ndarray) -> bytes:
    """torch.save(storage, _use_new_zipfile_serialization=False) of a float16 storage, with a fixed key.

    Layout: pickled magic number, protocol version, sys info, the storage pickle (a
    persistent id ('storage', torch.HalfStorage, key, 'cpu', numel, None)), the list of
    keys, then per key an int64 element count and the raw little-endian data.
    """
    out = io.BytesIO()
    for obj in (0x1950A86A20F9469CFC6C, 1001,
                {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        pickle.dump(obj, out, protocol=2)
    # The storage pickle: PROTO 2, MARK, 'storage', GLOBAL torch.HalfStorage, key, 'cpu', n, None, TUPLE, BINPERSID, STOP.
    p = io.BytesIO()
    p.write(b"\x80\x02(")
    p.write(pickle.dumps("storage", protocol=2)[2:-1])
    p.write(_global_bytes("torch", "HalfStorage"))
    p.write(pickle.dumps("0", protocol=2)[2:-1])
    p.write(pickle.dumps("cpu", protocol=2)[2:-1])
    p.write(pickle.dumps(len(values), protocol=2)[2:-1])
    p.write(b"NtQ.")
    out.write(p.getvalue())
    pickle.dump(["0"], out, protocol=2)
    out.write(struct.pack("<q", len(values)))
    out.write(values.astype("<f2").tobytes())
    return out.getvalue()


class _LegacyStorage:
    """Pickles like a torch storage does under plain pickle: _load_from_bytes(legacy torch.save bytes)."""

    def __init__(self, values: np.ndarray):
        self.blob = torch_legacy_storage_bytes(values)

    def __reduce__(self):
        import torch.storage

        return torch.storage._load_from_bytes, (self.blob,)


class _HalfTensor:
    """Pickles like a 1-D CPU float16 torch tensor (what fetch_features.py stores as "image")."""

    def __init__(self, values: np.ndarray):
        self.values = values

    def __reduce__(self):
        import torch._utils

        n = len(self.values)
        return torch._utils._rebuild_tensor_v2, (_LegacyStorage(self.values), 0, (n,), (1,), False, collections.OrderedDict())


def torch_pickle_episodes(np_eps) -> bytes:
    """The numpy episodes with each image feature as a float16 torch tensor. Needs torch importable
    (only to name its functions; the storage bytes are written here, with a fixed key, so the
    output is deterministic where torch.save's would embed a memory address)."""
    eps = []
    for ep in np_eps:
        data = []
        for s in ep["data"]:
            d = dict(s)
            d["image"] = _HalfTensor(s["image"])
            data.append(d)
        eps.append({"episode_id": ep["episode_id"], "data": data})
    return pickle.dumps(eps, protocol=4)


# ---------------------------------------------------------------- predictions

def predictions(all_eps):
    """One line per gold step except a few; a known mix of right and wrong answers."""
    lines = []
    n = 0
    for subset in SUBSETS:
        for steps in all_eps[subset]:
            for s in steps:
                n += 1
                t, touch, lift, text = s["action_type"], list(s["touch"]), list(s["lift"]), s["text"]
                mode = n % 7
                if mode == 3:
                    continue  # missing
                if mode == 5:
                    # wrong type
                    t, touch, lift, text = (PRESS_BACK if t != PRESS_BACK else PRESS_HOME), [-1.0, -1.0], [-1.0, -1.0], ""
                elif mode == 6 and t == DUAL_POINT and touch == lift:
                    # far tap: no box contains both, distance > 0.14
                    touch = [round(1.0 - touch[0], 4), round(1.0 - touch[1], 4)]
                    if abs(touch[0] - s["touch"][0]) + abs(touch[1] - s["touch"][1]) < 0.3:
                        touch = [0.02, 0.02] if s["touch"][0] > 0.5 else [0.98, 0.98]
                    lift = touch
                elif mode == 6 and t == TYPE:
                    text = "something else"
                elif mode == 1 and t == DUAL_POINT and touch == lift:
                    touch = [round(touch[0] + 0.05, 4), round(touch[1] - 0.05, 4)]  # near tap: matches
                    lift = touch
                lines.append({"episode_id": s["episode_id"], "step_id": s["step_id"],
                              "action_type": NAMES[t] if n % 2 else t,
                              "touch_point": touch, "lift_point": lift, "typed_text": text})
    return lines


def opcode_pickles() -> bytes:
    """One object that takes most opcodes, pickled under protocols 0 to 5 back to back: the
    Go reader's opcode walk (aitw/pickleops.go) must end each one exactly where the next starts."""
    shared = ["memo"]
    obj = {
        "text": "h\u00e9llo \u2603", "long text": "x" * 300, "empty": "",
        "bytes": b"ab", "big bytes": bytes(range(256)) * 20, "bytearray": bytearray(b"cd"),
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -70000, 2**31, 2**40, 2**100, -(2**100), 2**3000],
        "floats": [1.5, -0.0, 1e300], "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "set": {1, 2}, "frozenset": frozenset({3}), "consts": [True, False, None],
        "shared": [shared, shared], "nested": [[[[]]], {"k": {"v": [1]}}],
    }
    out = b""
    for proto in range(6):
        o = dict(obj)
        if proto < 3:  # bytes and bytearray pickle through _codecs/builtins globals there
            o.pop("bytearray")
        out += pickle.dumps(o, protocol=proto)
    return out


# ---------------------------------------------------------------- main

def build(out: str):
    rng = random.Random(20240611)
    all_eps = {s: episodes_for(s, rng) for s in SUBSETS}
    written = []

    def put(path, data: bytes):
        full = os.path.join(out, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        written.append(path)

    # Record files: one per subset, steps shuffled so assembly has to sort and group.
    for subset in SUBSETS:
        steps = [s for ep in all_eps[subset] for s in ep]
        random.Random(subset).shuffle(steps)
        raw = b"".join(frame(step_example(s)) for s in steps)
        write_gzip(os.path.join(out, "records", subset, f"{subset}-00000-of-00001.tfrecord.gz"), raw)
        written.append(f"records/{subset}/{subset}-00000-of-00001.tfrecord.gz")

    # Corrupt files, from the first general episode's records.
    recs = [frame(step_example(s)) for s in all_eps["general"][0]]
    offsets = [sum(len(r) for r in recs[:i]) for i in range(len(recs))]
    bad = bytearray(recs[1])
    bad[-1] ^= 0xFF  # payload CRC
    write_gzip(os.path.join(out, "corrupt", "payload_crc.tfrecord.gz"), recs[0] + bytes(bad) + b"".join(recs[2:]))
    bad = bytearray(recs[1])
    bad[8] ^= 0xFF  # header (length) CRC
    write_gzip(os.path.join(out, "corrupt", "header_crc.tfrecord.gz"), recs[0] + bytes(bad) + b"".join(recs[2:]))
    raw = b"".join(recs)
    cut = offsets[-1] + 16 + 100  # mid-payload of the last record
    write_gzip(os.path.join(out, "corrupt", "truncated.tfrecord.gz"), raw[:cut])
    written += ["corrupt/payload_crc.tfrecord.gz", "corrupt/header_crc.tfrecord.gz", "corrupt/truncated.tfrecord.gz"]
    expected = {
        "records": len(recs),
        "offsets": offsets,
        "payload_crc": {"bad_record": 1, "offset": offsets[1]},
        "header_crc": {"bad_record": 1, "offset": offsets[1]},
        "truncated": {"bad_record": len(recs) - 1, "offset": offsets[-1], "size": cut},
    }
    put("corrupt/expected.json", (json.dumps(expected, indent=1, sort_keys=True) + "\n").encode())

    # Splits: episode i of each subset goes to train/validation/test by i.
    std = {"train": [], "validation": [], "test": []}
    autoui = {"train": [], "val": [], "test": []}
    for subset in SUBSETS:
        for i, ep in enumerate(all_eps[subset]):
            std[["test", "train", "validation"][i % 3]].append(ep[0]["episode_id"])
            autoui[["test", "train", "val"][i % 3]].append(ep[0]["episode_id"])
    # AITW's files list ids as strings; one integer here checks both are read.
    std["validation"] = [int(std["validation"][0])] + std["validation"][1:]
    put("splits/standard.json", (json.dumps(std, indent=1) + "\n").encode())
    put("splits/general_texts_splits.json", (json.dumps(autoui, indent=1) + "\n").encode())

    # Auto-UI pickles for the general subset (all episodes, as a "test" file).
    np_eps = numpy_pickle_episodes(all_eps["general"], random.Random(7))
    put("autoui/general_blip_test.obj", pickle.dumps(np_eps, protocol=4))
    put("autoui/general_blip_torch_test.obj", torch_pickle_episodes(np_eps))
    feats = {ep["episode_id"]: [d["image"].tolist() for d in ep["data"]] for ep in np_eps}
    put("autoui/general_features.json", (json.dumps(feats, sort_keys=True) + "\n").encode())
    put("autoui/opcodes.pickles", opcode_pickles())

    # Predictions for the golden score report.
    lines = predictions(all_eps)
    put("predictions.jsonl", "".join(json.dumps(l) + "\n" for l in lines).encode())
    return sorted(written)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join("aitw", "testdata"))
    args = ap.parse_args()
    for p in build(args.out):
        print(os.path.join(args.out, p))


if __name__ == "__main__":
    main()
