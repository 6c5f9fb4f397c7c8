"""Calling a configured kernel: ``kernel[grid, block, stream](args...)``.

Typing picks the kernel overload (:mod:`.selection`); lowering converts the
arguments to the overload's parameter types and hands the launch to the
kernel's backend (:mod:`.backends`). Three forms:

* ``cfg(args...)`` raises :class:`~numba_cuda_launch.CudaLaunchError` when
  the launch fails (in a ``@cfunc`` that is reported as unraisable);
* ``cfg.launch_status(args...)`` returns the driver's ``CUresult`` (``int32``,
  0 on success) and never raises: the form for XLA handlers and C callers;
* ``cfg.preload(args...)`` loads the image of the overload those arguments
  select into the current context without launching (``CUresult``): for code
  that must not load modules later, such as CUDA graph capture.
"""

import functools

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.core.typing.templates import AttributeTemplate, bound_function, infer_getattr, signature
from numba.extending import lower_builtin

from numba_cuda_launch.errors import CudaLaunchError
from numba_cuda_launch.launch.backends import backend_for, call_jitted
from numba_cuda_launch.launch.halffloat import float_to_half_bits
from numba_cuda_launch.launch.launchconfig import LaunchConfig
from numba_cuda_launch.launch.selection import launch_signature, select_kernel

__all__ = ["emit_launch", "emit_preload"]


def _to_formal(context, builder, val, actual, formal):
    """Convert an argument to the kernel parameter's type."""
    if actual == formal:
        return val
    if actual == types.voidptr and isinstance(formal, types.CPointer):
        return builder.bitcast(val, context.get_value_type(formal))
    if formal == types.float16 and actual != types.float16:
        # Convert a CPU number to the bits of a float16, which the kernel ABI
        # passes as 16-bit unsigned.
        wide = context.cast(builder, val, actual, types.float64)
        return context.compile_internal(builder, float_to_half_bits,
                                        signature(types.uint16, types.float64), [wide])
    return context.cast(builder, val, actual, formal)


def emit_preload(context, builder, cfg_ty, argtypes):
    """Emit loading the selected overload's code into the current context;
    returns the ``CUresult``."""
    kernel = select_kernel(cfg_ty.dispatcher, argtypes).kernel
    return backend_for(kernel).emit_preload(context, builder, kernel)


def emit_launch(context, builder, cfg_ty, cfg_val, argtypes, argvals, catch=True):
    """Emit the launch of a configured kernel through its backend; returns
    the ``CUresult``. Without *catch*, a backend that runs the kernel in
    Python (the simulator) lets its exception propagate."""
    selection = select_kernel(cfg_ty.dispatcher, argtypes)
    values = [_to_formal(context, builder, v, a, f)
              for v, a, f in zip(argvals, argtypes, selection.argtypes)]
    cfg = cgutils.create_struct_proxy(cfg_ty)(context, builder, value=cfg_val)
    return backend_for(selection.kernel).emit_launch(
        context, builder, selection.kernel, cfg, selection.argtypes, values, catch)


@lower_builtin(LaunchConfig, LaunchConfig, types.VarArg(types.Any))
def lower_launch(context, builder, sig, args):
    """``cfg(args...)``: launch, raising CudaLaunchError on failure."""
    cfg_ty = sig.args[0]
    status = emit_launch(context, builder, cfg_ty, args[0], sig.args[1:], args[1:],
                         catch=False)
    failed = builder.icmp_signed("!=", status, ir.Constant(status.type, 0))
    with cgutils.if_unlikely(builder, failed):
        call_jitted(context, builder, _launch_error_raiser(cfg_ty.kernel_name),
                    (types.int32,), [status])
    return context.get_dummy_value()


@functools.lru_cache(maxsize=None)
def _launch_error_raiser(kernel_name):
    # The exception is raised in an @njit function of its own: numba 0.68
    # mishandles a dynamic exception (one with a run-time argument) raised in
    # a @cfunc's body or in a compile_internal subroutine (the cfunc wrapper
    # keeps the GIL; the arguments fail to box), but handles one propagated
    # from a called dispatcher.
    @njit
    def raise_launch_error(status):
        raise CudaLaunchError(status, kernel_name)

    return raise_launch_error


@infer_getattr
class LaunchConfigAttributes(AttributeTemplate):
    key = LaunchConfig
    metadata = {"target": "cpu"}

    @bound_function("LaunchConfig.launch_status")
    def resolve_launch_status(self, cfg_ty, args, kws):
        return launch_signature(cfg_ty, args, kws, return_type=types.int32)

    @bound_function("LaunchConfig.preload")
    def resolve_preload(self, cfg_ty, args, kws):
        return launch_signature(cfg_ty, args, kws, return_type=types.int32)


@lower_builtin("LaunchConfig.launch_status", LaunchConfig, types.VarArg(types.Any))
def lower_launch_status(context, builder, sig, args):
    """``cfg.launch_status(args...)``: launch, returning the CUresult."""
    return emit_launch(context, builder, sig.args[0], args[0], sig.args[1:], args[1:])


@lower_builtin("LaunchConfig.preload", LaunchConfig, types.VarArg(types.Any))
def lower_preload(context, builder, sig, args):
    """``cfg.preload(args...)``: load the image into the current context."""
    return emit_preload(context, builder, sig.args[0], sig.args[1:])
