"""Numba CUDA kernels inside ``jax.jit``, through XLA's typed FFI
(docs/jax.md).

:func:`jax_kernel` turns a ``@cuda.jit`` kernel into a function on
``jax.Array`` values; :func:`export` and :func:`deserialize` are
``jax.export``'s, registering the FFI targets an exported function needs;
:func:`cache_dir` and :func:`clear_cache` are the handler cache's.
JAX is an optional dependency (``pip install numba-cuda-launch[jax]``),
imported when this module is (``import numba_cuda_launch`` does not import
it). The implementation is :mod:`numba_cuda_launch.interop.jax`.
"""

from numba_cuda_launch.interop.jax import (
    jax_kernel,
    JaxKernel,
    export,
    deserialize,
    disabled_checks,
    registered_targets,
    missing_targets,
    cache_dir,
    clear_cache,
)

__all__ = [
    "jax_kernel",
    "JaxKernel",
    "export",
    "deserialize",
    "disabled_checks",
    "registered_targets",
    "missing_targets",
    "cache_dir",
    "clear_cache",
]
