"""Layer 0, compat: every use of numba-cuda's and Numba's internals.

* :mod:`.numba_cuda` -- numba-cuda (deviceless compilation, kernel images,
  signatures, stream and array classes);
* :mod:`.numba_cuda_mlir` -- numba-cuda-mlir kernels;
* :mod:`.numba_caching` -- Numba's on-disk cache and launch code;
* :mod:`.numba_dispatcher` -- Numba's CPU dispatcher: fast typing by class,
  routers for arguments its C code types by ``_numba_type_``;
* :mod:`.numba_cfunc` -- ``@cfunc`` objects' LLVM modules and toolchain
  versions, for C libraries;
* :mod:`.numba_float16` -- float16 storage in Numba's CPU target;
* :mod:`.numba_typeof` -- ``typeof`` of objects of unregistered classes;
* :mod:`.versions` -- the supported releases, checked at import;
* :mod:`.overrides` -- every replacement of another library's attribute,
  declared and installed in one place (docs/overrides.md).

Nothing here imports from the layers above (cudadrv, launch, interop).
"""
