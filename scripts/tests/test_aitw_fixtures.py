"""The AITW fixtures are byte-deterministic and readable the way AITW and Auto-UI read them."""

import gzip
import hashlib
import os
import pickle
import struct

import numpy as np
import pytest

from scripts import aitw_fixtures as fx


def _digest(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def test_deterministic(tmp_path):
    fx.build(str(tmp_path / "a"))
    fx.build(str(tmp_path / "b"))
    a, b = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    assert a and a == b


def test_size_budget(tmp_path):
    fx.build(str(tmp_path))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp_path) for f in fs)
    assert total < 2 * 1024 * 1024


def test_crc32c_known_value():
    # RFC 3720 test vector: 32 bytes of zeros.
    assert fx.crc32c(bytes(32)) == 0x8A9136AA
    assert fx.crc32c(b"123456789") == 0xE3069283


def _records(path):
    raw = gzip.open(path).read()
    pos, out = 0, []
    while pos < len(raw):
        (n,) = struct.unpack_from("<Q", raw, pos)
        assert struct.unpack_from("<I", raw, pos + 8)[0] == fx.masked_crc(raw[pos:pos + 8])
        payload = raw[pos + 12:pos + 12 + n]
        assert struct.unpack_from("<I", raw, pos + 12 + n)[0] == fx.masked_crc(payload)
        out.append(payload)
        pos += 16 + n
    return out


def test_records_parse_as_examples(tmp_path):
    fx.build(str(tmp_path))
    recs = _records(tmp_path / "records" / "general" / "general-00000-of-00001.tfrecord.gz")
    assert len(recs) == 13
    ex = fx.Example()
    ex.ParseFromString(recs[0])
    f = ex.features.feature
    h, w, c = (f[k].int64_list.value[0] for k in ("image/height", "image/width", "image/channels"))
    assert len(f["image/encoded"].bytes_list.value[0]) == h * w * c
    assert len(f["results/yx_touch"].float_list.value) == 2
    assert len(f["image/ui_annotations_positions"].float_list.value) % 4 == 0


def test_torch_pickle_matches_numpy(tmp_path):
    torch = pytest.importorskip("torch")
    fx.build(str(tmp_path))
    with open(tmp_path / "autoui" / "general_blip_test.obj", "rb") as f:
        np_eps = pickle.load(f)
    with open(tmp_path / "autoui" / "general_blip_torch_test.obj", "rb") as f:
        t_eps = pickle.load(f)
    assert len(np_eps) == len(t_eps)
    for a, b in zip(np_eps, t_eps):
        assert a["episode_id"] == b["episode_id"]
        for sa, sb in zip(a["data"], b["data"]):
            assert isinstance(sb["image"], torch.Tensor) and sb["image"].dtype == torch.float16
            np.testing.assert_array_equal(sa["image"].astype(np.float16), sb["image"].numpy())
            assert sa["result_action"] == sb["result_action"]
