"""numba-cuda-mlir internals this package replaces: with no GPU, the compute
capability its compiler asks for (installed by :mod:`.overrides`). Its
kernels are read by ``kernels/numba_cuda_mlir.py``. Nothing here imports
numba_cuda_mlir: it is used once the user imported it.
"""

import sys

from numba_cuda_launch.config import get_compute_capability

__all__ = ["deviceless_cc_wanted", "configured_cc"]


def deviceless_cc_wanted():
    """Whether numba-cuda-mlir is imported and should compile for the
    configured compute capability (no GPU, one configured)."""
    if "numba_cuda_mlir" not in sys.modules:
        return False
    try:
        cc = get_compute_capability()
    except ValueError:
        return False  # a malformed setting is reported where a kernel is compiled
    if cc is None:
        return False
    from numba import cuda

    return not cuda.is_available()


def configured_cc(original):
    """The value for ``numba_cuda_mlir.tools._cached_cc`` with no GPU: the
    configured compute capability, unless something filled that cache
    already (numba-cuda-mlir asks it for the device's on every compilation;
    docs/numba-cuda-mlir.md)."""
    if original is not None:
        return original
    return tuple(get_compute_capability())
