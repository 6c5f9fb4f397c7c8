"""Functions kernels call: :func:`set_conditional` (a conditional graph
node's value, ``cudaGraphSetConditional``) and the
programmatic-dependent-launch controls :func:`griddepcontrol_wait` and
:func:`griddepcontrol_launch_dependents` (PTX ``griddepcontrol``, sm_90+).

In numba-cuda kernels typed and lowered as numba-cuda's own ``cuda.*``
functions are (:func:`..compat.numba_cuda.register_kernel_function`); in
numba-cuda-mlir kernels overloads in its extension registry calling C-ABI
device functions (:mod:`..compat.numba_cuda_mlir`), registered once it is
imported; both type their arguments by the same rules. Under numba-cuda's
simulator the Python bodies run in the simulated kernel; in CPU code each is
a typing error saying where it belongs. docs/graphs.md, "Conditional nodes"
and "Programmatic dependent launch"; docs/numba-cuda-mlir.md.
"""

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.typing.templates import signature
from numba.extending import overload

from numba_cuda_launch.compat import numba_cuda_mlir as _mlir
from numba_cuda_launch.compat.versions import has_numba_cuda, has_numba_cuda_mlir
from numba_cuda_launch.errors import NopythonUsageError
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.conditionalhandle import (ConditionalHandle, ConditionalHandleType,
                                                        handle_value)

__all__ = ["set_conditional", "griddepcontrol_wait", "griddepcontrol_launch_dependents",
           "PDL_COMPUTE_CAPABILITY"]

#: The compute capability PTX ``griddepcontrol`` needs (Hopper).
PDL_COMPUTE_CAPABILITY = (9, 0)

_void = ir.VoidType()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_U32_MAX = 2**32 - 1


def _outside_kernels(name):
    return NopythonUsageError(
        "%s() is called in CUDA kernels (numba-cuda or numba-cuda-mlir @cuda.jit), not in CPU "
        "code; under numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) in simulated kernels"
        % name)


def _run_in_kernel(name, *args):
    """The Python body of kernel function *name*: the backend's, where
    kernels are Python (the simulator's); called from Python elsewhere, a
    refusal saying where it belongs."""
    if not BACKEND.run_kernel_function(name, *args):
        raise _outside_kernels(name)


def set_conditional(handle: ConditionalHandle | int, value: int | bool) -> None:
    """In a kernel: set conditional handle *handle* (a
    :class:`~numba_cuda_launch.graphs.ConditionalHandle` argument, or its
    64-bit integer) to *value* (an integer or a boolean), as CUDA C's
    ``cudaGraphSetConditional(handle, value)``: an IF node then runs its
    body if the value is not 0, a WHILE node goes round again, a SWITCH
    node runs body *value*. A value outside 0..2**32-1 is stored as
    2**32-1 (true, and no SWITCH case) rather than wrapped. Any thread may
    call it; the last write before the node is evaluated wins."""
    _run_in_kernel("set_conditional", getattr(handle, "handle", handle), value)


def griddepcontrol_wait() -> None:
    """In a kernel launched as a programmatic dependent launch: wait until
    the grids it depends on have completed and their memory is visible
    (PTX ``griddepcontrol.wait``; sm_90+). Returns at once in a kernel not
    launched so; does nothing under the simulator."""
    _run_in_kernel("griddepcontrol_wait")


def griddepcontrol_launch_dependents() -> None:
    """In a kernel: let the grid launched after it as a programmatic
    dependent launch start before this one completes (PTX
    ``griddepcontrol.launch_dependents``; sm_90+). A hint, once per block
    suffices; does nothing under the simulator."""
    _run_in_kernel("griddepcontrol_launch_dependents")


# -- CUDA target ------------------------------------------------------------------

def _is_handle(ty):
    return isinstance(ty, ConditionalHandleType) or (
        isinstance(ty, types.Integer) and ty.bitwidth == 64)


def _type_set_conditional(*args):
    if len(args) != 2:
        raise NopythonUsageError("set_conditional(handle, value) takes 2 arguments, got %d"
                                 % len(args))
    handle, value = args
    if not _is_handle(handle):
        raise NopythonUsageError(
            "set_conditional(handle, value): handle must be a ConditionalHandle (a kernel "
            "argument from graphs.conditional_handle) or its 64-bit integer; got %s" % handle)
    if not isinstance(value, (types.Integer, types.Boolean)):
        raise NopythonUsageError(
            "set_conditional(handle, value): value must be an integer or a boolean "
            "(the condition's unsigned int); got %s" % value)
    return signature(types.void, handle, value)


def _as_condition(builder, value, ty):
    """*value* (integer or boolean *ty*) as the condition's ``i32``: values
    outside 0..2**32-1 (negative ones too) saturate to 2**32-1, keeping
    their truth."""
    if isinstance(ty, types.Boolean):
        return builder.zext(value, _i32)
    if not ty.signed and ty.bitwidth <= 32:
        return builder.zext(value, _i32) if ty.bitwidth < 32 else value
    wide = value if ty.bitwidth == 64 else builder.sext(value, _i64)
    outside = builder.icmp_unsigned(">", wide, ir.Constant(_i64, _U32_MAX))  # negatives too
    return builder.select(outside, ir.Constant(_i32, _U32_MAX), builder.trunc(wide, _i32))


def _lower_set_conditional(context, builder, sig, args):
    hty, vty = sig.args
    handle = handle_value(context, builder, args[0]) \
        if isinstance(hty, ConditionalHandleType) else args[0]
    # The device runtime's builtin: an extern function in the PTX that
    # ptxas resolves, with no libcudadevrt linked.
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_void, [_i64, _i32]),
                                        "cudaGraphSetConditional")
    builder.call(fn, [handle, _as_condition(builder, args[1], vty)])
    return context.get_dummy_value()


def _check_griddepcontrol(name, args, cc):
    """Refuse arguments, or a kernel built for *cc* below sm_90."""
    if args:
        raise NopythonUsageError("%s() takes no arguments, got %d" % (name, len(args)))
    if cc is not None and cc < PDL_COMPUTE_CAPABILITY:
        raise NopythonUsageError(
            "%s() needs compute capability %d.%d or later (PTX griddepcontrol, Hopper); "
            "this kernel is built for %d.%d" % ((name,) + PDL_COMPUTE_CAPABILITY + tuple(cc)))


def _griddepcontrol(name, instruction):
    from numba_cuda_launch.compat import numba_cuda

    def typer(*args):
        _check_griddepcontrol(name, args, numba_cuda.kernel_compute_capability())
        return signature(types.void)

    def lower(context, builder, sig, args):
        # A memory clobber: no load or store moves across the wait.
        asm = ir.InlineAsm(ir.FunctionType(_void, []), instruction, "~{memory}",
                           side_effect=True)
        builder.call(asm, [])
        return context.get_dummy_value()
    return typer, lower


_GRIDDEPCONTROL = ((griddepcontrol_wait, "griddepcontrol.wait;"),
                   (griddepcontrol_launch_dependents, "griddepcontrol.launch_dependents;"))


def _register_numba_cuda():
    from numba_cuda_launch.compat import numba_cuda

    numba_cuda.register_kernel_function(set_conditional, _type_set_conditional,
                                        _lower_set_conditional)
    for fn, instruction in _GRIDDEPCONTROL:
        numba_cuda.register_kernel_function(fn, *_griddepcontrol(fn.__name__, instruction))


# -- numba-cuda-mlir kernels ---------------------------------------------------------------

def _cpu_types(mlir_types):
    """numba-cuda-mlir's argument types as CPU types (an untranslatable one
    as it is: the checks name it)."""
    from numba_cuda_launch.kernels.numba_cuda_mlir import from_mlir_type

    return [from_mlir_type(t) or t for t in mlir_types]


def _register_numba_cuda_mlir():
    declared: list = []  # cudaGraphSetConditional, declared when a kernel first calls it

    @_mlir.overload(set_conditional)
    def _set_conditional(handle, value):
        hty, vty = _cpu_types((handle, value))
        _type_set_conditional(hty, vty)
        if not declared:
            declared.append(_mlir.declare_device("cudaGraphSetConditional",
                                                 "void(uint64, uint32)"))
        set_value = declared[0]
        if isinstance(vty, types.Boolean) or (not vty.signed and vty.bitwidth <= 32):
            def impl(handle, value):
                set_value(np.uint64(handle), np.uint32(value))
        else:
            def impl(handle, value):
                # outside 0..2**32-1 (negatives wrap above it): 2**32-1, true
                wide = np.uint64(value)
                set_value(np.uint64(handle), np.uint32(wide) if wide <= np.uint64(_U32_MAX)
                          else np.uint32(_U32_MAX))
        return impl

    for fn, instruction in _GRIDDEPCONTROL:
        _mlir.register_asm_function(fn, _mlir_griddepcontrol_check(fn.__name__), instruction)


def _mlir_griddepcontrol_check(name):
    def check(*args):
        _check_griddepcontrol(name, args, _mlir.kernel_compute_capability())
    return check


# Where kernels are Python (the simulator) there is nothing to type.
if BACKEND.compiles_kernels:
    if has_numba_cuda():
        _register_numba_cuda()
    if has_numba_cuda_mlir():
        _mlir.extend(_register_numba_cuda_mlir)


# -- CPU code: a typing error saying where these belong -------------------------------

def _refuse_on_cpu(fn):
    def typer(*args):
        raise _outside_kernels(fn.__name__)
    overload(fn, target="cpu")(typer)


for _fn in (set_conditional, griddepcontrol_wait, griddepcontrol_launch_dependents):
    _refuse_on_cpu(_fn)
