"""Kernels for the jax.export tests, imported by name (``support.jax_export_kernels``)
in child processes: the target names derive from this module and the
kernels' names, and ``signatures=`` registers them at import."""

import jax
import jax.numpy as jnp
import numpy as np
from numba import cuda

from numba_cuda_launch.jax import jax_kernel

N = 3000
X = jax.ShapeDtypeStruct((N,), np.float32)


@cuda.jit
def axpb(x, out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + b


def launch(x, a, b):
    return (x.shape[0] + 127) // 128, 128


# scalars given in another order than the kernel's: bound by name
AXPB = jax_kernel(axpb, lambda x, a, b: x, launch, scalars={"b": np.int32, "a": np.float32},
                  signatures=[(X, {"a": 1.0, "b": 1})])
A, B = 2.5, -3


def f(x):
    return jnp.sin(AXPB(x, a=A, b=B)) + 1


def reference(x):
    return np.sin(A * x.astype(np.float64) + B) + 1
