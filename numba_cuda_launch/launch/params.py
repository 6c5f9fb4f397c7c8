"""Kernel parameters: packed from nopython values (each argument flattened by
its compiler's adapter, each piece checked against the entry point's own
parameter and stored in a stack slot in the entry block: nothing allocated per
launch), and laid out for C callers. See docs/architecture.md.
"""

from dataclasses import dataclass

from llvmlite import ir
from numba.core import cgutils

__all__ = ["KernelParam", "param_layout", "emit_param_array"]

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


def param_layout(compiler, names, argtypes, llvm_types, target_data):
    """The parameters of a kernel of *compiler* (its adapter) taking
    *argtypes*, as :class:`KernelParam` records."""
    flat_names = [n for name, ty in zip(names, argtypes)
                  for n in compiler.flat_param_names(name, ty)]
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
        slot = cgutils.alloca_once_value(builder, value)
        builder.store(builder.bitcast(slot, _i8p), cgutils.gep_inbounds(builder, ptrs, i))
    return ptrs
