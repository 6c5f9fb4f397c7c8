"""float16 storage in Numba's CPU target: a storage-only data model (LLVM
``half``), so CPU code can hold pointers to and arrays of half-precision
device data, and boxers that refuse float16 values with a sentence instead of
an AssertionError (installed by :mod:`.overrides`; the bit conversions are in
:mod:`numba_cuda_launch.launch.halffloat`).
"""

from llvmlite import ir
from numba.core import types
from numba.core.datamodel import models

from numba_cuda_launch.errors import NopythonUnsupportedError

__all__ = ["float_or_half_model", "half_refusing"]


class _HalfModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.HalfType())


def float_or_half_model(original):
    """The data model factory for ``types.Float`` in Numba's default data
    model manager: LLVM ``half`` storage for float16, *original* for the
    other floats."""
    def model(dmm, fe_type):
        if fe_type == types.float16:
            return _HalfModel(dmm, fe_type)
        return original(dmm, fe_type)
    return model


_HALF_VALUES = (
    "float16 values cannot be passed into or returned from CPU nopython "
    "functions: numba_cuda_launch gives float16 storage in CPU code (pointers "
    "and arrays of device data) but no CPU arithmetic; pass a float32 or "
    "float64 (a kernel's float16 parameter takes any CPU float)")


def half_refusing(original):
    """The boxer or unboxer of ``types.Float`` in Numba's registries
    (``numba.core.pythonapi._boxers``/``_unboxers``, filled when
    ``numba.core.boxing`` is imported): *original*, refusing float16 with a
    sentence."""
    def refusing(typ, *args):
        if typ == types.float16:
            raise NopythonUnsupportedError(_HALF_VALUES)
        return original(typ, *args)
    return refusing
