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


@pytest.fixture(scope="session")
def tokenizer():
    from scripts import autoui_model as am
    return am.load_tokenizer(TOKENIZER)
