"""Layer 3, interop: other systems' calling conventions over the launch layer.

* :mod:`.arrays` -- device arrays of other libraries (the CUDA Array
  Interface, DLPack, numba-cuda) as arguments of compiled functions;
* :mod:`.producers` -- fast paths for numba-cuda's, CuPy's and PyTorch's
  arrays;
* :mod:`.xla_ffi` -- XLA typed-FFI call frames read from nopython code;
* :mod:`.jax` -- ``jax_kernel()``: kernels as JAX functions;
* :mod:`.aot` -- launchers as a C library that runs without Python.

Public as :mod:`numba_cuda_launch.xla_ffi`, :mod:`numba_cuda_launch.jax` and
:mod:`numba_cuda_launch.aot`.
"""
