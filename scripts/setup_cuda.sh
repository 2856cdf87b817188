#!/usr/bin/env bash
# Provision the CUDA build of ONNX Runtime 1.29 (C API 29, what onnxruntime_go v1.36.0 needs)
# and its CUDA 13 / cuDNN 9 libraries from PyPI wheels into .venv-cuda, then print the
# environment that makes `autoui --provider cuda` use them. Needs an NVIDIA driver for CUDA 13.
set -euo pipefail
venv=${1:-.venv-cuda}
ort_wheel_sha=de3caf93887ba4ad51c7d3cab04c7b464f9dd93c51047be5bfb413fd4a191e6a
python=${PYTHON_BOOT:-python3.11}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download -q --no-deps -d "$work" onnxruntime-gpu==1.29.0
whl=$(ls "$work"/onnxruntime_gpu-1.29.0-*.whl)
echo "$ort_wheel_sha  $whl" | sha256sum -c --status || { echo "setup_cuda: checksum mismatch for $whl" >&2; exit 1; }
"$python" -m venv "$venv"
"$venv/bin/pip" install -q "$whl[cuda,cudnn]" "nvidia-cublas~=13.0"

site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
lib="$site/onnxruntime/capi/libonnxruntime.so.1.29.0"
libdirs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib | sort | paste -sd: -)
cat <<MSG
CUDA build of ONNX Runtime 1.29 installed in $venv. To use it:

  export ONNXRUNTIME_SHARED_LIBRARY_PATH=$lib
  export LD_LIBRARY_PATH=$libdirs:$site/onnxruntime/capi\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
  build/autoui predict --provider cuda --model ... --screen ... --goal ...
MSG
