"""The launch plan: what one launch site runs, decided once when its call is
typed and carried as an immutable value (:class:`LaunchPlan`) to the
lowering, the backend, ``cache=True``, ``kernel_handle``, ``jax_kernel``
handlers and ``aot.build``: the kernel source, the overload (chosen by the
conversion rules below, or compiled for a lazy kernel), its image or live
handle, its parameter layout and how it is launched. A plan is a function of
the kernel, the argument types and the launch target alone, so a fresh
process (a ``cache=True`` miss) makes the same one. docs/architecture.md.
"""

import functools
import weakref
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from numba import typeof
from numba.core import types
from numba.core.registry import cpu_target
from numba.core.typeconv import Conversion
from numba.core.typing.templates import signature

from numba_cuda_launch.compat import cuda_target
from numba_cuda_launch.compat import overrides as _overrides
from numba_cuda_launch.cudadrv.image import KernelImage
from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.kernels import ImageError, KernelSource, source_of
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.conditionalhandle import ConditionalHandleType
from numba_cuda_launch.launch.devicearray import DeviceArray, as_array_type
from numba_cuda_launch.launch.refusals import leading_line

__all__ = ["LaunchPlan", "KernelParam", "plan_launch", "launch_signature", "lossy_conversion",
           "integer_range", "range_words", "param_layout", "LAUNCHABLE_SCALARS"]

# Argument types a kernel takes (numba-cuda's _Kernel._prepare_args).
LAUNCHABLE_SCALARS = (types.Integer, types.Float, types.Boolean, types.Complex,
                      types.NPDatetime, types.NPTimedelta)


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


def _laid_out(sizes):
    """``(size, offset)`` of parameters of byte *sizes* in one buffer with
    natural alignment."""
    offset = 0
    for size in sizes:
        offset = (offset + size - 1) // size * size if size else offset
        yield size, offset
        offset += size


def param_layout(source, names, argtypes, llvm_types, target_data) -> Tuple[KernelParam, ...]:
    """The parameters of a kernel of *source* taking *argtypes*, as
    :class:`KernelParam` records."""
    flat_names = [n for name, ty in zip(names, argtypes)
                  for n in source.flat_param_names(name, ty)]
    if len(flat_names) != len(llvm_types):
        raise AssertionError(
            "parameter layout mismatch: %d names for %d kernel parameters"
            % (len(flat_names), len(llvm_types)))
    return tuple(KernelParam(name, size, offset) for name, (size, offset) in zip(
        flat_names, _laid_out([lty.get_abi_size(target_data) for lty in llvm_types])))


@dataclass(frozen=True)
class LaunchPlan:
    """What a launch site with these argument types runs (see the module)."""

    source: KernelSource
    #: what the user launches (a dispatcher, a foreign kernel)
    kernel: Any
    name: str
    #: the compiled overload launched
    overload: Any
    #: the overload's parameter types: the arguments given, then the defaults
    argtypes: Tuple[types.Type, ...]
    param_names: Tuple[str, ...] = ()
    #: values of trailing parameters left to their defaults
    defaults: Tuple[Any, ...] = ()
    #: the entry point; None when the backend launches no image (the simulator)
    entry_name: Optional[str] = None
    image: Optional[KernelImage] = None
    #: ``(address, "CUkernel" or "CUfunction")`` of a kernel another library loaded
    live: Optional[Tuple[int, str]] = None
    #: the LLVM types of the entry point's parameters
    param_types: Tuple[Any, ...] = ()
    cooperative: bool = False
    #: whether every launch is a programmatic dependent one (a kernel
    #: compiled to expect it: Triton's ``launch_pdl``)
    dependent: bool = False

    @functools.cached_property
    def params(self) -> Tuple[KernelParam, ...]:
        """The entry point's parameters: where each comes from, its size and
        offset (:class:`KernelParam`)."""
        return param_layout(self.source, self.param_names, self.argtypes, self.param_types,
                            cpu_target.target_context.target_data)

    @functools.cached_property
    def param_sizes(self) -> Tuple[int, ...]:
        """The byte size of each of the entry point's parameters."""
        target_data = cpu_target.target_context.target_data
        return tuple([t.get_abi_size(target_data) for t in self.param_types])

    def flatten(self, context, builder, values) -> list:
        """The LLVM values of the entry point's parameters for *values* of
        the plan's argument types."""
        return self.source.flatten(context, builder, self.argtypes, values)


def _describe(names, argtypes):
    return "(%s)" % ", ".join("%s: %s" % p for p in zip(names, argtypes))


# argument types a kernel is compiled for as other types (:func:`_unliteral`)
_COMPILED_AS = (types.Literal, types.BaseTuple, DeviceArray)


def _unliteral(ty):
    """The type a kernel is compiled for: literals dropped, device arrays
    as the arrays the kernel receives."""
    if isinstance(ty, types.BaseTuple):
        return types.BaseTuple.from_types([_unliteral(t) for t in ty])
    ty = types.unliteral(ty)
    return as_array_type(ty) if isinstance(ty, DeviceArray) else ty


def _launchable_problem(ty):
    """Why a value of type *ty* cannot be passed to a kernel, or None."""
    if ty == types.voidptr:
        return (
            "a raw pointer (voidptr) has no element type, so a lazily "
            "compiled kernel cannot be specialised for it: wrap it with "
            "numba.carray(ptr, shape, dtype), or give the kernel a signature "
            "(cuda.jit(sig)) with a CPointer parameter"
        )
    if isinstance(ty, (types.Array, types.CPointer, DeviceArray, ConditionalHandleType)
                  + LAUNCHABLE_SCALARS):
        return None
    if isinstance(ty, types.BaseTuple):
        return _namedtuple_problem(ty) or next(
            filter(None, (_launchable_problem(item) for item in ty)), None)
    return (
        "%s is a host-only type; kernels take arrays over device memory "
        "(numba.carray of a device pointer), pointers, scalars and tuples of "
        "these" % ty
    )


def _namedtuple_problem(ty):
    """Why *ty*, a namedtuple or a tuple holding one, is not passed to a
    kernel, or None: Numba converts a namedtuple to a tuple of the same
    items when typing, but cannot lower that conversion."""
    if isinstance(ty, (types.NamedTuple, types.NamedUniTuple)):
        return ("a namedtuple (%s) is not passed to kernels from compiled code; pass "
                "its items as a plain tuple, tuple(value), or as separate arguments"
                % ty.instance_class.__name__)
    if isinstance(ty, types.BaseTuple):
        return next(filter(None, (_namedtuple_problem(item) for item in ty)), None)
    return None


def lossy_conversion(actual, formal):
    """Why passing a value of type *actual* to a parameter of type *formal*
    would change what it means, or None. The conversion rule of launches
    from compiled code (numba-cuda's Python launch refuses the same):

    * a float or complex never becomes an integer or a boolean (3.7 would
      launch as 3, NaN as INT_MIN);
    * a complex never becomes a real (the imaginary part would be dropped);
    * a constant integer must fit the parameter's type (an address given to
      a pointer parameter: 0..2**64-1).

    Other conversions follow Numba's rules; an integer that does not fit a
    narrower integer parameter at run time refuses the launch
    (``CUDA_ERROR_INVALID_VALUE``) instead of wrapping, and so does a finite
    float that a narrower float parameter would make infinite.
    """
    if isinstance(actual, types.BaseTuple) and isinstance(formal, types.BaseTuple) \
            and len(actual) == len(formal):
        for a, f in zip(actual, formal):
            why = lossy_conversion(a, f)
            if why:
                return why
        return None
    plain = types.unliteral(actual)
    if isinstance(formal, (types.Integer, types.Boolean)) and \
            isinstance(plain, (types.Float, types.Complex)):
        return "a %s is not converted to %s (the value would be truncated)" % (plain, formal)
    if isinstance(formal, types.Float) and isinstance(plain, types.Complex):
        return "a %s is not converted to %s (the imaginary part would be lost)" % (plain, formal)
    value = getattr(actual, "literal_value", None)
    span = integer_range(formal)
    if span and isinstance(value, int) and not isinstance(value, bool) and \
            not span[0] <= value <= span[1]:
        return "the constant %d %s" % (value, range_words(formal))
    return None


def integer_range(formal):
    """``(lowest, highest)``: the integers a parameter of type *formal*
    takes, a constant at typing and a run-time value at the launch alike
    (:mod:`.call`): an integer type's range, or 0..2**bits-1 for a pointer
    parameter given an address (a type with ``address_bits``); None for
    other parameters."""
    if isinstance(formal, types.Integer):
        return formal.minval, formal.maxval
    bits = getattr(formal, "address_bits", None)
    return (0, (1 << bits) - 1) if bits else None


def range_words(formal):
    """What an integer outside :func:`integer_range` of *formal* is not."""
    if isinstance(formal, types.Integer):
        return "does not fit %s" % formal
    return "is not an address (0..2**%d-1)" % formal.address_bits


def _conversion(typingctx, actual, formal):
    if actual == formal:
        return Conversion.exact
    if actual == types.voidptr and isinstance(formal, types.CPointer):
        return Conversion.unsafe  # a launcher's void* buffers[i] to a CPointer param
    if lossy_conversion(actual, formal):
        return None
    return typingctx.can_convert(as_array_type(actual), formal)


def _rating(convs):
    return tuple([convs.count(kind)
                  for kind in (Conversion.unsafe, Conversion.safe, Conversion.promote)])


def _select_compiled(source, dispatcher, args, name, names):
    typingctx = cpu_target.typing_context
    compiled = source.compiled_kernels(dispatcher)
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
        _check_count(name, names, args)
        if first_failure and len(compiled) == 1:
            i, actual, formal = first_failure
            why = lossy_conversion(actual, formal)
            raise KernelTypingError(
                "kernel %r parameter %r (argument %d): got %s, expected %s%s "
                "(the kernel was compiled as %s)"
                % (name, names[i], i + 1, actual, formal, ": " + why if why else "", sigs))
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
    return kernel, tuple(argtypes)


def _check_count(name, names, args):
    if len(args) != len(names):
        raise KernelTypingError(
            "kernel %r takes %d argument(s) (%s), got %d"
            % (name, len(names), ", ".join(names), len(args)))


def _compile_for(source, dispatcher, args, name, names):
    argtypes = tuple([_unliteral(t) if isinstance(t, _COMPILED_AS) else t for t in args])
    exact = source.compiled_kernels(dispatcher).get(argtypes)
    if exact is not None:  # compiled already (by a Python launch, say)
        return exact, argtypes
    _check_count(name, names, args)
    for i, ty in enumerate(args):
        # The adapter is asked about the type the kernel is compiled for (a
        # device array as the array the kernel receives).
        problem = _launchable_problem(ty) or source.argument_problem(argtypes[i])
        if problem:
            raise KernelTypingError(
                "kernel %r parameter %r (argument %d): got %s: %s"
                % (name, names[i], i + 1, ty, source.lazy_problem(dispatcher, problem)))
    # numba-cuda-mlir may have been imported after this package: its no-GPU
    # override applies before it compiles
    _overrides.install()
    try:
        return source.compile(dispatcher, argtypes), argtypes
    except Exception as exc:
        raise _compile_failure(name, names, argtypes, exc) from exc


def _compile_failure(name, names, argtypes, exc):
    """The typing error of kernel *name* failing to compile for *argtypes*
    with *exc*: what to do first (a missing compiler library, no GPU), then
    the compiler's text."""
    cause, text = cuda_target.compile_failure_cause(exc)
    if not cause:  # a refusal of the package's, in the kernel, leads (set_conditional's)
        lead = leading_line(text.splitlines())
        cause = lead[1] if lead else ""
    hint = ""
    size = _parameter_bytes(argtypes)
    if size is not None and size > _PARAMETER_LIMIT:
        hint = ("\n(its parameters take %d bytes; a CUDA kernel takes at most %d: pass "
                "large data in device memory)" % (size, _PARAMETER_LIMIT))
    return KernelTypingError(
        "compiling kernel %r for %s failed:%s\n%s%s"
        % (name, _describe(names, argtypes), " " + cause if cause else "", text, hint))


_PARAMETER_LIMIT = 32764  # bytes of kernel parameters (CUDA 12.1+, Volta and newer)


def _parameter_bytes(argtypes):
    """About how many bytes of parameters *argtypes* take (laid out as
    numba-cuda's ABI lays them out, as the CPU data models flatten), or None
    if unknown."""
    context = cpu_target.target_context
    try:
        argtypes = [as_array_type(t) for t in argtypes]
        sizes = [lty.get_abi_size(context.target_data)
                 for lty in context.get_arg_packer(argtypes).argument_types]
    except Exception:  # a type without a CPU data model: no hint
        return None
    layout = list(_laid_out(sizes))
    return sum(layout[-1]) if layout else 0


def _fill_defaults(params, args, name):
    """The argument types with the kernel's defaults for trailing parameters
    (*params*, ``inspect.Parameter``) not given, and those defaults' values;
    refuses ``*args``/``**kwargs`` kernels, whose parameter list compiled
    code cannot know."""
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            raise KernelTypingError(
                "kernel %r has a %s parameter %r: launches from compiled code need a "
                "fixed list of positional parameters" % (
                    name, {p.VAR_POSITIONAL: "*args", p.VAR_KEYWORD: "**kwargs",
                           p.KEYWORD_ONLY: "keyword-only"}[p.kind], p.name))
    missing = params[len(args):]
    if not missing or any(p.default is p.empty for p in missing):
        return tuple(args), ()
    values = tuple(p.default for p in missing)
    try:
        types_ = tuple(typeof(v) for v in values)
    except Exception:
        types_ = (None,)
    if any(t is None or _launchable_problem(t) for t in types_):
        raise KernelTypingError(
            "kernel %r: the defaults %s of parameters %s cannot be passed from "
            "compiled code; pass those arguments" % (
                name, values, ", ".join(p.name for p in missing)))
    return tuple(args) + types_, values


def _make_plan(source, dispatcher, args, name):
    name = name or source.kernel_name(dispatcher)
    why = BACKEND.refusal(source, dispatcher)
    if why:
        raise KernelTypingError("kernel %r cannot be launched here: %s" % (name, why))
    params = source.parameters(dispatcher)
    names = tuple([p.name for p in params])
    args, defaults = _fill_defaults(params, args, name)
    for i, ty in enumerate(args):  # before an overload of the plain tuple is matched
        problem = isinstance(ty, types.BaseTuple) and _namedtuple_problem(ty)
        if problem:
            _check_count(name, names, args)
            raise KernelTypingError("kernel %r parameter %r (argument %d): got %s: %s"
                                    % (name, names[i], i + 1, ty, problem))
    choose = _compile_for if source.can_compile(dispatcher) else _select_compiled
    overload, argtypes = choose(source, dispatcher, args, name, names)
    reasons = source.launch_problems(dispatcher, overload)
    if reasons:
        raise KernelTypingError("kernel %r cannot be launched from compiled code: %s"
                                % (name, "; ".join(reasons)))
    try:
        parts = BACKEND.plan_parts(source, overload)
    except ImageError as exc:
        raise KernelTypingError("kernel %r cannot be launched from compiled code: %s"
                                % (name, exc)) from exc
    return LaunchPlan(source, dispatcher, name, overload, argtypes, names, defaults, **parts)


# {kernel object: {(argument types, target architecture): plan}}
_plans = weakref.WeakKeyDictionary()


def plan_launch(dispatcher, args, source=None, name=None) -> LaunchPlan:
    """The :class:`LaunchPlan` of a launch of *dispatcher* with argument
    types *args*, made the first time these types are seen for the
    architecture images are built for (*source*: the kernel's, when the
    caller knows it, and *name* the kernel's). Eagerly compiled kernels (``cuda.jit(sig)``) match
    under Numba's conversion rules (a ``voidptr`` converts to any
    ``CPointer``); lazy kernels compile through their source's
    dispatcher, sharing its caches with Python launches. Raises
    :class:`KernelTypingError` naming the kernel and the parameter."""
    try:
        key = (tuple(args), cuda_target.image_target())
    except Exception as exc:
        # with a GPU, asking for its architecture loads the compiler library
        # (numba-cuda's availability check): a missing one fails the compile
        source = source or source_of(dispatcher)
        names = tuple([p.name for p in source.parameters(dispatcher)])
        raise _compile_failure(name or source.kernel_name(dispatcher), names, tuple(args),
                               exc) from exc
    try:
        known = _plans.setdefault(dispatcher, {})
    except TypeError:  # not weakly referenceable: planned at each call
        known = {}
    plan = known.get(key)
    if plan is None:
        plan = known[key] = _make_plan(source or source_of(dispatcher), dispatcher, key[0], name)
    return plan


def launch_signature(cfg_ty, args, kws, return_type=types.none):
    """Typing of a call on a configured kernel (see :class:`LaunchConfig`):
    plans the launch the lowering will emit."""
    if kws:
        raise KernelTypingError(
            "kernel %r: keyword arguments are not supported in kernel "
            "launches (got %s)" % (cfg_ty.kernel_name, ", ".join(kws)))
    plan_launch(cfg_ty.dispatcher, args, cfg_ty.source, cfg_ty.kernel_name)
    return signature(return_type, *args, recvr=cfg_ty)
