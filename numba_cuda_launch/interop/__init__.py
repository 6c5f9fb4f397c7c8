"""Layer 3, interop: other systems' calling conventions over the launch layer.

* :mod:`.xla_ffi` -- XLA typed-FFI call frames read from nopython code;
* :mod:`.jax` -- ``jax_kernel()``: kernels as JAX functions;
* :mod:`.jax_handler` -- the FFI handler of one ``jax_kernel`` signature;
* :mod:`.aot` -- launchers as a C library that runs without Python.

Public as :mod:`numba_cuda_launch.xla_ffi`, :mod:`numba_cuda_launch.jax` and
:mod:`numba_cuda_launch.aot`.
"""
