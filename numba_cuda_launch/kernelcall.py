"""Calling a configured kernel: ``kernel[grid, block, stream](args...)``.

Typing picks the kernel overload (:func:`select_kernel`); lowering packs the
arguments in numba-cuda's kernel ABI and calls ``cuLaunchKernel`` (or
``cuLaunchCooperativeKernel``) through the driver table. Two forms:

* ``cfg(args...)`` raises :class:`~numba_cuda_launch.CudaLaunchError` when
  the launch fails (in a ``@cfunc`` that is reported as unraisable);
* ``cfg.launch_status(args...)`` returns the driver's ``CUresult`` (``int32``,
  0 on success) and never raises: the form for XLA handlers and C callers.

``cfg.preload(args...)`` loads the image of the overload those arguments
select into the current context without launching (``CUresult``): for code
that must not load modules later, such as CUDA graph capture.
"""

import functools
from dataclasses import dataclass

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.typeconv import Conversion
from numba.core.typing.templates import (
    AttributeTemplate,
    bound_function,
    infer_getattr,
    signature,
)
from numba import njit
from numba.extending import lower_builtin

from numba_cuda_launch import _compat, driver
from numba_cuda_launch.config import get_compute_capability
from numba_cuda_launch.errors import CudaLaunchError, KernelTypingError
from numba_cuda_launch.halfmodel import float_to_half_bits
from numba_cuda_launch.image import emit_get_kernel, ensure_context_function, image_for_kernel
from numba_cuda_launch.launchconfig import LaunchConfig, launch_dims
from numba_cuda_launch.params import emit_param_array, flatten_values

__all__ = ["KernelSelection", "select_kernel", "launch_signature", "emit_launch"]


@dataclass(frozen=True)
class KernelSelection:
    """The kernel overload a launch calls and the types it takes."""

    kernel: object
    argtypes: tuple


def _describe(names, argtypes):
    return "(%s)" % ", ".join("%s: %s" % p for p in zip(names, argtypes))


def _unliteral(ty):
    if isinstance(ty, types.BaseTuple):
        return types.BaseTuple.from_types([_unliteral(t) for t in ty])
    return types.unliteral(ty)


def _launchable_problem(ty):
    """Why a value of type *ty* cannot be passed to a kernel, or None."""
    if ty == types.voidptr:
        return (
            "a raw pointer (voidptr) has no element type, so a lazily "
            "compiled kernel cannot be specialised for it: wrap it with "
            "numba.carray(ptr, shape, dtype), or give the kernel a signature "
            "(cuda.jit(sig)) with a CPointer parameter"
        )
    if isinstance(ty, (types.Array, types.CPointer) + _compat.LAUNCHABLE_SCALARS):
        return None
    if isinstance(ty, types.BaseTuple):
        for item in ty:
            problem = _launchable_problem(item)
            if problem:
                return problem
        return None
    return (
        "%s is a host-only type; kernels take arrays over device memory "
        "(numba.carray of a device pointer), pointers, scalars and tuples of "
        "these" % ty
    )


def _conversion(typingctx, actual, formal):
    if actual == formal:
        return Conversion.exact
    if actual == types.voidptr and isinstance(formal, types.CPointer):
        return Conversion.unsafe  # the seed's buffers[i] to a CPointer param
    return typingctx.can_convert(actual, formal)


def _rating(convs):
    return tuple(sum(1 for c in convs if c == kind)
                 for kind in (Conversion.unsafe, Conversion.safe, Conversion.promote))


def _select_compiled(dispatcher, typingctx, args):
    name = _compat.dispatcher_name(dispatcher)
    names = _compat.dispatcher_param_names(dispatcher)
    candidates, first_failure = [], None
    for argtypes, kernel in _compat.compiled_kernels(dispatcher).items():
        if len(argtypes) != len(args):
            continue
        convs = []
        for i, (actual, formal) in enumerate(zip(args, argtypes)):
            conv = _conversion(typingctx, actual, formal)
            if conv is None:
                first_failure = first_failure or (i, actual, formal)
                break
            convs.append(conv)
        else:
            candidates.append((_rating(convs), argtypes, kernel))
    sigs = "; ".join(_describe(names, a) for a in _compat.compiled_kernels(dispatcher))
    if not candidates:
        if len(args) != len(names):
            raise KernelTypingError(
                "kernel %r takes %d argument(s) (%s), got %d"
                % (name, len(names), ", ".join(names), len(args)))
        if first_failure and len(_compat.compiled_kernels(dispatcher)) == 1:
            i, actual, formal = first_failure
            raise KernelTypingError(
                "kernel %r parameter %r (argument %d): got %s, expected %s "
                "(the kernel was compiled as %s)"
                % (name, names[i], i + 1, actual, formal, sigs))
        raise KernelTypingError(
            "kernel %r has no compiled signature accepting %s; compiled: %s"
            % (name, _describe(names, args), sigs))
    candidates.sort(key=lambda c: c[0])
    if len(candidates) > 1 and candidates[0][0] == candidates[1][0]:
        raise KernelTypingError(
            "kernel %r: arguments %s match several compiled signatures "
            "equally well: %s and %s"
            % (name, _describe(names, args),
               _describe(names, candidates[0][1]), _describe(names, candidates[1][1])))
    _, argtypes, kernel = candidates[0]
    return KernelSelection(kernel, tuple(argtypes))


def _compile_for(dispatcher, args):
    name = _compat.dispatcher_name(dispatcher)
    names = _compat.dispatcher_param_names(dispatcher)
    if len(args) != len(names):
        raise KernelTypingError(
            "kernel %r takes %d argument(s) (%s), got %d"
            % (name, len(names), ", ".join(names), len(args)))
    for i, ty in enumerate(args):
        problem = _launchable_problem(ty)
        if problem:
            raise KernelTypingError(
                "kernel %r parameter %r (argument %d): got %s: %s"
                % (name, names[i], i + 1, ty, problem))
    argtypes = tuple(_unliteral(t) for t in args)
    try:
        kernel = _compat.compile_kernel(dispatcher, argtypes)
    except Exception as exc:
        hint = ""
        if get_compute_capability() is None and "driver" in str(exc).lower():
            hint = (
                "\n(no usable GPU: to compile without one, set "
                "NUMBA_CUDA_LAUNCH_CC=9.0 or call "
                "numba_cuda_launch.set_compute_capability((9, 0)))")
        raise KernelTypingError(
            "compiling kernel %r for %s failed:\n%s%s"
            % (name, _describe(names, argtypes), exc, hint)) from exc
    return KernelSelection(kernel, argtypes)


def select_kernel(dispatcher, args, typingctx=None):
    """Choose (compiling if the kernel is lazy) the overload of *dispatcher*
    a launch with argument types *args* calls.

    Eagerly compiled kernels (``cuda.jit(sig)``) match under Numba's
    conversion rules, a ``voidptr`` converting to any ``CPointer``; lazy
    kernels compile through numba-cuda's dispatcher (sharing its caches with
    Python launches). Raises :class:`KernelTypingError` naming the kernel and
    the parameter.
    """
    if typingctx is None:
        from numba.core.registry import cpu_target

        typingctx = cpu_target.typing_context
    args = tuple(args)
    if _compat.can_compile(dispatcher):
        exact = _compat.compiled_kernels(dispatcher).get(tuple(_unliteral(a) for a in args))
        selection = (KernelSelection(exact, tuple(_unliteral(a) for a in args))
                     if exact is not None else _compile_for(dispatcher, args))
    else:
        selection = _select_compiled(dispatcher, typingctx, args)
    reasons = _compat.unsupported_kernel_features(selection.kernel)
    if reasons:
        raise KernelTypingError(
            "kernel %r cannot be launched from compiled code: %s"
            % (_compat.dispatcher_name(dispatcher), "; ".join(reasons)))
    return selection


def launch_signature(cfg_ty, args, kws, return_type=types.none):
    """Typing of a call on a configured kernel (see :class:`LaunchConfig`)."""
    if kws:
        raise KernelTypingError(
            "kernel %r: keyword arguments are not supported in kernel "
            "launches (got %s)" % (cfg_ty.kernel_name, ", ".join(kws)))
    select_kernel(cfg_ty.dispatcher, args)
    return signature(return_type, *args, recvr=cfg_ty)


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
    """Emit loading the selected overload's image into the current context
    (``cuKernelGetFunction`` forces the per-context load); returns the
    ``CUresult``."""
    kernel = select_kernel(cfg_ty.dispatcher, argtypes).kernel
    i32 = ir.IntType(32)
    if _compat.is_simulated(kernel):
        return ir.Constant(i32, 0)  # nothing to load
    status_ptr, handle = emit_get_kernel(builder, image_for_kernel(kernel))
    loaded = builder.icmp_signed("==", builder.load(status_ptr), ir.Constant(i32, 0))
    with builder.if_then(loaded, likely=True):
        bound = builder.call(ensure_context_function(builder.module), [])
        builder.store(bound, status_ptr)
        with builder.if_then(builder.icmp_signed("==", bound, ir.Constant(i32, 0))):
            func = cgutils.alloca_once(builder, ir.IntType(8).as_pointer())
            builder.store(driver.call(builder, "cuKernelGetFunction", [func, handle]),
                          status_ptr)
    return builder.load(status_ptr)


def emit_launch(context, builder, cfg_ty, cfg_val, argtypes, argvals, catch=True):
    """Emit the launch of a configured kernel; returns the ``CUresult``.

    Under the CUDA simulator the kernel runs in Python; an exception it
    raises propagates unless *catch* (then the status is
    ``CUDA_ERROR_LAUNCH_FAILED``)."""
    selection = select_kernel(cfg_ty.dispatcher, argtypes)
    kernel = selection.kernel
    values = [_to_formal(context, builder, v, a, f)
              for v, a, f in zip(argvals, argtypes, selection.argtypes)]
    if _compat.is_simulated(kernel):
        from numba_cuda_launch.simulator import emit_simulated_launch

        cfg = cgutils.create_struct_proxy(cfg_ty)(context, builder, value=cfg_val)
        return emit_simulated_launch(context, builder, cfg, kernel, selection.argtypes,
                                     values, catch)
    flat = flatten_values(context, builder, selection.argtypes, values)
    params = emit_param_array(
        builder, flat, _compat.kernel_param_llvm_types(kernel), context.target_data)

    status_ptr, handle = emit_get_kernel(builder, image_for_kernel(kernel))
    cfg = cgutils.create_struct_proxy(cfg_ty)(context, builder, value=cfg_val)
    loaded = builder.icmp_signed("==", builder.load(status_ptr), ir.Constant(ir.IntType(32), 0))
    with builder.if_then(loaded, likely=True):
        common = [handle] + launch_dims(builder, cfg) + [cfg.sharedmem, cfg.stream, params]

        def launch():
            if _compat.kernel_is_cooperative(kernel):
                return driver.call(builder, "cuLaunchCooperativeKernel", common)
            null = ir.Constant(ir.IntType(8).as_pointer().as_pointer(), None)
            return driver.call(builder, "cuLaunchKernel", common + [null])

        builder.store(launch(), status_ptr)
        # A thread with no current context (a fresh thread of the caller's)
        # gets device 0's primary context, as with the CUDA runtime API.
        no_context = builder.icmp_signed(
            "==", builder.load(status_ptr),
            ir.Constant(ir.IntType(32), driver.CUDA_ERROR_INVALID_CONTEXT))
        with builder.if_then(no_context, likely=False):
            bound = builder.call(ensure_context_function(builder.module), [])
            bound_ok = builder.icmp_signed("==", bound, ir.Constant(ir.IntType(32), 0))
            with builder.if_then(bound_ok):
                builder.store(launch(), status_ptr)
    return builder.load(status_ptr)


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


def call_jitted(context, builder, dispatcher, argtypes, args):
    """Emit a call of an @njit *dispatcher* from lowering code (its errors
    propagate to the caller, as for any call of a jitted function)."""
    fnty = context.typing_context.resolve_value_type(dispatcher)
    sig = fnty.get_call_type(context.typing_context, tuple(argtypes), {})
    return context.get_function(fnty, sig)(builder, args)


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
