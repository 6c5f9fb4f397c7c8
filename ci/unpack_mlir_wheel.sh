#!/usr/bin/env bash
# On the GPU machine (no package index): install numba-cuda-mlir from the
# tree ci/repack_mlir_wheel.sh left in .whl-mlir/ (carried with the run),
# by unpacking it into the site-packages of PYTHON (default .venv/bin/python,
# else python3). Its dependencies (numpy, cuda-bindings, cuda-core, and
# libNVVM/nvJitLink through numba-cuda) must already be installed.
#
#   bash ci/unpack_mlir_wheel.sh [PYTHON]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${1:-}"
if [ -z "$PY" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
TAG="$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
ARCHIVE="$(ls "$ROOT"/.whl-mlir/numba_cuda_mlir-*-"$TAG"-*.tar.xz 2>/dev/null | head -n1 || true)"
if [ -z "$ARCHIVE" ]; then
    echo "no numba-cuda-mlir tree for $TAG in .whl-mlir/ (run ci/repack_mlir_wheel.sh ${TAG:2:1}.${TAG:3})" >&2
    exit 1
fi
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Python's tarfile reads xz itself (the machine may have no xz binary).
"$PY" - "$ARCHIVE" "$SITE" <<'PYEOF'
import sys, tarfile
with tarfile.open(sys.argv[1]) as tf:
    kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    tf.extractall(sys.argv[2], **kw)
PYEOF
"$PY" -c 'import numba_cuda_mlir; print("numba_cuda_mlir", numba_cuda_mlir.__version__, "from", numba_cuda_mlir.__file__)'
