# Sourced by the ci/gpu_*.sh scripts (GPU machine, no package index): $OUT,
# quiet numba-cuda, JAX allocating on demand, carried wheels (.whl/) and the
# numba-cuda-mlir tree (.whl-mlir/) unpacked into /tmp/site, and PYTHONPATH
# = the checkout, the numpy 2.5 shim for numba-cuda 0.30.4, /tmp/site.
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT" /tmp/site
export PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0 XLA_PYTHON_CLIENT_PREALLOCATE=false
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
fi
for _archive in .whl-mlir/*cp312*.tar.xz; do
  [ -f "$_archive" ] && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp/site')" "$_archive"
done
export PYTHONPATH="$PWD:$PWD/ci/gpu_shim:/tmp/site"
