"""Numba's CPU dispatcher (numba 0.62 to 0.68) and ``typeof``: fast typing of
registered classes (:func:`register_typeof`); objects of classes Numba has no
typing for (device arrays, stream objects) typed before Numba's entry for
``object``, whose buffer-protocol attempt some device arrays refuse with an
error (:func:`type_unknown_objects_with`); *routers* for calls whose C typecodes
disagree with ``typeof`` (device arrays whose ``_numba_type_`` says
``Array``), so they stay in C instead of reaching a host array's unboxer (a
wrong guess only takes the slow path; docs/devicearrays.md); and typing
errors that start with what is wrong. A Numba without the internals used
(:data:`AVAILABLE`) keeps its own behaviour.
"""

import inspect
import itertools
import sys
import types as pytypes
import weakref

import numpy as np
from llvmlite import ir
from numba import _dynfunc
from numba.core import dispatcher as _dispatcher, errors, types
from numba.core.typing.typeof import Purpose, typeof
from numba.core.compiler_lock import global_compiler_lock

__all__ = ["AVAILABLE", "register_typeof", "route_arguments_with", "routes_of",
           "lead_typing_errors_with", "type_unknown_objects_with", "typing_unknown_objects",
           "explain_untyped_constants_with", "explaining_typeof_const",
           "not_inlining_mlir_kernels"]

_Dispatcher = _dispatcher.Dispatcher

#: Whether this Numba has the dispatcher internals used here (0.62-0.68 do).
AVAILABLE = all(hasattr(_dispatcher._DispatcherBase, name) for name in (
    "_compile_for_args", "add_overload", "_reset_overloads", "_insert", "_clear",
    "typeof_pyval", "_explain_matching_error")) and \
    hasattr(_dynfunc, "make_function") and hasattr(_dynfunc, "Environment")
_MAX_PATTERNS = 16  # per router: the classes seen at its array positions
_router_numbers = itertools.count()

# -- fast typing -------------------------------------------------------------------

_TYPEOF = {}  # class -> fn(value) -> numba type, or None to fall back to typeof()
_typeof_pyval = _Dispatcher.typeof_pyval


def register_typeof(cls, fn):
    """Type instances of exactly *cls* with ``fn(value)`` in dispatcher calls
    (None from *fn*: Numba's ``typeof``). The types *fn* returns must stay
    alive (the caller caches them): the C caller keeps only their code."""
    _TYPEOF[cls] = fn


_unknown_typer = None  # fn(value) -> numba type or None


def type_unknown_objects_with(fn):
    """Ask ``fn(value)`` for the type of objects of classes Numba has no
    typing for, before Numba's generic typing (None from *fn*: Numba's).
    Modules, callables (functions, classes, intrinsics, dispatchers) and
    objects Numba types by their ``_numba_type_`` -- most global values of
    compiled code -- go straight to Numba's entry."""
    global _unknown_typer
    _unknown_typer = fn


_constant_explainer = None  # fn(inferer, name, value): raises a better error, or returns


def explain_untyped_constants_with(fn):
    """Ask ``fn(inferer, name, value)`` when Numba cannot type constant
    *value* (an integer beyond 64 bits, ``2**64``) assigned to variable
    *name* of the function *inferer* (Numba's ``TypeInferer``) is typing:
    it raises an error saying what the constant was meant to be, or returns
    (Numba's error is raised)."""
    global _constant_explainer
    _constant_explainer = fn


def explaining_typeof_const(original):
    """``TypeInferer.typeof_const``: *original*, then, when it cannot type
    the constant, the function of :func:`explain_untyped_constants_with`."""
    def typeof_const(self, inst, target, const):
        try:
            return original(self, inst, target, const)
        except errors.TypingError:
            if _constant_explainer is not None:
                try:
                    _constant_explainer(self, target.name, const)
                except errors.TypingError:
                    raise
                except Exception:  # the explainer's own failure: Numba's error stands
                    pass
            raise
    return typeof_const


def typing_unknown_objects(original):
    """The ``typeof_impl`` entry for ``object``: the registered function,
    then *original* (Numba's entry)."""
    def _typeof_any(val, c):
        if _unknown_typer is not None and not isinstance(val, pytypes.ModuleType) and \
                not callable(val) and getattr(val, "_numba_type_", None) is None:
            ty = _unknown_typer(val)
            if ty is not None:
                return ty
        return original(val, c)
    return _typeof_any


def _fast_typeof_pyval(self, val):
    fn = _TYPEOF.get(type(val))
    if fn is not None:
        tp = fn(val)
        if tp is not None:
            return tp
    # Numba's own body (0.62-0.68), not a call of it: one frame less for
    # every other object the dispatcher cannot type in C.
    try:
        tp = typeof(val, Purpose.argument)
    except (errors.NumbaValueError, ValueError):
        tp = types.pyobject
    else:
        if tp is None:
            tp = types.pyobject
    self._types_active_call.add(tp)
    return tp


_fast_typeof_pyval.__doc__ = _typeof_pyval.__doc__

# -- routers -----------------------------------------------------------------------

class _Route:
    """One router: the C typecodes it is registered under, the argument
    positions it looks at, the overload for each tuple of classes seen there
    (``patterns``), and the overload C had under the same typecodes
    (``host``), called when every looked-at argument is a NumPy array."""

    __slots__ = ("codes", "positions", "patterns", "host", "cfunc", "keepalive", "built_for")

    def __init__(self, codes, positions):
        self.codes, self.positions = codes, positions
        self.patterns = {}  # classes at positions -> entry point
        self.host = None
        self.cfunc = self.keepalive = self.built_for = None


def routes_of(disp):
    """The routers of dispatcher *disp* (for tests): C typecodes -> route."""
    return disp.__dict__.get("_ncl_routes", {})


def _c_typecode(value, typ):
    """The typecode Numba's C code gives *value*, where it differs from
    *typ*'s because of ``_numba_type_``; else None. NumPy arrays and scalars
    and Python numbers are typed in C before ``_numba_type_`` is consulted."""
    if isinstance(value, (np.ndarray, np.generic, int, float, complex, tuple)):
        return None
    try:
        declared = value._numba_type_
    except Exception:  # AttributeError, or whatever a __getattr__ raises
        return None
    if not isinstance(declared, types.Type) or declared == typ:
        return None
    return declared._code


def _learn(disp, args, entry, should_route):
    """After the slow path chose *entry* for *args*: if C typecodes of some
    arguments disagree with their types (and ``should_route(value, type)``),
    route those typecodes to it. A router looks at every argument whose C
    type is an array (NumPy arrays and the disagreeing ones share those
    typecodes)."""
    if not disp._can_compile or \
            not any(_c_typecode(a, None) is not None for a in args):
        return
    with global_compiler_lock:  # compiling (another thread) changes the overloads
        sig = next((s for s, cres in disp.overloads.items() if cres.entry_point is entry), None)
        if sig is None or len(sig) != len(args):
            return
        codes, arrays, routed = [], [], False
        for i, (a, typ) in enumerate(zip(args, sig)):
            code = None
            if not isinstance(a, _dispatcher.OmittedArg) and should_route(a, typ):
                code = _c_typecode(a, typ)
            routed = routed or code is not None
            if code is not None or isinstance(typ, types.Array):
                arrays.append(i)
            codes.append(typ._code if code is None else code)
        if not routed:
            return
        codes = tuple(codes)
        routes = disp.__dict__.setdefault("_ncl_routes", {})
        route = routes.get(codes)
        if route is None:
            route = routes[codes] = _Route(codes, tuple(arrays))
        elif route.positions != tuple(arrays) or len(route.patterns) >= _MAX_PATTERNS:
            return  # the slow path stays correct
        classes = tuple(type(args[i]) for i in route.positions)
        if route.patterns.get(classes) is entry:
            return
        route.patterns[classes] = entry
        _rebuild(disp)


def _rebuild(disp):
    """Re-register every overload with the C dispatcher, routers included:
    an overload whose typecodes a router took becomes that router's host.
    Only routers whose targets changed are compiled again."""
    routes = routes_of(disp)
    for route in routes.values():
        route.host = None
    disp._clear()
    for sig, cres in disp.overloads.items():
        codes = tuple(a._code for a in sig)
        route = routes.get(codes)
        if route is not None:
            route.host = cres.entry_point
        else:
            disp._insert(list(codes), cres.entry_point, cres.objectmode)
    for route in routes.values():
        targets = (tuple((k, id(v)) for k, v in route.patterns.items()), id(route.host))
        if route.cfunc is None or route.built_for != targets:
            _build_router(disp, route)
            route.built_for = targets
        disp._insert(list(route.codes), route.cfunc, False)


def _slow_path(disp_ref):
    """What C does when no overload matches: compile (or find) one for the
    arguments, then call it; with compilation disabled (explicit
    signatures), Numba's "No matching definition" TypeError."""
    def call(*args):
        disp = disp_ref()
        if not disp._can_compile:
            disp._explain_matching_error(*args)
        return disp._compile_for_args(*args)(*args)
    return call


def _build_router(disp, route):
    """Compile *route*'s router: ``router(env, args, kws)``, a
    ``PyCFunctionWithKeywords`` as Numba's own wrappers are."""
    from numba.core.registry import cpu_target

    context = cpu_target.target_context
    library = context.codegen().create_library("numba_cuda_launch_router")
    module = library.create_ir_module("numba_cuda_launch_router")
    pyobj = context.get_argument_type(types.pyobject)
    name = "numba_cuda_launch_router_%d" % next(_router_numbers)
    fn = ir.Function(module, ir.FunctionType(pyobj, [pyobj] * 3), name)
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    pyapi = context.get_python_api(builder)
    _, args, kws = fn.args
    intp = ir.IntType(64)
    fallback = _slow_path(weakref.ref(disp))
    keep = [fallback]

    def const(obj):
        keep.append(obj)
        return ir.Constant(intp, id(obj)).inttoptr(pyobj)

    classes = [pyapi.get_type(pyapi.tuple_getitem(args, p)) for p in route.positions]
    seen = [builder.ptrtoint(c, intp) for c in classes]
    for pattern, entry in route.patterns.items():
        match = ir.Constant(ir.IntType(1), 1)
        for have, cls in zip(seen, pattern):
            same = builder.icmp_unsigned("==", have, ir.Constant(intp, id(cls)))
            match = builder.and_(match, same)
        with builder.if_then(match):
            builder.ret(pyapi.call(const(entry), args, kws))
    if route.host is not None:
        is_subtype = pyapi._get_function(ir.FunctionType(ir.IntType(32), [pyobj, pyobj]),
                                         name="PyType_IsSubtype")
        ndarray = const(np.ndarray)
        host = ir.Constant(ir.IntType(1), 1)
        for cls in classes:
            host = builder.and_(host, builder.icmp_signed(
                "!=", builder.call(is_subtype, [cls, ndarray]), ir.Constant(ir.IntType(32), 0)))
        with builder.if_then(host, likely=True):
            builder.ret(pyapi.call(const(route.host), args, kws))
    builder.ret(pyapi.call(const(fallback), args, kws))
    library.add_ir_module(module)
    library.finalize()
    address = library.get_pointer_to_function(name)
    keep.append(library)
    route.keepalive = keep
    route.cfunc = _dynfunc.make_function(
        _dispatcher, "router", "routes device-array calls of %s" % disp.py_func.__qualname__,
        address, _dynfunc.Environment(globals={}), tuple(keep))


def _argument_problems(disp, args, explain):
    try:
        names = list(inspect.signature(disp.py_func).parameters)
    except (TypeError, ValueError):
        names = []
    problems = []
    for i, a in enumerate(args):
        why = explain(a.value if isinstance(a, _dispatcher.OmittedArg) else a)
        if why:
            name = " %r" % names[i] if i < len(names) else ""
            problems.append("argument %d%s: %s" % (i + 1, name, why))
    return problems


_arguments = None  # the device-array collaborator (route_arguments_with)


def route_arguments_with(arguments):
    """Make the dispatcher replacements below consult *arguments*:
    ``should_route(value, type)``, route calls with such an argument whose
    ``_numba_type_`` is not *type*; ``guard(cres)``, the positions of a new
    overload where such arguments may arrive although C hands them to it
    (routed at once, so they reach the slow path, not its unboxer);
    ``explain(value)``, why an argument cannot be the device array it claims
    to be (leading the typing error); ``release(args)``, forget what typing
    read for a call whose compilation failed."""
    global _arguments
    _arguments = arguments


_compile_for_args = getattr(_dispatcher._DispatcherBase, "_compile_for_args", None)
_add_overload = getattr(_dispatcher._DispatcherBase, "add_overload", None)
_reset_overloads = getattr(_dispatcher._DispatcherBase, "_reset_overloads", None)


def _compile_for_args_learning(self, *args, **kws):
    try:
        entry = _compile_for_args(self, *args, **kws)
    except BaseException as e:
        if _arguments is not None:
            _arguments.release(args)  # what typing read for the call that will not happen
        problems = [] if _arguments is None or not isinstance(e, errors.TypingError) \
            else _argument_problems(self, args, _arguments.explain)
        if problems:
            name = getattr(self.py_func, "__name__", "function")
            raise errors.TypingError("%s(): %s\n\n%s" % (name, "; ".join(problems), e)) from None
        raise
    if not kws and _arguments is not None:
        _learn(self, args, entry, _arguments.should_route)
    return entry


def _add_overload_routed(self, cres):
    """Numba's ``add_overload``, unless a router takes the overload's
    typecodes (it becomes that router's host) or the guard asks for one."""
    codes, arrays = [], False
    for a in cres.signature.args:
        codes.append(a._code)
        arrays = arrays or isinstance(a, types.Array)
    codes = tuple(codes)
    routed = codes in self.__dict__.get("_ncl_routes", ())
    # the guard is about arrays: a function taking none needs no asking
    guarded = () if routed or _arguments is None or not arrays else _arguments.guard(cres)
    if not routed and not guarded:
        return _add_overload(self, cres)
    self.overloads[tuple(cres.signature.args)] = cres
    with global_compiler_lock:
        if guarded:
            self.__dict__.setdefault("_ncl_routes", {})[codes] = _Route(codes, tuple(guarded))
        _rebuild(self)


def _reset_overloads_dropping_routes(self):
    self.__dict__.pop("_ncl_routes", None)
    _reset_overloads(self)


# -- the line saying what is wrong, first ---------------------------------------------

_leading_line = None  # fn(lines) -> (index, text) or None
_FunctionCompiler = getattr(_dispatcher, "_FunctionCompiler", None)
_function_compile = getattr(_FunctionCompiler, "compile", None)


def lead_typing_errors_with(fn):
    """Make ``fn(lines) -> (index, text)`` choose the line every typing error
    leaving a compilation starts with: *text*, line *index* being dropped
    (none if None), before Numba's ``Failed in nopython mode pipeline``
    lines."""
    global _leading_line
    _leading_line = fn


def _lead(exc):
    if _leading_line is None or not exc.args or not isinstance(exc.args[0], str):
        return
    lines = exc.args[0].split("\n")
    found = _leading_line(lines)
    if found is None:
        return
    index, text = found
    if index is not None:
        del lines[index]
    exc.args = ("\n".join([text] + lines),) + exc.args[1:]


def _function_compile_leading(self, args, return_type):
    # Every compilation from Python code (lazy, eager, cfunc) and every
    # nested one goes through here; Numba keeps failed compilations and
    # raises the same exception again, which _lead leaves as it is.
    try:
        return _function_compile(self, args, return_type)
    except errors.NumbaError as e:
        _lead(e)
        raise


def not_inlining_mlir_kernels(original):
    """``InlineInlinables._do_work`` of Numba's own pipelines (CPU code): a
    numba-cuda-mlir kernel or device function called there is not inlined
    (its ``inline`` option is meant for numba-cuda-mlir's pipeline, which has
    a pass of its own), so the call is typed and refused saying what to
    write, instead of the kernel's body running on the CPU."""
    from numba.core.ir_utils import resolve_func_from_module

    def _do_work(self, state, work_list, block, i, expr, inline_worker):
        try:
            found = state.func_ir.get_definition(expr.func)
            callee = resolve_func_from_module(state.func_ir, found) \
                if getattr(found, "op", None) == "getattr" else getattr(found, "value", None)
        except Exception:  # no definition to be found: Numba's pass decides
            callee = None
        descriptor = sys.modules.get("numba_cuda_mlir.descriptor")
        if descriptor is not None and isinstance(callee, descriptor.MLIRDispatcher):
            return False
        return original(self, state, work_list, block, i, expr, inline_worker)
    return _do_work
