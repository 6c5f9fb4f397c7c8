"""Which kernel overload a launch calls, and the typing errors that say why not.

What depends on a kernel's compiler is asked of its adapter in compat
(:data:`COMPILERS`; docs/architecture.md). A selection is made once, when the
call is typed, and looked up again by the lowering and anything else given
the same kernel and argument types: a function of those alone, so a fresh
process (a ``cache=True`` miss) makes the same one.
"""

import weakref
from dataclasses import dataclass

from numba import typeof
from numba.core import types
from numba.core.registry import cpu_target
from numba.core.typeconv import Conversion
from numba.core.typing.templates import signature

from numba_cuda_launch.compat import foreign_kernels as _foreign
from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.compat import numba_cuda_mlir as _mlir
from numba_cuda_launch.compat import overrides as _overrides
from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.launch.devicearray import DeviceArray, as_array_type
from numba_cuda_launch.launch.params import param_layout

__all__ = ["COMPILERS", "compiler_for", "KernelSelection", "select_kernel",
           "launch_signature", "lossy_conversion"]

#: The kernel compilers' adapters, asked in order which one a kernel object
#: belongs to; a new kernel source is one adapter in compat and one entry here.
COMPILERS = (_compat.KERNELS, _mlir.KERNELS, _foreign.KERNELS)


def compiler_for(dispatcher):
    """The adapter of the compiler *dispatcher* (a kernel object) belongs to."""
    for compiler in COMPILERS:
        if compiler.claims(dispatcher):
            return compiler
    raise TypeError("%r is not a kernel of %s" % (
        dispatcher, " or ".join(c.name for c in COMPILERS)))


@dataclass(frozen=True)
class KernelSelection:
    """The kernel overload a launch calls, the types it takes and the names
    of its parameters."""

    kernel: object
    argtypes: tuple
    param_names: tuple = ()
    #: values of trailing parameters left to their defaults, after the
    #: arguments given (their types end *argtypes*)
    defaults: tuple = ()


def _describe(names, argtypes):
    return "(%s)" % ", ".join("%s: %s" % p for p in zip(names, argtypes))


def _unliteral(ty):
    """The type a kernel is compiled for: literals dropped, device arrays
    as the arrays the kernel receives."""
    if isinstance(ty, types.BaseTuple):
        return types.BaseTuple.from_types([_unliteral(t) for t in ty])
    return as_array_type(types.unliteral(ty))


def _launchable_problem(ty):
    """Why a value of type *ty* cannot be passed to a kernel, or None."""
    if ty == types.voidptr:
        return (
            "a raw pointer (voidptr) has no element type, so a lazily "
            "compiled kernel cannot be specialised for it: wrap it with "
            "numba.carray(ptr, shape, dtype), or give the kernel a signature "
            "(cuda.jit(sig)) with a CPointer parameter"
        )
    if isinstance(ty, (types.Array, types.CPointer, DeviceArray) + _compat.LAUNCHABLE_SCALARS):
        return None
    if isinstance(ty, (types.NamedTuple, types.NamedUniTuple)):
        return ("a namedtuple (%s) is not passed to kernels from compiled code; pass "
                "its items as a plain tuple, tuple(value), or as separate arguments"
                % ty.instance_class.__name__)
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
    (``CUDA_ERROR_INVALID_VALUE``) instead of wrapping.
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
    if isinstance(formal, types.Integer) and isinstance(value, int) and \
            not isinstance(value, bool) and not formal.minval <= value <= formal.maxval:
        return "the constant %d does not fit %s" % (value, formal)
    bits = getattr(formal, "address_bits", None)  # a pointer parameter given an address
    if bits and isinstance(value, int) and not isinstance(value, bool) and \
            not 0 <= value < 1 << bits:
        return "the constant %d is not an address (0..2**%d-1)" % (value, bits)
    return None


def _conversion(typingctx, actual, formal):
    if actual == formal:
        return Conversion.exact
    if actual == types.voidptr and isinstance(formal, types.CPointer):
        return Conversion.unsafe  # a launcher's void* buffers[i] to a CPointer param
    if lossy_conversion(actual, formal):
        return None
    return typingctx.can_convert(as_array_type(actual), formal)


def _rating(convs):
    return tuple(sum(1 for c in convs if c == kind)
                 for kind in (Conversion.unsafe, Conversion.safe, Conversion.promote))


def _select_compiled(compiler, dispatcher, args, name, names):
    typingctx = cpu_target.typing_context
    compiled = compiler.compiled_kernels(dispatcher)
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


def _compile_for(compiler, dispatcher, args, name, names):
    argtypes = tuple(_unliteral(t) for t in args)
    exact = compiler.compiled_kernels(dispatcher).get(argtypes)
    if exact is not None:  # compiled already (by a Python launch, say)
        return exact, argtypes
    _check_count(name, names, args)
    for i, ty in enumerate(args):
        # The adapter is asked about the type the kernel is compiled for (a
        # device array as the array the kernel receives).
        problem = _launchable_problem(ty) or compiler.argument_problem(argtypes[i])
        if problem:
            raise KernelTypingError(
                "kernel %r parameter %r (argument %d): got %s: %s"
                % (name, names[i], i + 1, ty, _compat.lazy_argument_problem(dispatcher, problem)))
    # numba-cuda-mlir may have been imported after this package: its no-GPU
    # override applies before it compiles
    _overrides.install()
    try:
        return compiler.compile(dispatcher, argtypes), argtypes
    except Exception as exc:
        cause, text = _compat.no_gpu_cause(exc)  # what to do goes first
        hint = ""
        size = _parameter_bytes(names, argtypes)
        if size is not None and size > _PARAMETER_LIMIT:
            hint = ("\n(its parameters take %d bytes; a CUDA kernel takes at most %d: pass "
                    "large data in device memory)" % (size, _PARAMETER_LIMIT))
        raise KernelTypingError(
            "compiling kernel %r for %s failed:%s\n%s%s"
            % (name, _describe(names, argtypes), " " + cause if cause else "", text, hint)
        ) from exc


_PARAMETER_LIMIT = 32764  # bytes of kernel parameters (CUDA 12.1+, Volta and newer)


def _parameter_bytes(names, argtypes):
    """About how many bytes of parameters *argtypes* take (laid out as a
    numba-cuda kernel's), or None if unknown."""
    context = cpu_target.target_context
    try:
        argtypes = [as_array_type(t) for t in argtypes]
        layout = param_layout(_compat.KERNELS, names, argtypes,
                              context.get_arg_packer(argtypes).argument_types,
                              context.target_data)
    except Exception:  # a type without a CPU data model: no hint
        return None
    return layout[-1].offset + layout[-1].size if layout else 0


def _fill_defaults(compiler, dispatcher, args, name):
    """The argument types with the kernel's defaults for trailing parameters
    not given, and those defaults' values; refuses ``*args``/``**kwargs``
    kernels, whose parameter list compiled code cannot know."""
    params = compiler.parameters(dispatcher)
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


def _select(dispatcher, args):
    compiler = compiler_for(dispatcher)
    name = compiler.kernel_name(dispatcher)
    why = compiler.unavailable(dispatcher)
    if why:
        raise KernelTypingError("kernel %r cannot be launched here: %s" % (name, why))
    names = tuple(p.name for p in compiler.parameters(dispatcher))
    args, defaults = _fill_defaults(compiler, dispatcher, args, name)
    choose = _compile_for if compiler.can_compile(dispatcher) else _select_compiled
    kernel, argtypes = choose(compiler, dispatcher, args, name, names)
    reasons = compiler.launch_problems(dispatcher, kernel)
    if reasons:
        raise KernelTypingError("kernel %r cannot be launched from compiled code: %s"
                                % (name, "; ".join(reasons)))
    return KernelSelection(kernel, argtypes, names, defaults)


# {kernel object: {(argument types, target architecture): selection}}
_selections = weakref.WeakKeyDictionary()


def select_kernel(dispatcher, args):
    """The :class:`KernelSelection` of the overload of *dispatcher* a launch
    with argument types *args* calls, chosen the first time these types are
    seen for the architecture images are built for. Eagerly compiled kernels
    (``cuda.jit(sig)``) match under Numba's conversion rules (a ``voidptr``
    converts to any ``CPointer``); lazy kernels compile through their
    compiler's dispatcher, sharing its caches with Python launches. Raises
    :class:`KernelTypingError` naming the kernel and the parameter."""
    key = (tuple(args), _compat.image_target())
    try:
        known = _selections.setdefault(dispatcher, {})
    except TypeError:  # not weakly referenceable: chosen at each call
        known = {}
    if key not in known:
        known[key] = _select(dispatcher, key[0])
    return known[key]


def launch_signature(cfg_ty, args, kws, return_type=types.none):
    """Typing of a call on a configured kernel (see :class:`LaunchConfig`):
    selects the overload the lowering will launch."""
    if kws:
        raise KernelTypingError(
            "kernel %r: keyword arguments are not supported in kernel "
            "launches (got %s)" % (cfg_ty.kernel_name, ", ".join(kws)))
    select_kernel(cfg_ty.dispatcher, args)
    return signature(return_type, *args, recvr=cfg_ty)
