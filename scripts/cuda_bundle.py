"""Write the variant of an fp32 autoui bundle that runs fastest on an NVIDIA GPU, in one command:

  python -m scripts.cuda_bundle --in BUNDLE --out BUNDLE-cuda [--merge-qkv]
  autoui eval run --provider cuda --model BUNDLE-cuda --cuda-graph --capture-rows 64 ...

It is the chain docs/cuda.md measured as the fastest ("fp16attnsn"): the decoder's attention as
plain operators and the vision tower's fused (scripts.attention --decoder plain --vision fused),
each residual Add and RMS norm as one op (scripts.skip_norm), then fp16 everywhere with an fp16
cache and nothing kept fp32 by op type (scripts.half --roles all --fp32-ops '' --fp16-cache; the
calibration still keeps what would overflow). --merge-qkv adds scripts.merge_qkv before the
conversion (each self-attention's Q, K and V projected in one MatMul), not yet timed on a GPU.

Each step runs its own checks against the step before; the fp32 steps are written to a hidden
directory beside --out and removed at the end, so --out is either the finished variant or left as
it was. A bundle some of whose steps are already done (an attention variant, say) goes on from
there. The bundle needs its static decoder (--cuda-graph decodes through it):
`python -m scripts.upgrade_bundle BUNDLE` adds it to an older export.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

from . import attention, half, merge_qkv, skip_norm
from .bundle_files import log, read_fp32_bundle, run_tool


class CudaBundleError(RuntimeError):
    pass


STEP_ERRORS = (attention.AttentionError, skip_norm.SkipNormError, merge_qkv.MergeError, half.HalfError)


def _steps(manifest: dict, merge: bool) -> list:
    """The steps (name, function of in_dir and out_dir) that manifest's bundle still needs."""
    done = manifest.get("attention")
    if done and (done.get("decoder"), done.get("vision")) != ("plain", "fused"):
        raise CudaBundleError(f"an attention variant with the decoder's {done.get('decoder')} and the vision tower's "
                              f"{done.get('vision')}: want the decoder plain and the vision tower fused "
                              "(start from the export)")
    steps = []
    if not done:
        steps.append(("attention", lambda i, o: attention.attention_bundle(i, o, decoder="plain", vision="fused")))
    if "skip_norm" not in manifest:
        steps.append(("skip_norm", skip_norm.skip_norm_bundle))
    if merge and "merge_qkv" not in manifest:
        steps.append(("merge_qkv", merge_qkv.merge_bundle))
    steps.append(("half", lambda i, o: half.half_bundle(i, o, roles=half.ALL_ROLES, fp32_ops=(), fp16_cache=True)))
    return steps


def cuda_bundle(in_dir: str, out_dir: str, merge: bool = False) -> dict:
    """Write the GPU variant of the fp32 bundle in_dir to out_dir; returns its manifest."""
    manifest = read_fp32_bundle(in_dir, out_dir, CudaBundleError)
    if "decoder_static" not in manifest["files"]:
        raise CudaBundleError(f"{in_dir}: no static decoder, which --cuda-graph decodes through: "
                              f"python -m scripts.upgrade_bundle {in_dir} adds it")
    steps = _steps(manifest, merge)
    real = os.path.realpath(out_dir)  # read_fp32_bundle has checked it (check_output)
    parent = os.path.dirname(real)
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix="." + os.path.basename(real) + ".steps-", dir=parent)
    try:
        src = in_dir
        for i, (name, run) in enumerate(steps):
            last = i == len(steps) - 1
            dst = out_dir if last else os.path.join(work, name)
            log(f"step {i + 1}/{len(steps)}: {name}")
            try:
                result = run(src, dst)
            except STEP_ERRORS as e:
                raise CudaBundleError(f"{name}: {e}") from None
            if src != in_dir:
                shutil.rmtree(src)  # an fp32 step's copy: the next step has been written
            src = dst
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write the variant of an fp32 autoui bundle that runs fastest on an "
                                "NVIDIA GPU (plain decoder attention, fused vision attention, fused norms, fp16 "
                                "everywhere with an fp16 cache).")
    p.add_argument("--in", dest="in_dir", required=True, help="fp32 bundle directory (with its static decoder)")
    p.add_argument("--out", required=True, help="bundle directory to write")
    p.add_argument("--merge-qkv", action="store_true",
                   help="also project each decoder self-attention's Q, K and V in one MatMul (not yet timed on a GPU)")
    args = p.parse_args(argv)
    return run_tool("cuda_bundle", lambda: cuda_bundle(args.in_dir, args.out, args.merge_qkv), (CudaBundleError,))


if __name__ == "__main__":
    sys.exit(main())
