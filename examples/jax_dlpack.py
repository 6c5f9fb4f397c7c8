"""A JAX array handed to a compiled launcher through DLPack.

    .venv/bin/python examples/jax_dlpack.py      (needs a GPU and a CUDA build of jaxlib)

For kernels inside jax.jit use numba_cuda_launch.jax.jax_kernel instead;
this is for code that holds JAX arrays outside of jit.
"""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

try:
    import jax  # noqa: E402
except ImportError:  # the [jax] extra is not installed
    print("jax_dlpack: this example needs JAX (pip install \"numba-cuda-launch[jax]\")")
    raise SystemExit(0)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, njit  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402


@cuda.jit
def square(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i]


@njit
def launch(x, out, stream):
    square[(out.size + 255) // 256, 256, stream](x, out)


if __name__ == "__main__":
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("jax_dlpack: JAX sees no GPU here: this example needs one (and jax[cuda13])")
        raise SystemExit(0)
    x = jnp.linspace(0, 1, 1000, dtype=jnp.float32)
    stream = cuda.stream()
    out = cuda.device_array(1000, np.float32)
    # on_stream names the stream the kernel uses, so JAX orders its work
    # producing x before it (DLPack's __dlpack__(stream=...)).
    launch(ncl.on_stream(x, stream), out, stream)
    stream.synchronize()
    print("JAX array through DLPack: correct",
          np.allclose(out.copy_to_host(), np.asarray(x) ** 2))
