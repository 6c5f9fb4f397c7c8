"""float16 storage in Numba's CPU target.

Numba's CPU data model refuses ``float16``, so a CPU function could not even
hold a pointer to, or an array of, half-precision device data (JAX's f16
buffers, say). This registers a storage-only model (LLVM ``half``) for it:
pointers and arrays of float16 can be made and passed to kernels. Arithmetic
on float16 values in CPU code stays unsupported, as before.
"""

from llvmlite import ir
from numba.core import types
from numba.core.datamodel import default_manager, models

__all__ = []


class _HalfModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.HalfType())


_float_model = default_manager._handlers[types.Float]


def _float_or_half_model(dmm, fe_type):
    if fe_type == types.float16:
        return _HalfModel(dmm, fe_type)
    return _float_model(dmm, fe_type)


if _float_model is not _float_or_half_model:
    default_manager._handlers[types.Float] = _float_or_half_model
