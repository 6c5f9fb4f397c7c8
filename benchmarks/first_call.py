"""The whole-process cost of a script using a ``jax_kernel`` (the shape of
examples/jax_saxpy.py: saxpy in ``jax.jit``, under ``vmap`` and ``grad``),
against the same script computing saxpy with ``jax.numpy``: run each as its
own process, the kernel's first with an empty handler cache (cold) and then
with the cache it left (warm), and compare whole-process times (wall and CPU,
medians of fresh processes; docs/benchmarks.md, "The first call").

    python benchmarks/first_call.py kernel|jnp

Without a GPU it runs the kernel in numba-cuda's CUDA simulator on XLA:CPU
(set NUMBA_ENABLE_CUDASIM=1 JAX_PLATFORMS=cpu, as the example says).
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

MODE = sys.argv[1] if len(sys.argv) > 1 else "kernel"
if MODE == "kernel":
    from numba import cuda

    from numba_cuda_launch.jax import jax_kernel

    @cuda.jit
    def saxpy(x, y, out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    saxpy_jax = jax_kernel(saxpy, out_shapes=lambda x, y, a: x,
                           launch=lambda x, y, a: ((x.shape[0] + 255) // 256, 256),
                           scalars={"a": np.float32})
    simulated = cuda.config.ENABLE_CUDASIM
elif MODE == "jnp":
    def saxpy_jax(x, y, a):
        return jnp.float32(a) * x + y
    simulated = True
else:
    raise SystemExit("usage: first_call.py kernel|jnp")


@jax.custom_vjp
def f(x, y):
    return saxpy_jax(x, y, a=2.0)


f.defvjp(lambda x, y: (f(x, y), None), lambda _, g: (2.0 * g, g))


def main():
    if simulated:
        jax.config.update("jax_default_device", jax.devices("cpu")[0])
    x = jnp.arange(8, dtype=jnp.float32)
    y = jnp.ones(8, jnp.float32)
    out = [jax.jit(lambda x, y: saxpy_jax(x, y, a=3.0))(x, y),
           jax.vmap(lambda x, y: saxpy_jax(x, y, a=1.0))(jnp.stack([x, -x]), jnp.stack([y, y])),
           jax.grad(lambda x: jnp.sum(f(x, y)))(x)]
    expected = [3 * x + y, jnp.stack([x + y, -x + y]), 2 * jnp.ones(8)]
    for got, want in zip(out, expected):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want))


if __name__ == "__main__":
    main()
