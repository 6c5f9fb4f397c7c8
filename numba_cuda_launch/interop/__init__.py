"""Layer 3, interop: other systems' calling conventions over the launch layer.

* :mod:`.xla_ffi` -- XLA typed-FFI call frames read from nopython code;
* :mod:`.jax` -- ``jax_kernel()``: kernels as JAX functions;
* :mod:`.jax_handler` -- the FFI handler of one ``jax_kernel`` signature;
* :mod:`.aot` -- launchers as a C library that runs without Python;
* :mod:`.kernel_call` -- the checks of a kernel another framework calls;
* :mod:`.tvm_ffi_abi` -- TVM-FFI arguments and errors read from nopython code;
* :mod:`.tvm_ffi_function` -- `tvm_ffi_kernel()`: kernels as TVM-FFI functions.

Public as :mod:`numba_cuda_launch.xla_ffi`, :mod:`numba_cuda_launch.jax`,
:mod:`numba_cuda_launch.tvm_ffi` and
:mod:`numba_cuda_launch.aot`.
"""
