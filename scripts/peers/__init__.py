"""Peer runners for `make bench`: the same bundle and inputs run through the runtimes people
use today (PyTorch + Hugging Face generate, ONNX Runtime from Python, transformers.js in Node),
each printing one JSON document in the shape of `autoui bench --json`. compare.py runs them all
beside ours and writes the comparison table and chart."""
