"""Kernel parameters: numba-cuda's kernel ABI, packed from nopython values.

numba-cuda passes every kernel argument flattened into scalar parameters
(an array becomes meminfo, parent, nitems, itemsize, data, shape[ndim] and
strides[ndim]; a complex its two parts; a tuple its items). Numba's CPU data
models flatten values the same way, so packing is: flatten with the CPU
argument packer, check each piece against the kernel entry point's own
parameter types, store each in a stack slot and pass the slots' addresses as
``kernelParams``. All slots are allocas in the entry block: nothing is
allocated per launch.
"""

from dataclasses import dataclass

from llvmlite import ir
from numba.core import cgutils, types

__all__ = ["KernelParam", "param_layout", "flat_param_names", "emit_param_array"]

_i8p = ir.IntType(8).as_pointer()


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a kernel entry point: where it comes from (``name``,
    e.g. ``"x.shape[1]"``), its size in bytes and its offset when all
    parameters are laid out in one buffer with natural alignment (the layout
    ``cuLaunchKernel``'s ``extra`` / ``CU_LAUNCH_PARAM_BUFFER_POINTER`` form
    expects)."""

    name: str
    size: int
    offset: int


def flat_param_names(name, ty):
    """Names of the parameters one argument of type *ty* flattens into."""
    if isinstance(ty, types.Array):
        fields = ["meminfo", "parent", "nitems", "itemsize", "data"]
        fields += ["shape[%d]" % i for i in range(ty.ndim)]
        fields += ["strides[%d]" % i for i in range(ty.ndim)]
        return ["%s.%s" % (name, f) for f in fields]
    if isinstance(ty, types.Complex):
        return [name + ".real", name + ".imag"]
    if isinstance(ty, types.BaseTuple):
        out = []
        for i, t in enumerate(ty):
            out += flat_param_names("%s[%d]" % (name, i), t)
        return out
    return [name]


def param_layout(names, argtypes, llvm_types, target_data):
    """The kernel's parameters as :class:`KernelParam` records."""
    flat_names = []
    for name, ty in zip(names, argtypes):
        flat_names += flat_param_names(name, ty)
    if len(flat_names) != len(llvm_types):
        raise AssertionError(
            "parameter layout mismatch: %d names for %d kernel parameters"
            % (len(flat_names), len(llvm_types)))
    out, offset = [], 0
    for name, lty in zip(flat_names, llvm_types):
        size = lty.get_abi_size(target_data)
        offset = (offset + size - 1) // size * size if size else offset
        out.append(KernelParam(name, size, offset))
        offset += size
    return tuple(out)


def flatten_values(context, builder, argtypes, values):
    """Flatten argument values into the LLVM values of the kernel params.

    A float16 parameter arrives as its 16 bits (converted from a CPU number)
    or as a ``half`` (read from float16 memory); both are its two bytes.
    Everything else flattens by its CPU data model.
    """
    out = []
    for ty, value in zip(argtypes, values):
        if ty == types.float16:
            out.append(value)
        else:
            out.extend(context.get_arg_packer([ty]).as_arguments(builder, [value]))
    return out


def emit_param_array(builder, flat_values, kernel_llvm_types, target_data):
    """Store each flattened value in a stack slot and return the ``void**``
    array of slot addresses (NULL for a kernel without parameters).

    The value's size must equal the kernel parameter's: the driver copies the
    parameter's size from each address."""
    if not flat_values:
        return ir.Constant(_i8p.as_pointer(), None)
    ptrs = cgutils.alloca_once(builder, _i8p, size=len(flat_values), name="kernel_params")
    for i, (value, kty) in enumerate(zip(flat_values, kernel_llvm_types)):
        vsize = value.type.get_abi_size(target_data)
        ksize = kty.get_abi_size(target_data)
        if vsize != ksize:
            raise AssertionError(
                "kernel parameter %d is %d bytes; the packed value %s is %d"
                % (i, ksize, value.type, vsize))
        slot = cgutils.alloca_once(builder, value.type)
        builder.store(value, slot)
        builder.store(
            builder.bitcast(slot, _i8p),
            builder.gep(ptrs, [ir.Constant(ir.IntType(32), i)], inbounds=True),
        )
    return ptrs
