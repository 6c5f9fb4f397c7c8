"""The kernel sources of the installed compilers, registered by importing
this module: numba-cuda's only where numba-cuda is installed (its module
imports ``numba.cuda``), numba-cuda-mlir's and the foreign kernels' always
(they import nothing of their compilers until a kernel of theirs is seen).
A new compiler is one more source module, added here. docs/architecture.md,
"Kernel sources".
"""

from numba_cuda_launch.compat.versions import has_numba_cuda

if has_numba_cuda():
    from numba_cuda_launch.kernels import numba_cuda  # noqa: F401
from numba_cuda_launch.kernels import foreign, numba_cuda_mlir  # noqa: E402,F401
