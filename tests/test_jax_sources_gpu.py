"""jax_kernel over numba-cuda-mlir kernels and foreign kernels (PTX built with
NVRTC) inside jax.jit on a GPU, against NumPy on fresh random data; outputs
are poisoned (NaN) first where the kernel writes in place."""

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from support.nvrtc import nvrtc_ptx  # noqa: E402
from numba_cuda_launch.jax import jax_kernel  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not any(d.platform == "gpu" for d in jax.devices()) if cuda.is_available() else True,
    reason="JAX has no GPU here")]
rng = np.random.default_rng()

AXPBY = r'''
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b,
                                 long long n)
{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + b * y[i]; }
'''


def blocks(x, *rest, **scalars):
    return (x.shape[0] + 255) // 256, 256


@pytest.fixture(scope="module")
def foreign_axpby():
    cc = cuda.get_current_device().compute_capability
    ptx = nvrtc_ptx(AXPBY, ("-arch=compute_%d%d" % cc,), "axpby")
    k = ncl.foreign_kernel(ptx, "axpby", "void(CPointer(float32), CPointer(float32), "
                           "CPointer(float32), float32, float32, int64)",
                           param_names=["x", "y", "out", "a", "b", "n"])
    return jax_kernel(k, lambda x, y, a, b, n: x, blocks,
                      scalars={"a": np.float32, "b": np.float32, "n": np.int64})


def test_ptx_foreign_kernel_in_jit(foreign_axpby):
    n = 1000 + int(rng.integers(0, 100))
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    a, b = rng.standard_normal(2).astype(np.float32)
    out = jax.jit(lambda x, y: foreign_axpby(x, y, a=a, b=b, n=n))(x, y)
    np.testing.assert_allclose(np.asarray(out), a * x + b * y, rtol=1e-5, atol=1e-6)


def test_ptx_foreign_kernel_under_vmap_and_custom_vjp(foreign_axpby):
    @jax.custom_vjp
    def f(x, y):
        return foreign_axpby(x, y, a=2.0, b=-1.0, n=x.shape[0])

    def fwd(x, y):
        return f(x, y), None

    def bwd(_, g):
        return 2.0 * g, -g

    f.defvjp(fwd, bwd)
    x, y = rng.standard_normal((2, 3, 300)).astype(np.float32)
    out = jax.jit(jax.vmap(f))(x, y)
    np.testing.assert_allclose(np.asarray(out), 2 * x - y, rtol=1e-5, atol=1e-6)
    gx = jax.jit(jax.grad(lambda x: jnp.sum(f(x, y[0]))))(x[0])
    np.testing.assert_allclose(np.asarray(gx), np.full_like(x[0], 2.0))


def test_mlir_kernel_in_jit():
    pytest.importorskip("numba_cuda_mlir")
    from numba_cuda_mlir import cuda as mcuda

    @mcuda.jit
    def mlir_axpy(x, y, out, a):
        i = mcuda.grid(1)
        if i < out.shape[0]:
            out[i] = a * x[i] + y[i]

    k = jax_kernel(mlir_axpy, lambda x, y, a: x, blocks, scalars={"a": np.float64})
    n = 2000 + int(rng.integers(0, 100))
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    a = float(rng.standard_normal())
    out = jax.jit(lambda x, y: k(x, y, a=a))(x, y)
    np.testing.assert_allclose(np.asarray(out), np.float32(a) * x + y, rtol=1e-5, atol=1e-6)


def test_mlir_kernel_writes_in_place_2d():
    pytest.importorskip("numba_cuda_mlir")
    from numba_cuda_mlir import cuda as mcuda

    @mcuda.jit
    def add_rows(x, acc, out):  # out is acc's buffer (aliased)
        i, j = mcuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            out[i, j] = acc[i, j] + x[i, j]

    k = jax_kernel(add_rows, lambda x, acc: acc,
                   lambda x, acc: (((x.shape[0] + 15) // 16, (x.shape[1] + 15) // 16), (16, 16)),
                   input_output_aliases={1: 0})
    x, acc = rng.standard_normal((2, 70, 90)).astype(np.float32)
    out = jax.jit(lambda x, acc: k(x, acc * 1))(x, acc)
    np.testing.assert_allclose(np.asarray(out), x + acc, rtol=1e-6)
