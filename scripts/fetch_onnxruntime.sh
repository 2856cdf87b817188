#!/usr/bin/env bash
# Fetch the ONNX Runtime shared library that onnxruntime_go v1.36.0 needs (C API 1.29)
# from the npm package onnxruntime-node@1.29.0. `npm pack` only downloads the tarball:
# the package's postinstall (which would download from an unreachable host) never runs.
# Both the tarball and the extracted library are checked against pinned SHA-256 sums.
set -euo pipefail
dest=${1:-third_party/onnxruntime}
version=1.29.0
tgz_sha=cfdfb45ec4044b1fdca43e5d2e180fb6817e649ff8ad1e0dfc90e18e51b67037
lib_sha=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d
lib="$dest/lib/libonnxruntime.so.$version"

if [ -f "$lib" ] && echo "$lib_sha  $lib" | sha256sum -c --status; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_onnxruntime: npm is required (apt-get install npm)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetching onnxruntime-node@$version (npm pack) ..." >&2
(cd "$work" && npm pack --silent "onnxruntime-node@$version" >/dev/null)
tgz="$work/onnxruntime-node-$version.tgz"
echo "$tgz_sha  $tgz" | sha256sum -c --status || { echo "fetch_onnxruntime: checksum mismatch for $tgz" >&2; exit 1; }
tar -xzf "$tgz" -C "$work" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
mkdir -p "$dest/lib"
cp "$work/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$lib.tmp"
echo "$lib_sha  $lib.tmp" | sha256sum -c --status || { echo "fetch_onnxruntime: checksum mismatch for libonnxruntime.so.1" >&2; rm -f "$lib.tmp"; exit 1; }
mv "$lib.tmp" "$lib"
ln -sf "libonnxruntime.so.$version" "$dest/lib/libonnxruntime.so"
echo "onnxruntime $version -> $lib" >&2
