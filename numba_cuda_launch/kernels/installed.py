"""The kernel sources of the installed compilers: numba-cuda's once
``numba.cuda`` is imported (whoever imports it, whenever: its module imports
``numba.cuda``, which a program using only numba-cuda-mlir never pays for),
numba-cuda-mlir's and the foreign kernels' when this module is imported
(they import nothing of their compilers until a kernel of theirs is seen).
A new compiler is one more source module, added here. docs/architecture.md,
"Kernel sources".
"""

import importlib

from numba_cuda_launch.compat.import_hooks import when_imported
from numba_cuda_launch.compat.simulator import refuse_builtin_cuda
from numba_cuda_launch.compat.versions import has_numba_cuda
from numba_cuda_launch.kernels import foreign, numba_cuda_mlir  # noqa: F401


def _numba_cuda_source():
    refuse_builtin_cuda()
    importlib.import_module(".numba_cuda", __package__)


if has_numba_cuda():
    when_imported("numba.cuda", _numba_cuda_source)
