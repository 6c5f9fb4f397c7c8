"""numba-cuda-mlir kernels as CPU nopython values (:class:`MLIRKernel`), so
``kernel[grid, block, stream, sharedmem](args...)`` launches them through
their adapter (:mod:`..compat.numba_cuda_mlir`). Nothing here imports
numba_cuda_mlir. See docs/numba-cuda-mlir.md.
"""

import abc

from numba.extending import typeof_impl

from numba_cuda_launch.compat import numba_cuda_mlir as _mlir
from numba_cuda_launch.launch import launchconfig

__all__ = ["MLIRKernel"]


class MLIRKernel(launchconfig.KernelType):
    """The CPU type of a numba-cuda-mlir kernel."""

    def __init__(self, dispatcher):
        super().__init__(dispatcher, "MLIRKernel(%s)" % _mlir.KERNELS.kernel_name(dispatcher))


class _MLIRDispatcherClass(abc.ABC):
    """Virtual base class of numba-cuda-mlir's dispatcher class: ``typeof``
    (a ``functools.singledispatch``) finds the registration below through
    it without numba_cuda_mlir being imported here."""

    @classmethod
    def __subclasshook__(cls, other):
        return True if _mlir.is_mlir_dispatcher_class(other) else NotImplemented


@typeof_impl.register(_MLIRDispatcherClass)
def _typeof_mlir_kernel(val, c):
    return MLIRKernel(val)


launchconfig.add_kernel_type(MLIRKernel)
