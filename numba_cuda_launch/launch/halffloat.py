"""float16 storage in Numba's CPU target.

Numba's CPU data model refuses ``float16``, so a CPU function could not even
hold a pointer to, or an array of, half-precision device data (JAX's f16
buffers, say). This registers a storage-only model (LLVM ``half``) for it:
pointers and arrays of float16 can be made and passed to kernels. Arithmetic
on float16 values in CPU code stays unsupported, as before, and a float16
value passed into or out of a CPU function is refused with a sentence.
"""

from llvmlite import ir
from numba.core import types
from numba.core.datamodel import default_manager, models
from numba.core.errors import NumbaNotImplementedError
from numba.core import boxing as _boxing  # noqa: F401  (Numba registers its boxers here)
from numba.core.pythonapi import _boxers, _unboxers
import numpy as np
from numba.extending import intrinsic, register_jitable

__all__ = ["float_to_half_bits", "half_bits_to_float"]


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


_HALF_VALUES = (
    "float16 values cannot be passed into or returned from CPU nopython "
    "functions: numba_cuda_launch gives float16 storage in CPU code (pointers "
    "and arrays of device data) but no CPU arithmetic; pass a float32 or "
    "float64 (a kernel's float16 parameter takes any CPU float)")


def _refuse_half(registry, kind):
    """Wrap Numba's float boxer/unboxer so that float16 gets a sentence
    instead of Numba's bare AssertionError (the data model above is what
    lets typing reach boxing at all)."""
    original = registry.functions[types.Float]
    if getattr(original, "_ncl_half", False):
        return

    def wrapped(typ, *args):
        if typ == types.float16:
            raise NumbaNotImplementedError(_HALF_VALUES)
        return original(typ, *args)

    wrapped._ncl_half = True
    registry.functions[types.Float] = wrapped


_refuse_half(_boxers, "box")
_refuse_half(_unboxers, "unbox")


@intrinsic
def _float64_bits(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.uint64(types.float64), codegen


@register_jitable
def float_to_half_bits(x):
    """IEEE binary16 bits of float64 *x*, rounded to nearest even (as
    ``np.float16(x)``). Integer arithmetic only: LLVM's own conversion calls
    a runtime helper that not every Numba JIT resolves."""
    b = _float64_bits(x)
    sign = (b >> 48) & 0x8000
    e = (b >> 52) & 0x7FF
    mant = b & 0xFFFFFFFFFFFFF
    if e == 0x7FF:
        return types.uint16(sign | 0x7C00 | (0x200 if mant != 0 else 0))
    exp = types.int64(e) - 1008  # rebias 1023 -> 15
    if exp >= 31:
        return types.uint16(sign | 0x7C00)
    if exp <= 0:
        if exp < -10:
            return types.uint16(sign)
        mant |= 1 << 52
        shift = 43 - exp
        half = mant >> shift
        rem = mant & ((1 << shift) - 1)
        halfway = 1 << (shift - 1)
    else:
        half = (types.uint64(exp) << 10) | (mant >> 42)
        rem = mant & ((1 << 42) - 1)
        halfway = 1 << 41
    if rem > halfway or (rem == halfway and (half & 1) != 0):
        half += 1  # a carry into the exponent is correct rounding
    return types.uint16(sign | half)


@register_jitable
def half_bits_to_float(h):
    """The float64 value of IEEE binary16 bits *h* (exact; integer and
    float64 arithmetic only, like :func:`float_to_half_bits`)."""
    h = types.int64(h) & 0xFFFF
    sign = -1.0 if h & 0x8000 else 1.0
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:
        return sign * m * 5.960464477539063e-08  # 2**-24: subnormals
    if e == 31:
        return sign * np.inf if m == 0 else np.nan
    return sign * (1024 + m) * 2.0 ** (e - 25)
