"""The preprocessing goldens in engine/preprocess/testdata are reproducible."""

import gzip
import io

import numpy as np
from PIL import Image

from scripts import preprocess_golden as pg


def test_goldens_reproduce_byte_for_byte(tmp_path):
    pg.main(["--out", str(tmp_path)])
    built = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in pg.DEFAULT_OUT.iterdir())
    assert built == committed
    for name in built:
        assert (tmp_path / name).read_bytes() == (pg.DEFAULT_OUT / name).read_bytes(), name


def test_goldens_are_consistent():
    """Each tensor is the normalized PIL resize, and the budget holds."""
    for name, _, _ in pg.cases():
        resized = np.asarray(Image.open(pg.DEFAULT_OUT / f"{name}.resized.png"))
        with gzip.open(pg.DEFAULT_OUT / f"{name}.pixel_values.npy.gz") as f:
            pv = np.load(io.BytesIO(f.read()))
        assert pv.dtype == np.dtype("<f4") and pv.shape == (3, pg.SIZE, pg.SIZE)
        mean = np.array(pg.MEAN, np.float32)[:, None, None]
        std = np.array(pg.STD, np.float32)[:, None, None]
        scaled = (resized.astype(np.float64) * (1 / 255)).astype(np.float32).transpose(2, 0, 1)
        np.testing.assert_array_equal((scaled - mean) / std, pv)
    total = sum(p.stat().st_size for p in pg.DEFAULT_OUT.iterdir())
    assert total < 3_000_000, total
