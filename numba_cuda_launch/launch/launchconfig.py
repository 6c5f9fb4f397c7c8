"""``kernel[griddim, blockdim, stream, sharedmem, cluster]`` in CPU nopython code:
the configured kernel's type (:class:`LaunchConfig`) and model, the one
validator of launch configurations (constants when typing, ``jax_kernel``
configurations when traced, run-time values when lowered: the ``problem``
field), and the typing and lowering of the ``getitem`` that makes one.
Calling it is :mod:`.call`'s. See docs/architecture.md.
"""

import numbers
import operator
import re
import weakref
from typing import NamedTuple, Optional, Tuple

from llvmlite import ir
from numba.core import cgutils, types
from numba.core import ir as nir
from numba.extending import lower_builtin, models, register_model
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate, bound_function, \
    infer, infer_getattr, signature

from numba_cuda_launch.compat.cuda_target import target_compute_capability
from numba_cuda_launch.compat.numba_dispatcher import explain_untyped_constants_with
from numba_cuda_launch.errors import KernelTypingError, called_without_configuration
from numba_cuda_launch.kernels import SOURCE_OF_NUMBA_TYPE, AnyKernelType, KernelType, on_register
from numba_cuda_launch.launch import backends
from numba_cuda_launch.launch.plan import launch_signature
from numba_cuda_launch.launch.stream import CUDAStream
from numba_cuda_launch.launch.refusals import BLOCK_THREADS_MAX, LIMITS, explain_lines, \
    register_typer

__all__ = ["LaunchConfig", "ConfigValues", "config_values", "config_problem",
           "launch_dims_of", "is_stream_type", "stream_value", "negative_stream", "CONFIG_OK",
           "BAD_GRIDDIM", "BAD_BLOCKDIM", "BAD_SHAREDMEM", "BAD_CLUSTER", "BAD_CLUSTER_GRID",
           "BAD_STREAM", "CONFIG_PROBLEMS", "CLUSTER_MIN_CC", "DEPENDENT_MIN_CC", "DEPENDENT"]

_u32 = types.uint32
_dim3 = types.UniTuple(_u32, 3)
_U32_MAX = 0xFFFFFFFF

#: Values of a configuration's ``problem`` field: which run-time item was out
#: of the driver's range; such a launch is refused, never given another value.
CONFIG_OK, BAD_GRIDDIM, BAD_BLOCKDIM, BAD_SHAREDMEM = 0, -1, -2, -3
BAD_CLUSTER, BAD_CLUSTER_GRID, BAD_STREAM = -4, -5, -6
CONFIG_PROBLEMS = {
    BAD_GRIDDIM: "griddim has an item outside 1..2**32-1",
    BAD_BLOCKDIM: "blockdim has an item outside 1..2**32-1",
    BAD_SHAREDMEM: "sharedmem is outside 0..2**32-1 bytes",
    BAD_CLUSTER: "cluster has an item outside 1..2**32-1",
    BAD_CLUSTER_GRID: "griddim is not a multiple of the cluster dimensions in every "
                      "direction (the grid is made of whole clusters)",
    BAD_STREAM: "stream is a negative integer, which no CUstream handle is "
                "(handles are 0..2**64-1, 0 the default stream)",
}
#: Thread-block clusters and dependent launches need this compute
#: capability or newer (Hopper).
CLUSTER_MIN_CC = DEPENDENT_MIN_CC = (9, 0)
#: Bits of a configuration's ``flags`` field.
DEPENDENT = 1

# -- the validator -----------------------------------------------------------------
# CUDA's launch limits (refusals.LIMITS); dynamic shared memory as the driver
# takes it (an unsigned int). Run-time values are checked against the
# driver's 32-bit range when lowered (the driver refuses the rest).


def config_problem(grid=None, block=None, sharedmem=None, cluster=None
                   ) -> Optional[Tuple[type, str]]:
    """Why constant configuration items cannot be launched: ``(TypeError or
    ValueError, sentence)``, or None. *grid*, *block* and *cluster* are an
    int or a tuple/list of 1-3 ints (an item None: known only at run time;
    the argument None: not given), *sharedmem* an int (None: not given or
    known at run time). The one validator of constant configurations:
    ``@njit`` typing and ``jax_kernel`` tracing use it."""
    for what, value in (("griddim", grid), ("blockdim", block), ("cluster", cluster)):
        if value is None:
            continue
        items = list(value) if isinstance(value, (tuple, list)) else [value]
        maxima, text = LIMITS[what]
        threads = 1
        for axis, v, most in zip("xyz", items, maxima):
            if v is not None and (not isinstance(v, numbers.Integral) or isinstance(v, bool)):
                items = ()
                break
            if v is None:
                threads = None
            elif not 1 <= v <= most:
                return ValueError, "%s must be %s, got %d in %s" % (what, text, v, axis)
            elif threads is not None:
                threads *= int(v)
        if not 1 <= len(items) <= 3:
            return TypeError, "%s must be an integer or a tuple of 1 to 3 integers, got %r" % (
                what, value)
        if what == "blockdim" and threads is not None and threads > BLOCK_THREADS_MAX:
            return ValueError, ("blockdim %r has %d threads in all; CUDA takes at most %d "
                                "per block" % (value, threads, BLOCK_THREADS_MAX))
    if sharedmem is not None:
        if not isinstance(sharedmem, numbers.Integral) or isinstance(sharedmem, bool):
            return TypeError, "sharedmem must be an integer number of bytes, got %r" % (
                sharedmem,)
        if not 0 <= sharedmem <= _U32_MAX:
            return ValueError, "sharedmem must be between 0 and 2**32-1 bytes, got %d" % sharedmem
    if grid is not None and cluster is not None:
        grid = list(grid) if isinstance(grid, (tuple, list)) else [grid]
        cluster = list(cluster) if isinstance(cluster, (tuple, list)) else [cluster]
        for axis, g, c in zip("xyz", grid + [1] * (3 - len(grid)),
                              cluster + [1] * (3 - len(cluster))):
            if g is not None and c is not None and c > 0 and g % c:
                return ValueError, ("griddim must be a multiple of the cluster dimensions; "
                                    "along %s the grid has %d blocks and the cluster %d"
                                    % (axis, g, c))
    return None


def launch_dims_of(kernel: str, grid, block, where: str, error=None):
    """``(grid, block)`` as 3-tuples of ints from Python values, checked by
    :func:`config_problem`; the error (its class, or *error* when given)
    names *kernel* and *where* the values came from."""
    problem = config_problem(grid=grid, block=block)
    if problem:
        raise (error or problem[0])("kernel %r: %s (from %s)" % (kernel, problem[1], where))
    out = []
    for value in (grid, block):
        items = [int(v) for v in (value if isinstance(value, (tuple, list)) else [value])]
        out.append(tuple(items) + (1,) * (3 - len(items)))
    return tuple(out)


class LaunchConfig(types.Callable):
    """A kernel with its launch configuration: the value of
    ``kernel[griddim, blockdim, stream, sharedmem]``.

    Every configuration of one kernel has this one type, so configurations
    made at run time can be kept in a variable, merged across branches and
    called several times. It knows the kernel's source.
    """

    #: the kernel's type: an instance attribute (no property call when Numba
    #: hashes or compares types)
    key = None

    def __init__(self, dispatcher_type):
        self.dispatcher_type = self.key = dispatcher_type
        self.dispatcher = dispatcher_type.dispatcher
        self.source = dispatcher_type.source if isinstance(dispatcher_type, KernelType) \
            else SOURCE_OF_NUMBA_TYPE[type(dispatcher_type)]
        self.kernel_name = self.source.kernel_name(self.dispatcher)
        super().__init__(name="LaunchConfig(%s)" % self.kernel_name)

    def get_call_type(self, context, args, kws):
        return launch_signature(self, args, kws)

    def get_call_signatures(self):
        return [], True

    def get_impl_key(self, sig):
        return LaunchConfig


@register_model(LaunchConfig)
class LaunchConfigModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [
            ("grid", _dim3),
            ("block", _dim3),
            ("stream", types.voidptr),
            ("sharedmem", _u32),
            ("problem", types.int32),  # CONFIG_OK or which item is out of range
            # Thread-block cluster dimensions; (0, 0, 0) when none was given
            # (then the launch is a plain cuLaunchKernel).
            ("cluster", _dim3),
            ("flags", types.int32),  # DEPENDENT: cfg.dependent()
        ]
        super().__init__(dmm, fe_type, members)


@explain_lines
def _kernel_attribute(line):
    """Attributes of a kernel (``kernel.configure``, ``kernel.forall``) in
    nopython code: a sentence naming the kernel and the way to launch it
    leads Numba's "Unknown attribute" (a template raising instead would
    break ``hasattr``)."""
    m = _KERNEL_ATTRIBUTE.match(line)
    if m is None:
        return None
    attr, name = m.group(1), m.group(2).rpartition(".")[2]
    return ("kernel %r: .%s is not available in compiled code; launch the kernel with "
            "%s[griddim, blockdim](args...) (or [griddim, blockdim, stream, sharedmem])"
            % (name, attr, name))


_KERNEL_ATTRIBUTE = re.compile(
    r"Unknown attribute '([^']+)' of type type\(CUDADispatcher\(<function ([\w.<>]+) at ")


@explain_lines
def _cuda_module_attribute(line):
    """``cuda.jit`` (or any ``numba.cuda`` function) called in CPU compiled
    code: what is supported instead."""
    m = _CUDA_MODULE_ATTRIBUTE.match(line)
    if m is None:
        return None
    return ("numba.cuda.%s cannot be called in @njit/@cfunc code: make kernels with "
            "@cuda.jit in Python (a global of the compiled function, or an argument) and "
            "launch them there with kernel[griddim, blockdim, stream](args...)" % m.group(1))


_CUDA_MODULE_ATTRIBUTE = re.compile(r"Unknown attribute '([^']+)' of type Module\(<module "
                                    r"'numba\.cuda' ")


@explain_lines
def _kernel_by_index(line):
    """A kernel picked from a tuple of kernels by a run-time index."""
    m = _KERNEL_TUPLE_INDEX.match(line)
    if m is None:
        return None
    return ("a kernel cannot be picked from a tuple of kernels by a run-time index (each "
            "kernel is a type of its own, so the item's type is unknown): branch on the "
            "index (if i == 0: k0[...](...) elif ...), loop with numba.literal_unroll, or "
            "pass the kernel to launch as an argument")


_KERNEL_TUPLE_INDEX = re.compile(r">>> (?:static_)?getitem\((?:Uni)?Tuple\(.*CUDADispatcher"
                                 r".*, (?:u?int\d+|Literal\[int\]\(\d+\))\)$")


def _items(item):
    """The items of a configuration entry (a type, or a constant's value):
    a tuple's, else the entry alone."""
    return list(item) if isinstance(item, (tuple, types.BaseTuple)) else [item]


def is_stream_type(ty) -> bool:
    """Whether *ty* is accepted as the stream item of a launch configuration."""
    return isinstance(ty, (types.Integer, CUDAStream, types.NoneType)) or ty == types.voidptr


def _refuse_negative_stream(name, value):
    """Refuse a constant stream *value* that is a negative integer (a
    sign-extended one would launch on another handle)."""
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise KernelTypingError("kernel %r: the stream must be a CUstream handle "
                                "(0..2**64-1, 0 for the default stream), got %d" % (name, value))


def check_config_types(cfg_source, dispatcher, name, index_types):
    """Raise a KernelTypingError naming the kernel unless *index_types* is a
    valid ``(griddim, blockdim[, stream[, sharedmem[, cluster]]])``: the
    items' types here, constants by :func:`config_problem`."""
    if cfg_source.is_device_function(dispatcher):
        raise KernelTypingError(
            "%r is a CUDA device function (cuda.jit(device=True)); only "
            "kernels can be launched with [griddim, blockdim, ...]" % name)
    count = len(index_types)
    if not 2 <= count <= 5:
        raise KernelTypingError(
            "kernel %r: a launch configuration is [griddim, blockdim], "
            "[griddim, blockdim, stream], [griddim, blockdim, stream, "
            "sharedmem] or [griddim, blockdim, stream, sharedmem, cluster]; "
            "got %d item(s)" % (name, count))
    constants = {}
    for what, at in (("griddim", 0), ("blockdim", 1), ("cluster", 4)):
        if at < count:
            item = index_types[at]
            items = list(item) if isinstance(item, types.BaseTuple) else [item]
            values = []
            for t in items:
                if not isinstance(t, types.Integer):
                    items = ()
                    break
                values.append(getattr(t, "literal_value", None))
            if not 1 <= len(items) <= 3:
                raise KernelTypingError("kernel %r: %s must be an integer or a tuple of 1 to 3 "
                                        "integers, got %s" % (name, what, item))
            constants[what] = tuple(values)
    if count > 2 and not is_stream_type(index_types[2]):
        raise KernelTypingError(
            "kernel %r: the stream must be a raw CUstream (voidptr or an "
            "integer, 0 for the default stream) or a numba.cuda stream "
            "object passed in as an argument; got %s" % (name, index_types[2]))
    if count > 2:
        _refuse_negative_stream(name, getattr(index_types[2], "literal_value", None))
    if count > 3:
        if not isinstance(index_types[3], types.Integer):
            raise KernelTypingError("kernel %r: sharedmem must be an integer number of bytes, "
                                    "got %s" % (name, index_types[3]))
        constants["sharedmem"] = getattr(index_types[3], "literal_value", None)
    if count > 4:
        refused = backends.BACKEND.cluster_refusal()
        if refused:
            raise KernelTypingError("kernel %r: the cluster (the fifth configuration item): %s"
                                    % (name, refused))
        cc = target_compute_capability()
        if cc is not None and tuple(cc) < CLUSTER_MIN_CC:
            raise KernelTypingError(
                "kernel %r: thread-block clusters need compute capability %d.%d or newer; "
                "kernels are built for %d.%d here" % ((name,) + CLUSTER_MIN_CC + tuple(cc)))
    problem = config_problem(constants.get("griddim"), constants.get("blockdim"),
                             constants.get("sharedmem"), constants.get("cluster"))
    if problem:
        raise KernelTypingError("kernel %r: %s" % (name, problem[1]))


# {kernel object: {key: signature or None}}: a configuration typed (and
# checked) once per kernel and index types, and, with a cluster, target.
_TYPED = weakref.WeakKeyDictionary()


def _known(dispatcher, key, make):
    """``make()``, the first time *key* is seen for *dispatcher*."""
    try:
        known = _TYPED.setdefault(dispatcher, {})
    except TypeError:  # not weakly referenceable: typed each time
        return make()
    if key not in known:
        known[key] = make()
    return known[key]


def _configure_signature(context, args, kws):
    """The signature of ``kernel[index]``; raises KernelTypingError for a
    bad configuration."""
    if len(args) != 2 or kws:
        return None
    disp_ty, index = args
    clustered = isinstance(index, types.BaseTuple) and len(index) > 4
    key = (args, target_compute_capability() if clustered else None)
    known = _TYPED.get(disp_ty.dispatcher)
    if known is not None and key in known:
        return known[key]

    def make():
        cfg = LaunchConfig(disp_ty)
        check_config_types(cfg.source, cfg.dispatcher, cfg.kernel_name,
                           list(index) if isinstance(index, types.BaseTuple) else [index])
        return signature(cfg, disp_ty, index)
    return _known(disp_ty.dispatcher, key, make)


register_typer(operator.getitem, _configure_signature, KernelTypingError, AnyKernelType)


@infer
class KernelConfigureLiteralCheck(AbstractTemplate):
    """Checks constant configurations (``kernel[-1, 32]``) against their
    literal values; typing itself falls through to ``getitem`` above."""

    key = "static_getitem"
    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        if not args or not isinstance(args[0], AnyKernelType) or len(args) != 2 or kws:
            return None
        try:
            return _known(args[0].dispatcher, ("static",) + tuple(args),
                          lambda: self._check(args))
        except TypeError:  # an unhashable constant: checked each time
            return self._check(args)

    @staticmethod
    def _check(args):
        items = _items(args[1]) + [None] * 5

        def constant(item):  # a value given in the source, else None (typed by getitem)
            return None if isinstance(item, types.Type) else item
        problem = config_problem(constant(items[0]), constant(items[1]), constant(items[3]),
                                 constant(items[4]))
        if problem:
            raise KernelTypingError("kernel %r: %s" % (LaunchConfig(args[0]).kernel_name,
                                                       problem[1]))
        _refuse_negative_stream(LaunchConfig(args[0]).kernel_name, constant(items[2]))
        return None


# -- constants Numba cannot type -------------------------------------------------------
# Numba types the constant tuple of ``kernel[1, 32, 0, 2**64]`` before any
# template sees the configuration, and fails with "Int value is too large":
# the function being typed is searched for the launch that constant feeds.

_ITEMS = ("griddim", "blockdim", "stream", "sharedmem", "cluster")
_TOO_WIDE = "which no Numba integer holds (they are -2**63..2**64-1)"


def _known_type(inferer, var):
    """The type of variable *var* as *inferer* knows it so far, or as it
    will type it (an argument, a global), or None."""
    tv = dict.get(inferer.typevars, var.name)
    if tv is not None and tv.defined:
        return tv.getone()
    try:
        definition = inferer.func_ir.get_definition(var)
    except Exception:  # several definitions: unknown
        return None
    if isinstance(definition, nir.Arg):
        tv = dict.get(inferer.typevars, inferer._mangle_arg_name(definition.name))
        return tv.getone() if tv is not None and tv.defined else None
    if isinstance(definition, (nir.Global, nir.FreeVar)):  # loaded after the constant
        try:
            return inferer.context.resolve_value_type(definition.value)
        except Exception:  # a global Numba cannot type: not a kernel
            return None
    return None


def _configured_kernel(inferer, var):
    """The kernel type of ``kernel[...]`` if *var* holds one, else None."""
    try:
        expr = inferer.func_ir.get_definition(var)
    except Exception:
        return None
    if isinstance(expr, nir.Expr) and expr.op in ("getitem", "static_getitem"):
        ty = _known_type(inferer, expr.value)
        return ty if isinstance(ty, AnyKernelType) else None
    return None


def _uses(func_ir, name):
    """``(target, expr, var)`` of each expression using variable *name* or a
    copy of it (*var*: the variable used; *target*: where the result goes)."""
    names = {name}
    assigns = [inst for block in func_ir.blocks.values() for inst in block.body
               if isinstance(inst, nir.Assign)]
    for inst in assigns:  # copies made before the use, in program order
        if isinstance(inst.value, nir.Var) and inst.value.name in names:
            names.add(inst.target.name)
    for inst in assigns:
        if isinstance(inst.value, nir.Expr):
            for var in inst.value.list_vars():
                if var.name in names:
                    yield inst.target, inst.value, var


def _constant(func_ir, var, known):
    """The constant value of *var* (*known*: ``{name: value}`` of constants
    Numba did not type), tuples built item by item; None if not constant."""
    if var.name in known:
        return known[var.name]
    try:
        definition = func_ir.get_definition(var)
    except Exception:
        return None
    if isinstance(definition, (nir.Const, nir.Global, nir.FreeVar)):
        return definition.value
    if isinstance(definition, nir.Expr) and definition.op == "build_tuple":
        return tuple(_constant(func_ir, v, known) for v in definition.items)
    return None


def _refuse_untyped_constant(inferer, name, value):
    """Refuse constant *value* (that Numba cannot type) of variable *name*
    when it is a launch configuration's item, or an item's item, or a
    kernel's argument: a typing error naming the kernel and the item
    (:func:`config_problem`'s sentence where it has one)."""
    func_ir = inferer.func_ir
    known = {name: value}
    pending = [name]
    while pending:
        for target, expr, var in _uses(func_ir, pending.pop()):
            if expr.op == "build_tuple":  # an item of a tuple: where the tuple goes
                known[target.name] = _constant(func_ir, target, known)
                pending.append(target.name)
            elif expr.op in ("static_getitem", "getitem") and var.name != expr.value.name:
                kernel = _known_type(inferer, expr.value)
                if isinstance(kernel, AnyKernelType):
                    _refuse_configuration(kernel, _constant(func_ir, var, known))
            elif expr.op == "call" and var in expr.args:
                _refuse_argument(inferer, expr, expr.args.index(var), value)


def _refuse_configuration(kernel, items):
    """Refuse configuration *items* of *kernel* holding an integer beyond 64
    bits: :func:`config_problem`'s sentence, else one naming the item."""
    KernelConfigureLiteralCheck._check((kernel, items))
    listed = _items(items)
    for at, item in enumerate(listed):
        if any(isinstance(v, int) and not -2**63 <= v < 2**64 for v in _items(item)):
            raise KernelTypingError("kernel %r: %s is %s, %s" % (
                LaunchConfig(kernel).kernel_name, _ITEMS[at] if at < len(_ITEMS)
                else "item %d" % (at + 1), item, _TOO_WIDE))


def _refuse_argument(inferer, call, at, value):
    """Refuse *value*, argument *at* of *call*, when *call* launches a
    kernel (``kernel[...](...)``, ``.launch_status(...)``, ``.preload(...)``)."""
    func = call.func
    try:
        owner = inferer.func_ir.get_definition(func)
    except Exception:
        return
    if isinstance(owner, nir.Expr) and owner.op == "getattr":
        func = owner.value  # cfg.launch_status(...)
    kernel = _configured_kernel(inferer, func)
    if kernel is None:
        return
    cfg = LaunchConfig(kernel)
    names = [p.name for p in cfg.source.parameters(cfg.dispatcher)]
    raise KernelTypingError("kernel %r parameter %r (argument %d): got the constant %d, %s"
                            % (cfg.kernel_name, names[at] if at < len(names) else "?",
                               at + 1, value, _TOO_WIDE))


explain_untyped_constants_with(_refuse_untyped_constant)


def _u32_items(context, builder, entries):
    """For each ``(type, value, low)`` of *entries* (a configuration item:
    an integer or a tuple of them): ``(items as u32, ok)``, *ok* an ``i1``
    true when all are in ``low..2**32-1``, checked before truncating."""
    out = []
    for ty, val, low in entries:
        if isinstance(ty, types.BaseTuple):
            pairs = [(t, builder.extract_value(val, i)) for i, t in enumerate(ty)]
        else:
            pairs = [(ty, val)]
        items, ok = [], cgutils.true_bit
        for t, v in pairs:
            cmp = builder.icmp_signed if t.signed else builder.icmp_unsigned
            if t.bitwidth < 32 or (not t.signed and t.bitwidth == 32):
                items.append(context.cast(builder, v, t, types.uint32))
                ok = builder.and_(ok, cmp(">=", v, v.type(low)))
            else:
                wide = context.cast(builder, v, t, types.int64 if t.signed else types.uint64)
                ok = builder.and_(ok, builder.and_(cmp(">=", wide, wide.type(low)),
                                                   cmp("<=", wide, wide.type(_U32_MAX))))
                items.append(builder.trunc(wide, ir.IntType(32)))
        out.append((items, ok))
    return out


class ConfigValues(NamedTuple):
    """A configuration's values as the checks and a backend take them (LLVM
    values), read once from the configuration struct."""

    #: grid x, y, z, block x, y, z (``i32``), in ``cuLaunchKernel``'s order
    dims: list
    sharedmem: ir.Value
    stream: ir.Value
    #: an ``i1``: a thread-block cluster was given
    has_cluster: ir.Value
    #: its x, y, z (0 when none was given)
    cluster: list
    #: CONFIG_OK or which item is out of range (:data:`CONFIG_PROBLEMS`)
    problem: ir.Value
    #: an ``i1``: a programmatic dependent launch (``cfg.dependent()``)
    dependent: ir.Value


def config_values(context, builder, cfg_ty, value):
    """The :class:`ConfigValues` of a configuration value of type *cfg_ty*."""
    cfg = cgutils.create_struct_proxy(cfg_ty)(context, builder, value=value)
    dims = [builder.extract_value(dim, i) for dim in (cfg.grid, cfg.block) for i in range(3)]
    cluster = [builder.extract_value(cfg.cluster, i) for i in range(3)]
    i32 = ir.IntType(32)
    has_cluster = builder.icmp_unsigned("!=", cluster[0], ir.Constant(i32, 0))
    dependent = builder.icmp_unsigned("!=", builder.and_(cfg.flags, ir.Constant(i32, DEPENDENT)),
                                      ir.Constant(i32, 0))
    return ConfigValues(dims, cfg.sharedmem, cfg.stream, has_cluster, cluster, cfg.problem,
                        dependent)


def stream_value(context, builder, ty, val):
    """The raw ``CUstream`` (``i8*``) of a stream item of type *ty*."""
    if isinstance(ty, CUDAStream):
        return cgutils.create_struct_proxy(ty)(context, builder, value=val).handle
    if isinstance(ty, types.Integer):  # sign-extended by its signedness
        if ty.bitwidth < 64:
            val = builder.sext(val, ir.IntType(64)) if ty.signed else \
                builder.zext(val, ir.IntType(64))
        return builder.inttoptr(val, ir.IntType(8).as_pointer())
    if isinstance(ty, types.NoneType):
        return ir.Constant(ir.IntType(8).as_pointer(), None)
    return builder.bitcast(val, ir.IntType(8).as_pointer())


def negative_stream(builder, ty, val):
    """An ``i1``: the stream item *val* of type *ty* is a negative integer
    (only a signed one can be), which no ``CUstream`` handle is: refused
    (:data:`BAD_STREAM`), never sign-extended into one by :func:`stream_value`."""
    if isinstance(ty, types.Integer) and ty.signed:
        return builder.icmp_signed("<", val, val.type(0))
    return cgutils.false_bit


def _whole_clusters(builder, grid, cluster, cluster_ok):
    """An ``i1``: every grid dimension is a multiple of the cluster's (true
    when the cluster is out of range, which is reported instead)."""
    u32 = ir.IntType(32)
    ok = cgutils.true_bit
    for i in range(3):
        g = builder.extract_value(grid, i)
        c = builder.extract_value(cluster, i)
        divisor = builder.select(cluster_ok, c, ir.Constant(u32, 1))  # never 0
        ok = builder.and_(ok, builder.icmp_unsigned(
            "==", builder.urem(g, divisor), ir.Constant(u32, 0)))
    return builder.or_(ok, builder.not_(cluster_ok))


def lower_kernel_configure(context, builder, sig, args):
    _disp, index = args
    index_ty = sig.args[1]
    item_types = list(index_ty) if isinstance(index_ty, types.BaseTuple) else [index_ty]
    items = ([builder.extract_value(index, i) for i in range(len(item_types))]
             if isinstance(index_ty, types.BaseTuple) else [index])
    cfg = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    i32 = ir.IntType(32)
    one, zero = ir.Constant(i32, 1), ir.Constant(i32, 0)
    # grid, block, sharedmem (0 when not given) and cluster ((0, 0, 0) when
    # not given: a plain cuLaunchKernel)
    given = [(item_types[at], items[at], low) if at < len(items) else None
             for at, low in ((0, 1), (1, 1), (3, 0), (4, 1))]
    lowered = iter(_u32_items(context, builder, [g for g in given if g is not None]))
    (grid, grid_ok), (block, block_ok) = next(lowered), next(lowered)
    (shmem, shmem_ok) = next(lowered) if given[2] else ([zero], cgutils.true_bit)
    (cluster, cluster_ok) = next(lowered) if given[3] else ([zero] * 3, cgutils.true_bit)
    cfg.grid = context.make_tuple(builder, _dim3, grid + [one] * (3 - len(grid)))
    cfg.block = context.make_tuple(builder, _dim3, block + [one] * (3 - len(block)))
    cfg.cluster = context.make_tuple(builder, _dim3, cluster + [one] * (3 - len(cluster)))
    cfg.sharedmem = shmem[0]
    cfg.flags = zero
    cfg.stream = stream_value(context, builder, item_types[2], items[2]) if len(items) > 2 \
        else ir.Constant(ir.IntType(8).as_pointer(), None)
    stream_ok = builder.not_(negative_stream(builder, item_types[2], items[2])) \
        if len(items) > 2 else cgutils.true_bit
    whole = _whole_clusters(builder, cfg.grid, cfg.cluster, cluster_ok) if given[3] \
        else cgutils.true_bit
    # The first item out of range, else CONFIG_OK.
    problem = builder.select(stream_ok, ir.Constant(i32, CONFIG_OK), ir.Constant(i32, BAD_STREAM))
    problem = builder.select(whole, problem, ir.Constant(i32, BAD_CLUSTER_GRID))
    problem = builder.select(cluster_ok, problem, ir.Constant(i32, BAD_CLUSTER))
    problem = builder.select(shmem_ok, problem, ir.Constant(i32, BAD_SHAREDMEM))
    problem = builder.select(block_ok, problem, ir.Constant(i32, BAD_BLOCKDIM))
    cfg.problem = builder.select(grid_ok, problem, ir.Constant(i32, BAD_GRIDDIM))
    return cfg._getvalue()


def _lower_configure_of(source):
    """``kernel[...]`` lowered for the kernels of *source* (its Numba type
    class; :class:`KernelType` covers the sources typed by this package)."""
    if source.numba_type is not None:
        lower_builtin(operator.getitem, source.numba_type, types.Any)(lower_kernel_configure)


lower_builtin(operator.getitem, KernelType, types.Any)(lower_kernel_configure)
on_register(_lower_configure_of)


@infer_getattr
class KernelCall(AttributeTemplate):
    """``kernel(...)`` without ``[griddim, blockdim]`` in CPU code, for the
    kernels this package types (numba-cuda's get the same refusal from
    compat/numba_cuda.py): a typing error saying what to write."""

    key = KernelType
    metadata = {"target": "cpu"}

    def resolve___call__(self, ty):
        raise called_without_configuration(ty.source.kernel_name(ty.dispatcher),
                                           ty.source.is_device_function(ty.dispatcher))


@infer_getattr
class DependentLaunch(AttributeTemplate):
    """``cfg.dependent()``: the same configuration, launched as a
    programmatic dependent launch (docs/graphs.md, "Dependent launches")."""

    key = LaunchConfig
    metadata = {"target": "cpu"}

    @bound_function("LaunchConfig.dependent")
    def resolve_dependent(self, cfg_ty, args, kws):
        if args or kws:
            raise KernelTypingError("kernel %r: .dependent() takes no arguments (the "
                                    "configuration's launch becomes a dependent one)"
                                    % cfg_ty.kernel_name)
        cc = None if backends.BACKEND.orders_launches() else target_compute_capability()
        if cc is not None and tuple(cc) < DEPENDENT_MIN_CC:
            raise KernelTypingError(
                "kernel %r: dependent launches (programmatic stream serialization) need "
                "compute capability %d.%d or newer; kernels are built for %d.%d here"
                % ((cfg_ty.kernel_name,) + DEPENDENT_MIN_CC + tuple(cc)))
        return signature(cfg_ty, recvr=cfg_ty)


@lower_builtin("LaunchConfig.dependent", LaunchConfig)
def lower_dependent(context, builder, sig, args):
    cfg = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0])
    cfg.flags = builder.or_(cfg.flags, ir.Constant(ir.IntType(32), DEPENDENT))
    return cfg._getvalue()
