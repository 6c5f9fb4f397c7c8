"""CuPy arrays and a CuPy stream straight into a compiled launcher.

    .venv/bin/python examples/cupy_arrays.py      (needs a GPU and CuPy)
"""

from numba import cuda, njit

try:
    import cupy as cp
except ImportError:
    cp = None

import numba_cuda_launch  # noqa: F401


@cuda.jit
def scale_rows(m, s, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = m[i, j] * s[i]


@njit
def launch(m, s, out, stream):
    g = ((out.shape[0] + 15) // 16, (out.shape[1] + 15) // 16)
    scale_rows[g, (16, 16), stream](m, s, out)


if __name__ == "__main__":
    if cp is None or not cp.cuda.is_available():
        print("cupy_arrays: needs a GPU and CuPy (pip install cupy-cuda13x); skipped here")
        raise SystemExit(0)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:  # CuPy works on stream, and names it for its arrays
        m = cp.random.standard_normal((300, 200), dtype=cp.float32)
        s = cp.arange(300, dtype=cp.float32)
        out = cp.empty_like(m)
        launch(m, s, out, stream)            # CuPy arrays and stream, no conversion;
        launch(m.T, s[:200], out.T, stream)  # on the stream CuPy named: no host wait
        ok = bool(cp.allclose(out.T, m.T * s[:200, None]))  # transposed views: F strides
    print("CuPy arrays: correct", ok)
