"""A Numba CUDA kernel as one TVM-FFI function: called from Python on arrays
(NumPy here; PyTorch, CuPy, JAX and numba-cuda arrays alike), a wrong call
refused with the kernel's and the parameter's names (docs/tvm-ffi.md).

With a GPU it launches there (the arrays must then be on the GPU: this example
uses CuPy when installed); without one, the kernel runs in numba-cuda's CUDA
simulator on host arrays. Needs apache-tvm-ffi (pip install
"numba-cuda-launch[tvm-ffi]"); otherwise it says so and exits.
"""

import _gpu_or_simulator  # noqa: F401  (the simulator when there is no GPU)

try:
    import tvm_ffi  # noqa: F401
except ImportError:
    print("tvm_ffi_axpy: this example needs apache-tvm-ffi "
          "(pip install \"numba-cuda-launch[tvm-ffi]\")")
    raise SystemExit(0)
import numba
import numpy as np
from numba import cuda

from numba_cuda_launch import tvm_ffi as ntf


@cuda.jit
def axpy(x, y, out, a):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


@numba.njit
def by_size(x_shape, y_shape, out_shape, a):  # run in the compiled function, each call
    return (x_shape[0] + 255) // 256, 256


f = ntf.tvm_ffi_kernel(axpy, by_size, arrays=[(np.float32, 1)] * 3, scalars={"a": np.float32})
print(f)

x = np.arange(1000, dtype=np.float32)
y = np.ones(1000, np.float32)
if not cuda.config.ENABLE_CUDASIM:
    try:
        import cupy as xp
    except ImportError:
        print("tvm_ffi_axpy: on a GPU this example needs CuPy for device arrays")
        raise SystemExit(0)
    to_host = xp.asnumpy
else:
    xp, to_host = np, np.asarray
dx, dy = xp.asarray(x), xp.asarray(y)
out = xp.zeros_like(dx)
f.function(dx, dy, out, 2.0)  # a tvm_ffi.Function: no Python between the call and the launch
if xp is not np:
    xp.cuda.Device().synchronize()
assert np.allclose(to_host(out), 2 * x + y)
print("out[:4] =", to_host(out)[:4])

try:
    f(dx, dy.astype(xp.float64), out, 2.0)
except TypeError as exc:
    print("refused:", exc)
