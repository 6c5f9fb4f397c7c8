"""numba-cuda-mlir kernels as CPU nopython values.

A ``@cuda.jit`` kernel of numba-cuda-mlir (``from numba_cuda_mlir import
cuda``) used in CPU nopython code gets the CPU type :class:`MLIRKernel`, so
``kernel[grid, block, stream, sharedmem](args...)`` types, selects, packs and
launches as a numba-cuda kernel does, through numba-cuda-mlir's adapter
(:mod:`numba_cuda_launch.compat.numba_cuda_mlir`: its types translated,
its launcher's parameter layout, checked against the PTX entry point when
selected). See docs/numba-cuda-mlir.md. Nothing here imports
numba_cuda_mlir: the type of its dispatcher is found through a virtual base
class (:class:`_MLIRDispatcherClass`) once the user has imported it.
"""

import abc

from numba.core import types
from numba.core.datamodel import models
from numba.core.imputils import lower_constant
from numba.extending import register_model, typeof_impl

from numba_cuda_launch.compat import numba_cuda_mlir as _mlir
from numba_cuda_launch.launch import launchconfig

__all__ = ["MLIRKernel"]


class MLIRKernel(types.Type):
    """The CPU type of a numba-cuda-mlir kernel; like numba-cuda's dispatcher
    type it holds the kernel (``.dispatcher``)."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        super().__init__(name="MLIRKernel(%s)" % _mlir.dispatcher_name(dispatcher))

    @property
    def key(self):
        return self.dispatcher


register_model(MLIRKernel)(models.OpaqueModel)


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


@lower_constant(MLIRKernel)
def _mlir_kernel_constant(context, builder, ty, pyval):
    return context.get_dummy_value()


launchconfig.add_kernel_type(MLIRKernel)
