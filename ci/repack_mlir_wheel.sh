#!/usr/bin/env bash
# numba-cuda-mlir's wheel (~71 MB) is over what a GPU run may carry (64 MiB):
# download it, unpack it and re-compress its file tree with xz into .whl-mlir/
# (ignored by git), for ci/unpack_mlir_wheel.sh to install on the GPU machine,
# which has no package index.
#
#   bash ci/repack_mlir_wheel.sh [PYTHON_VERSION] [NUMBA_CUDA_MLIR_VERSION]
#
# PYTHON_VERSION is the GPU machine's Python (default: this python3's, e.g.
# 3.11); the wheels are per CPython version (cp311, cp312, cp313).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYVER="${1:-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')}"
VERSION="${2:-0.6.0}"
DEST="$ROOT/.whl-mlir"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" \
    "numba-cuda-mlir==$VERSION" -d "$TMP"
WHEEL="$(ls "$TMP"/numba_cuda_mlir-*.whl)"
mkdir -p "$TMP/tree" "$DEST"
python3 -m zipfile -e "$WHEEL" "$TMP/tree"
OUT="$DEST/$(basename "$WHEEL" .whl).tar.xz"
rm -f "$DEST"/numba_cuda_mlir-*.tar.xz
tar -C "$TMP/tree" -cf - . | xz -9 -T2 > "$OUT"
echo "wheel $(stat -c %s "$WHEEL") bytes -> $OUT $(stat -c %s "$OUT") bytes"
