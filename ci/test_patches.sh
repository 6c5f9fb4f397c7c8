#!/usr/bin/env bash
# Apply the patch series for <line> (patches/<line>/ where that line has its
# own, else the shared one in patches/, see patches/SERIES) to the numba-cuda
# release of that line, rebuild the wheel, install it in a fresh environment
# (without numba-cuda-launch) and run this project's CPU tests against
# numba.cuda.cpu_launch (NCL_TEST_PATCHED=1).
#   bash ci/test_patches.sh [line ...]     (default: 0.30)
# The line "mlir" applies patches/numba-cuda-mlir/ to numba-cuda-mlir's
# release and runs the suite against numba_cuda_mlir.cpu_launch with no
# numba-cuda installed (NCL_TEST_PATCHED=mlir).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
declare -A VERSION=([0.26]=0.26.0 [0.28]=0.28.2 [0.30]=0.30.4 [mlir]=0.6.0)
declare -A NUMBA=([0.26]=0.62.1 [0.28]=0.65.1 [0.30]=0.68.1 [mlir]=0.68.1)
lines=("$@"); [ ${#lines[@]} -gt 0 ] || lines=(0.30)
for line in "${lines[@]}"; do
  v=${VERSION[$line]}; work=$(mktemp -d)
  python3 -m venv "$work/env"
  "$work/env/bin/pip" install -q wheel
  dist=numba-cuda; alias=1; series="$ROOT/patches/$line"; [ -d "$series" ] || series="$ROOT/patches"
  if [ "$line" = mlir ]; then dist=numba-cuda-mlir; alias=mlir; series="$ROOT/patches/numba-cuda-mlir"; fi
  "$work/env/bin/pip" download -q --no-deps --only-binary :all: "$dist==$v" -d "$work/dl"
  "$work/env/bin/python" -m wheel unpack -d "$work/tree" "$work"/dl/${dist//-/_}-*.whl
  tree=$(ls -d "$work"/tree/${dist//-/_}-*)
  (cd "$tree" && git apply --verbose "$series"/*.patch 2>&1 | tail -3)
  mkdir -p "$work/patched"
  "$work/env/bin/python" -m wheel pack -d "$work/patched" "$tree" >/dev/null
  whl=$(ls "$work"/patched/*.whl)
  "$work/env/bin/pip" install -q "$whl[cu13]" "numba==${NUMBA[$line]}" pytest pytest-xdist
  if (cd "$work" && "$work/env/bin/python" -c "import numba_cuda_launch" 2>/dev/null); then
    echo "numba_cuda_launch must not be importable here"; exit 1
  fi
  if [ "$dist" = numba-cuda-mlir ] && "$work/env/bin/pip" show -q numba-cuda 2>/dev/null; then
    echo "numba-cuda must not be installed here"; exit 1
  fi
  echo "== $dist $v + ${series#$ROOT/}"
  # from outside the checkout, so that only the alias (tests/_patched) can
  # provide the name numba_cuda_launch
  # a failing line is reported with its failures and the log's end, and the
  # next line still runs; the script fails at the end
  if (cd "$work" && env -u PYTHONPATH NCL_TEST_PATCHED=$alias "$work/env/bin/python" -m pytest -q \
        -rfE -p no:cacheprovider -n 2 --rootdir "$ROOT" "$ROOT/tests" > "$work/pytest.log" 2>&1); then
    tail -${NCL_PATCH_LOG_LINES:-3} "$work/pytest.log"
  else
    grep -E "^(FAILED|ERROR) " "$work/pytest.log" | head -50 || true
    tail -${NCL_PATCH_FAIL_LINES:-60} "$work/pytest.log"
    echo "== $dist $v + ${series#$ROOT/}: FAILED"
    failed=1
  fi
  rm -rf "$work"
done
exit ${failed:-0}
