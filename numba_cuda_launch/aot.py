"""Compiled launchers as a C shared library that runs without Python.

:func:`build` turns status-only ``@cfunc`` launchers (and ``jax_kernel``
FFI handlers) into one ``.so`` with a C header; :func:`check_library`
checks that a library needs nothing beyond libc/libdl. ``python -m
numba_cuda_launch.aot`` (or ``numba-cuda-launch-aot``) is the command line.
The implementation is :mod:`numba_cuda_launch.interop.aot`; see docs/aot.md.
"""

from numba_cuda_launch.interop.aot import (
    ABI_VERSION,
    AotBuildError,
    Library,
    build,
    check_library,
    main,
)

__all__ = ["ABI_VERSION", "AotBuildError", "Library", "build", "check_library", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
