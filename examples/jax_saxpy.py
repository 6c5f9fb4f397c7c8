"""A Numba CUDA kernel inside jax.jit, with vmap and a custom gradient.

Needs a GPU and JAX with CUDA (pip install "numba-cuda-launch[jax,cu13]" and
jax[cuda13]). Without a GPU it says so and exits.
"""

import jax
import jax.numpy as jnp
import numpy as np
from numba import cuda

from numba_cuda_launch.jax import jax_kernel


@cuda.jit
def saxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


# Output like x; grid/block from the input shape; `a` a static scalar.
saxpy_jax = jax_kernel(
    saxpy,
    out_shapes=lambda x, y, a: x,
    launch=lambda x, y, a: ((x.shape[0] + 255) // 256, 256),
    scalars={"a": np.float32},
)


@jax.custom_vjp
def f(x, y):
    return saxpy_jax(x, y, a=2.0)


f.defvjp(lambda x, y: (f(x, y), None), lambda _, g: (2.0 * g, g))


def main():
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("JAX sees no GPU here: this example needs one")
        return
    x = jnp.arange(8, dtype=jnp.float32)
    y = jnp.ones(8, jnp.float32)
    print("saxpy in jit:     ", jax.jit(lambda x, y: saxpy_jax(x, y, a=3.0))(x, y))
    print("vmap over 2 rows: ", jax.vmap(lambda x, y: saxpy_jax(x, y, a=1.0))(
        jnp.stack([x, -x]), jnp.stack([y, y])))
    print("grad of sum(f):   ", jax.grad(lambda x: jnp.sum(f(x, y)))(x))


if __name__ == "__main__":
    main()
