"""float16 bit conversions for CPU code: a kernel's float16 parameter is
passed as its IEEE binary16 bits, computed with integer arithmetic (the CPU's
float16 is storage only, :mod:`..compat.numba_float16`).
"""

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from numba_cuda_launch.compat.numba_extending import register_jitable

__all__ = ["float_to_half_bits", "half_bits_to_float"]


@intrinsic
def _float64_bits(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.uint64(types.float64), codegen


@register_jitable
def float_to_half_bits(x: float) -> int:
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


@intrinsic
def _bits_float64(typingctx, bits):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@register_jitable
def half_bits_to_float(bits: int) -> float:
    """The float64 value of IEEE binary16 *bits* (exact, NaN payloads and
    signs kept): integer arithmetic and a bitcast, like
    :func:`float_to_half_bits`."""
    bits = np.int64(bits) & 0xFFFF
    sign = (bits >> 15) << 63
    e = (bits >> 10) & 0x1F
    mant = bits & 0x3FF
    if e == 0:  # zero or subnormal: mant * 2**-24, exact in float64
        v = np.float64(mant) * 5.9604644775390625e-08
        return -v if sign else v
    if e == 31:  # inf or nan (payload kept in the top mantissa bits)
        return _bits_float64(sign | (np.int64(0x7FF) << 52) | (mant << 42))
    return _bits_float64(sign | ((e - 15 + 1023) << 52) | (mant << 42))
