"""A Numba CUDA kernel inside jax.jit, with vmap and a custom gradient.

Needs a GPU and JAX with CUDA (pip install "numba-cuda-launch[jax,cu13]" and
jax[cuda13]), or runs on XLA:CPU with the kernel in numba-cuda's CUDA
simulator: NUMBA_ENABLE_CUDASIM=1 JAX_PLATFORMS=cpu python examples/jax_saxpy.py.
Otherwise it says so and exits.
"""

try:
    import jax
except ImportError:  # the [jax] extra is not installed
    print("jax_saxpy: this example needs JAX (pip install \"numba-cuda-launch[jax]\")")
    raise SystemExit(0)
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
    simulated = cuda.config.ENABLE_CUDASIM
    if not simulated and not any(d.platform == "gpu" for d in jax.devices()):
        print("JAX sees no GPU here: this example needs one, or NUMBA_ENABLE_CUDASIM=1 "
              "(and JAX_PLATFORMS=cpu) to run the kernel in the CUDA simulator")
        return
    if simulated:  # the simulator's handlers are XLA:CPU's
        jax.config.update("jax_default_device", jax.devices("cpu")[0])
    x = jnp.arange(8, dtype=jnp.float32)
    y = jnp.ones(8, jnp.float32)
    print("saxpy in jit:     ", jax.jit(lambda x, y: saxpy_jax(x, y, a=3.0))(x, y))
    print("vmap over 2 rows: ", jax.vmap(lambda x, y: saxpy_jax(x, y, a=1.0))(
        jnp.stack([x, -x]), jnp.stack([y, y])))
    print("grad of sum(f):   ", jax.grad(lambda x: jnp.sum(f(x, y)))(x))


if __name__ == "__main__":
    main()
