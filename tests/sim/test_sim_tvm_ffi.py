"""TVM-FFI functions under numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1):
real kernels computing on host tensors (NumPy arrays through DLPack) called
through ``tvm_ffi_kernel`` functions, and in ``jax.jit`` through jax-tvm-ffi
on XLA:CPU, checked against NumPy. Started by tests/test_simulator.py."""

import numpy as np
import pytest
from numba import cuda

tvm_ffi = pytest.importorskip("tvm_ffi")

from numba_cuda_launch import tvm_ffi as ntf  # noqa: E402
from support.kernels import axpy, axpy_blocks  # noqa: E402

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
rng = np.random.default_rng()
SAXPY = ntf.tvm_ffi_kernel(axpy, axpy_blocks, arrays=[(np.float32, 1)] * 3,
                           scalars={"a": np.float32})


def test_a_call_computes_on_host_tensors():
    n = int(rng.integers(50, 500))
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    a = np.float32(rng.standard_normal())
    SAXPY(x, y, out, float(a))
    np.testing.assert_allclose(out, a * x + y, rtol=1e-6)


def test_a_refused_call_computes_nothing():
    x = rng.standard_normal(40).astype(np.float32)
    out = np.full(40, np.nan, np.float32)
    with pytest.raises(TypeError, match="parameter 'y' \\(argument 1\\) must be a float32"):
        SAXPY(x, x.astype(np.float64), out, 1.0)
    with pytest.raises(ValueError, match="parameter 'x' \\(argument 0\\) is not C-contiguous"):
        SAXPY(np.zeros(80, np.float32)[::2], x, out, 1.0)
    assert np.isnan(out).all()


def test_in_jax_jit_through_jax_tvm_ffi():
    jax = pytest.importorskip("jax")
    pytest.importorskip("jax_tvm_ffi")
    cpu = jax.devices("cpu")[0]
    f = ntf.jax_function(SAXPY, lambda x, y, a: jax.ShapeDtypeStruct(x.shape, x.dtype))
    x, y = (rng.standard_normal(300).astype(np.float32) for _ in range(2))
    a = np.float32(rng.standard_normal())
    out = jax.jit(lambda x, y: f(x, y, a=a) * 2)(jax.device_put(x, cpu), jax.device_put(y, cpu))
    np.testing.assert_allclose(np.asarray(out), 2 * (a * x + y), rtol=1e-6)
