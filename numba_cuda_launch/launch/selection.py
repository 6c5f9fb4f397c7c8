"""Which kernel overload a launch calls, and the typing errors that say why not.

Eagerly compiled kernels (``cuda.jit(sig)``) match under Numba's conversion
rules (a ``voidptr`` converts to any ``CPointer``); lazy kernels compile for
the argument types through numba-cuda's dispatcher, sharing its caches with
Python launches. Every refusal is a :class:`KernelTypingError` naming the
kernel and the parameter. What depends on the kind of kernel object
(numba-cuda's dispatchers, numba-cuda-mlir's) is asked of its
:class:`~numba_cuda_launch.launch.kernelkind.KernelKind`.
"""

from dataclasses import dataclass

from numba.core import types
from numba.core.typeconv import Conversion
from numba.core.typing.templates import signature

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.config import get_compute_capability
from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.launch.kernelkind import kernel_kind

__all__ = ["KernelSelection", "select_kernel", "launch_signature"]


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


def _select_compiled(kind, dispatcher, typingctx, args):
    name = kind.name(dispatcher)
    names = kind.param_names(dispatcher)
    compiled = kind.compiled_kernels(dispatcher)
    candidates, first_failure = [], None
    for argtypes, kernel in compiled.items():
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
    sigs = "; ".join(_describe(names, a) for a in compiled)
    if not candidates:
        if len(args) != len(names):
            raise KernelTypingError(
                "kernel %r takes %d argument(s) (%s), got %d"
                % (name, len(names), ", ".join(names), len(args)))
        if first_failure and len(compiled) == 1:
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


def _compile_for(kind, dispatcher, args):
    name = kind.name(dispatcher)
    names = kind.param_names(dispatcher)
    if len(args) != len(names):
        raise KernelTypingError(
            "kernel %r takes %d argument(s) (%s), got %d"
            % (name, len(names), ", ".join(names), len(args)))
    for i, ty in enumerate(args):
        problem = _launchable_problem(ty) or kind.argument_problem(ty)
        if problem:
            raise KernelTypingError(
                "kernel %r parameter %r (argument %d): got %s: %s"
                % (name, names[i], i + 1, ty, problem))
    argtypes = tuple(_unliteral(t) for t in args)
    try:
        kernel = kind.compile(dispatcher, argtypes)
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
    kind = kernel_kind(dispatcher)
    if kind.can_compile(dispatcher):
        exact = kind.compiled_kernels(dispatcher).get(tuple(_unliteral(a) for a in args))
        selection = (KernelSelection(exact, tuple(_unliteral(a) for a in args))
                     if exact is not None else _compile_for(kind, dispatcher, args))
    else:
        selection = _select_compiled(kind, dispatcher, typingctx, args)
    reasons = kind.unsupported_features(dispatcher, selection.kernel)
    if reasons:
        raise KernelTypingError(
            "kernel %r cannot be launched from compiled code: %s"
            % (kind.name(dispatcher), "; ".join(reasons)))
    return selection


def launch_signature(cfg_ty, args, kws, return_type=types.none):
    """Typing of a call on a configured kernel (see :class:`LaunchConfig`)."""
    if kws:
        raise KernelTypingError(
            "kernel %r: keyword arguments are not supported in kernel "
            "launches (got %s)" % (cfg_ty.kernel_name, ", ".join(kws)))
    select_kernel(cfg_ty.dispatcher, args)
    return signature(return_type, *args, recvr=cfg_ty)
