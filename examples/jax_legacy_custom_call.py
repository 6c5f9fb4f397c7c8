"""The seed's cfunc as an XLA *legacy* custom call (deprecated by XLA).

XLA's old custom-call ABI, ``void(stream, void** buffers, const char* opaque,
size_t opaque_len)``, is what the original request (jax#1870) used. It still
runs on current JAX (registered with ``api_version=0``, called with
``custom_call_api_version=2``), but XLA logs that it is deprecated and has
announced its removal: new code should use the typed FFI
(``numba_cuda_launch.jax.jax_kernel``, or a handler written with
``numba_cuda_launch.xla_ffi``).
"""

try:
    import jax
except ImportError:  # the [jax] extra is not installed
    print("jax_legacy_custom_call: this example needs JAX (pip install \"numba-cuda-launch[jax]\")")
    raise SystemExit(0)
import jax.numpy as jnp
import numba
import numba.types as nt
import numpy as np
from numba import cuda

import numba_cuda_launch  # noqa: F401

if not any(d.platform == "gpu" for d in jax.devices()):
    # The kernel below is compiled for the GPU when it is declared.
    print("jax_legacy_custom_call: JAX sees no GPU here: this example needs one")
    raise SystemExit(0)


@cuda.jit(nt.void(nt.CPointer(nt.float32), nt.CPointer(nt.float32)))
def kernel_gpu(input, output):
    i = numba.cuda.grid(1)
    output[i] = input[i] + 1


@numba.njit
def some_calculation(opaque, opaque_len):
    # opaque: the element count as ASCII digits (XLA passes it as a string).
    n = 0
    for k in range(opaque_len):
        n = n * 10 + (opaque[k] - 48)
    return n // 128, 128


@numba.cfunc(nt.void(nt.voidptr, nt.CPointer(nt.voidptr), nt.CPointer(nt.char), nt.ulong))
def kernel_launcher(stream, buffers, opaque, opaque_len):
    blockspergrid, threadsperblock = some_calculation(opaque, opaque_len)
    kernel_gpu[blockspergrid, threadsperblock, stream](buffers[0], buffers[1])


jax.ffi.register_ffi_target("seed_kernel_launcher", jax.ffi.pycapsule(kernel_launcher.ctypes),
                            platform="CUDA", api_version=0)


def plus_one(x):
    assert x.size % 128 == 0, "the seed's kernel has no bounds check"
    return jax.ffi.ffi_call(
        "seed_kernel_launcher", jax.ShapeDtypeStruct(x.shape, x.dtype),
        custom_call_api_version=2,
        legacy_backend_config=str(x.size),
    )(x)


def main():
    x = jnp.asarray(np.random.default_rng().standard_normal(1024).astype(np.float32))
    y = jax.jit(plus_one)(x)
    print("legacy custom call correct:", bool(jnp.all(y == x + 1)))


if __name__ == "__main__":
    main()
