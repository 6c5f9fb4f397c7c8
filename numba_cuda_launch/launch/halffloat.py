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
from numba_cuda_launch.errors import NopythonUnsupportedError
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


def _refuse_half(registry):
    """Make Numba's float boxer/unboxer refuse float16 with a sentence
    instead of Numba's bare AssertionError (the data model above is what
    lets typing reach boxing at all). The registry's lookup is wrapped, so
    nothing is imported here: importing numba.core.boxing would import
    implementation modules numba-cuda keeps out of ``import numba.cuda``."""
    if getattr(registry, "_ncl_half", False):
        return
    original = registry.lookup

    def lookup(typeclass, default=None):
        fn = original(typeclass, default)
        if fn is None or fn is default or not issubclass(typeclass, types.Float):
            return fn

        def refusing(typ, *args):
            if typ == types.float16:
                raise NopythonUnsupportedError(_HALF_VALUES)
            return fn(typ, *args)
        return refusing

    registry.lookup = lookup
    registry._ncl_half = True


_refuse_half(_boxers)
_refuse_half(_unboxers)


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


@intrinsic
def _bits_float64(typingctx, bits):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@register_jitable
def half_bits_to_float(bits):
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
