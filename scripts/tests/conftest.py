import json
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
torch.set_num_threads(1)

TESTDATA = os.path.join(ROOT, "models", "testdata")
TOKENIZER = os.path.join(TESTDATA, "tokenizer", "tokenizer.json")
TINY = os.path.join(TESTDATA, "tiny")  # the committed tiny bundle
GOLDEN = os.path.join(TESTDATA, "golden", "cases.json")


def graph_ops(bundle_dir, manifest, role):
    """The op types of a bundle's graph, in order."""
    import onnx
    g = onnx.load(os.path.join(bundle_dir, manifest["files"][role]["path"]), load_external_data=False).graph
    return [n.op_type for n in g.node]


def _load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# Function-scoped: a test may edit what it gets.
@pytest.fixture
def tiny_manifest():
    return _load_json(os.path.join(TINY, "manifest.json"))


@pytest.fixture
def golden():
    return _load_json(GOLDEN)


@pytest.fixture(scope="session")
def tokenizer():
    from scripts import autoui_model as am
    return am.load_tokenizer(TOKENIZER)
