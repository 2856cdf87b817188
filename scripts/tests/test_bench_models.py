"""scripts.bench_models exports a cached bench bundle again when its format or graphs are older
than the exporter's, and keeps it otherwise."""

import json

from scripts import bench_models as bm
from scripts import export


def _write(path, **exporter_extra):
    path.mkdir(exist_ok=True)
    m = {"format_version": export.FORMAT_VERSION,
         "exporter": {"source": bm.source("base", "vitg"), **exporter_extra}}
    (path / "manifest.json").write_text(json.dumps(m))


def test_up_to_date_follows_format_and_graphs_revision(tmp_path):
    b = tmp_path / "base-vitg"
    _write(b, graphs_revision=export.GRAPHS_REVISION)
    assert bm.up_to_date(str(b), "base", "vitg")
    assert not bm.up_to_date(str(b), "large", "vitg")  # another source
    _write(b)  # written before graphs_revision existed: revision 1
    assert not bm.up_to_date(str(b), "base", "vitg")
    (b / "manifest.json").write_text("{")
    assert not bm.up_to_date(str(b), "base", "vitg")
    assert not bm.up_to_date(str(tmp_path / "missing"), "base", "vitg")
