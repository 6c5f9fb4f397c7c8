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
from numba.extending import intrinsic, register_jitable

__all__ = ["float_to_half_bits"]


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
