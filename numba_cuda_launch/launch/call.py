"""Calling a configured kernel: ``cfg(args...)`` (raises
:class:`~numba_cuda_launch.CudaLaunchError`), ``cfg.launch_status(args...)``
(the ``CUresult``) and ``cfg.preload(args...)`` (loads the image only). Lowering
looks up the plan typing made (:mod:`.plan`), checks and converts
the arguments and hands the launch to a backend. See docs/architecture.md.
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate, infer_getattr, \
    signature
from numba.core.datamodel import default_manager
from numba.extending import lower_builtin

from numba_cuda_launch.errors import CudaLaunchError, NopythonUnsupportedError
from numba_cuda_launch.launch import backends
from numba_cuda_launch.launch.caching import BuildCheck, LaunchTargetCheck, ParamSizes, \
    package_build
from numba_cuda_launch.compat.numba_caching import add_reload_checks
from numba_cuda_launch.cudadrv.driver import link_runtime
from numba_cuda_launch.cudadrv.image import remember_param_sizes
from numba_cuda_launch.launch.conditionalhandle import HANDLE_OUTSIDE_GRAPH, ConditionalHandleType
from numba_cuda_launch.launch.halffloat import float_to_half_bits
from numba_cuda_launch.launch.refusals import Guards, emit_raise_if_failed, raiser
from numba_cuda_launch.launch.launchconfig import CONFIG_PROBLEMS, LaunchConfig, config_values
from numba_cuda_launch.launch.devicearray import DeviceArray
from numba_cuda_launch.launch.devicearray.producer_wait import emit_producer_wait, producer_streams
from numba_cuda_launch.cudadrv.launch import emit_checked_mode
from numba_cuda_launch.launch.plan import integer_range, launch_signature, plan_launch, \
    range_words

__all__ = ["emit_launch", "emit_preload", "launch_error_raiser", "start_launch",
           "in_current_context", "planned"]

def _to_formal(context, builder, val, actual, formal):
    """Convert an argument to the kernel parameter's type."""
    if actual == formal:
        return val
    if actual == types.voidptr and isinstance(formal, types.CPointer):
        return builder.bitcast(val, context.get_value_type(formal))
    if formal == types.float16 and actual != types.float16:
        # The kernel ABI passes a float16 as its 16 bits.
        wide = context.cast(builder, val, actual, types.float64)
        return context.compile_internal(builder, float_to_half_bits,
                                        signature(types.uint16, types.float64), [wide])
    return context.cast(builder, val, actual, formal)


def planned(context, cfg_ty, argtypes):
    """The plan typing made for *argtypes*. Records in the function being
    lowered what its cached form checks (:mod:`.caching`: the launch target
    and the package build), and the parameter sizes of the plan's kernel for
    tools reading parameters (the recording driver), now and in any process
    that loads the function from the cache."""
    plan = plan_launch(cfg_ty.dispatcher, argtypes, cfg_ty.source, cfg_ty.kernel_name)
    checks = [LaunchTargetCheck(backends.BACKEND.cache_target()), BuildCheck(package_build())]
    if plan.entry_name is not None:
        remember_param_sizes(plan.entry_name, plan.param_sizes)
        checks.append(ParamSizes(plan.entry_name, plan.param_sizes))
    add_reload_checks(context, checks)
    link_runtime(context)
    return plan


def in_current_context(cfg):
    """*cfg* with the NULL stream: what runs in the current context (an
    occupancy query's or a graph update's function) checked for its device."""
    return cfg._replace(stream=ir.Constant(ir.IntType(8).as_pointer(), None))


def start_launch(context, builder, cfg_ty, cfg_val, argtypes):
    """``(plan, cfg, guards)`` for a launch or an occupancy query: *cfg*
    the configuration's values, *guards* with its checks."""
    plan = planned(context, cfg_ty, argtypes)
    cfg = config_values(context, builder, cfg_ty, cfg_val)
    guards = Guards(builder)
    guards.check_code(cfg.problem, CONFIG_PROBLEMS)  # an item out of the driver's range
    return plan, cfg, guards


def _emit_out_of_range(builder, val, actual, lowest, highest):
    """An ``i1``: integer *val* of type *actual* lies outside *lowest*..
    *highest* (only called when some value of *actual* does)."""
    cmp = builder.icmp_signed if actual.signed else builder.icmp_unsigned
    tests = []
    if actual.minval < lowest:  # *lowest* is representable in *actual* here
        tests.append(cmp("<", val, val.type(lowest)))
    if actual.maxval > highest:
        tests.append(cmp(">", val, val.type(highest)))
    return tests[0] if len(tests) == 1 else builder.or_(*tests)


# The smallest magnitude each narrower float rounds to infinity (its largest
# finite value plus half an ulp): a finite value at or above it would launch
# as infinity.
_FLOAT_OVERFLOW = {32: 2.0**128 - 2.0**103, 16: 65520.0}


def _check_ranges(builder, guards, val, actual, formal, where):
    """Refuse values that do not fit their parameter, tuple items included:
    an integer outside a narrower integer type, or an address (a negative
    one) for a pointer parameter (the rule constants follow at typing,
    :func:`~.plan.integer_range`); a finite float that a narrower float
    parameter would make infinite."""
    if isinstance(actual, types.BaseTuple) and isinstance(formal, types.BaseTuple):
        for i, (a, f) in enumerate(zip(actual, formal)):
            _check_ranges(builder, guards, builder.extract_value(val, i), a, f,
                          "%s[%d]" % (where, i))
        return
    if isinstance(actual, types.Float) and isinstance(formal, types.Float) \
            and formal.bitwidth < actual.bitwidth:
        def overflows(bound=_FLOAT_OVERFLOW[formal.bitwidth]):
            magnitude = builder.call(builder.module.declare_intrinsic(
                "llvm.fabs", [val.type]), [val])
            return builder.and_(builder.fcmp_ordered(">=", magnitude, val.type(bound)),
                                builder.fcmp_ordered("!=", magnitude, val.type(float("inf"))))
        guards.check(overflows, "%s of type %s was given a %s value too large for it (it would "
                                "launch as infinity)" % (where, formal, actual))
        return
    span = integer_range(formal) if isinstance(actual, types.Integer) else None
    if span and (actual.minval < span[0] or actual.maxval > span[1]):
        if isinstance(formal, types.Integer):
            words = "a %s value outside its range" % types.unliteral(actual)
        else:
            words = "a %s value that %s" % (types.unliteral(actual), range_words(formal))
        guards.check(lambda: _emit_out_of_range(builder, val, actual, *span),
                     "%s of type %s was given %s" % (where, formal, words))


def _memory_items(builder, ty, val, where, out):
    """Append ``(type, value, where)`` for each array and pointer in an
    argument of type *ty* (tuples searched) to *out*."""
    if isinstance(ty, types.BaseTuple):
        for i, t in enumerate(ty):
            _memory_items(builder, t, builder.extract_value(val, i), "%s[%d]" % (where, i), out)
    elif isinstance(ty, (types.Array, types.CPointer)) or ty == types.voidptr:
        out.append((ty, val, where))
    return out


def _check_memory(context, builder, guards, backend, items):
    """Refuse host memory among the arrays and pointers *items* (``(type,
    value, where)``) of a launch: an array Numba owns (a meminfo: a NumPy
    array, one allocated in nopython code) unless the driver knows its
    memory; in the checked mode every array and pointer the driver does not
    know. An array Numba does not own (a carray/farray view of a pointer, a
    device array's data) is only asked about in the checked mode."""
    checked = emit_checked_mode(builder)
    i8p = ir.IntType(8).as_pointer()
    for ty, val, where in items:
        refused = cgutils.alloca_once_value(builder, cgutils.false_bit)
        if isinstance(ty, types.Array):
            arr = cgutils.create_struct_proxy(ty)(context, builder, value=val)
            owned = cgutils.is_not_null(builder, arr.meminfo)
            asked = builder.and_(builder.icmp_signed(">", arr.nitems, arr.nitems.type(0)),
                                 builder.or_(owned, checked))
            with builder.if_then(asked, likely=False):
                builder.store(builder.not_(backend.emit_is_device_accessible(
                    builder, builder.bitcast(arr.data, i8p), owned)), refused)
            guards.refuse_if(
                builder.load(refused),
                "%s is an array in host memory (a NumPy array, or one allocated in nopython "
                "code): kernels need device memory (a carray view of a device pointer, a "
                "device array, cuda.mapped_array/managed_array)" % where,
                (builder.not_(owned),
                 "%s is an array view (carray/farray of a pointer, or a device array's data) "
                 "of memory the device cannot reach (checked mode: cuPointerGetAttribute does "
                 "not know it; with no CUDA driver it knows no address)" % where))
        else:
            with builder.if_then(checked, likely=False):
                ptr = builder.bitcast(val, i8p)
                known = backend.emit_is_device_accessible(builder, ptr, cgutils.false_bit)
                builder.store(builder.and_(builder.not_(cgutils.is_null(builder, ptr)),
                                           builder.not_(known)), refused)
            guards.refuse_if(builder.load(refused),
                             "%s points to memory the device cannot reach (checked mode: "
                             "cuPointerGetAttribute does not know it)" % where)


# Argument types whose memory is checked (tuples searched): host memory is refused.
_MEMORY_TYPES = (types.Array, types.CPointer, types.BaseTuple)


def emit_launch(context, builder, cfg_ty, cfg_val, argtypes, argvals, catch=True,
                submit=None, check=None, image=None):
    """Emit the launch of a configured kernel through the backend; returns
    ``(status, reason, messages)``: the ``CUresult`` and, when refused before
    the driver, the index in *messages* of the sentence saying why (else 0).
    Without *catch*, the simulator's exceptions propagate. *submit*
    (``submit(plan, cfg, values) -> CUresult``) emits something else with
    the checked, converted arguments (an update of a recorded launch);
    *check* (``check(guards, plan, cfg)``) adds checks after the
    configuration's. *image* (the ``i8*`` of an image record, where the
    backend :attr:`~.backends.backend.LaunchBackend.launches_image_records`):
    launch its kernel, of the plan's parameter layout, instead of the plan's."""
    backend = backends.BACKEND
    plan, cfg, guards = start_launch(context, builder, cfg_ty, cfg_val, argtypes)
    if check is not None:
        check(guards, plan, cfg)
    names = plan.param_names
    # Parameters left to their defaults: constants after the arguments given.
    given = len(argtypes)
    argtypes = tuple(argtypes) + tuple(plan.argtypes[given:])
    argvals = list(argvals) + [context.get_constant_generic(builder, t, v) for t, v in
                               zip(plan.argtypes[given:], plan.defaults)]
    values, producers, memory = [], [], []
    for i, (v, a, f) in enumerate(zip(argvals, argtypes, plan.argtypes)):
        where = "parameter %r (argument %d)" % (names[i], i + 1)
        if isinstance(a, (types.Integer, types.Float, types.BaseTuple)):
            _check_ranges(builder, guards, v, a, f, where)
        values.append(v if a == f else _to_formal(context, builder, v, a, f))
        if plan.source.emit_argument_checks is not None:
            plan.source.emit_argument_checks(context, builder, guards, f, values[-1], where)
        # An array given for a pointer parameter (a foreign kernel's) is
        # checked as the array it is: its meminfo says host memory.
        as_given = type(a) is types.Array and not isinstance(f, types.Array)
        checked = a if as_given else f
        if isinstance(checked, types.BaseTuple):  # searched for arrays and pointers
            _memory_items(builder, checked, v if as_given else values[-1], where, memory)
        elif isinstance(checked, _MEMORY_TYPES) or checked == types.voidptr:
            memory.append((checked, v if as_given else values[-1], where))
        if isinstance(a, (DeviceArray, types.BaseTuple)):
            producers += producer_streams(context, builder, a, v, where)
        if submit is None and isinstance(a, ConditionalHandleType):
            guards.check(lambda: builder.not_(
                backend.runtime(context).emit_is_capturing(builder, cfg.stream)),
                HANDLE_OUTSIDE_GRAPH % where)
    if memory:
        _check_memory(context, builder, guards, backend, memory)
    if backend.waits_for_producer_streams:
        for producer, where in producers:
            guards.check_status(
                lambda p=producer: emit_producer_wait(builder, p, cfg.stream),
                "cuStreamSynchronize of the producer stream of %s (its CUDA Array "
                "Interface v3 'stream') failed" % where)
    # An update sets the current context's function (its configuration's
    # stream is not used): the checks are for the current device.
    backend.emit_launch_checks(context, builder, guards, plan,
                               cfg if submit is None else in_current_context(cfg), image)
    with builder.if_then(guards.ok(), likely=True):
        if submit is not None:
            status = submit(plan, cfg, values)
        else:
            status = backend.emit_launch(context, builder, plan, cfg, values, catch, image)
        builder.store(status, guards.status)
    return guards.result()


_PARFOR_BODY = "__numba_parfor_gufunc"  # Numba's name for outlined prange bodies


@lower_builtin(LaunchConfig, LaunchConfig, types.VarArg(types.Any))
def lower_launch(context, builder, sig, args):
    """``cfg(args...)``: launch, raising CudaLaunchError on failure."""
    cfg_ty = sig.args[0]
    if _PARFOR_BODY in builder.function.name:
        # Numba drops (or turns into SystemError) exceptions raised in the
        # body of a parallel loop: a failed launch there would go unseen.
        raise NopythonUnsupportedError(
            "kernel %r: a launch that raises on failure cannot be used inside prange "
            "(Numba does not propagate exceptions out of parallel loops); use "
            "status = %s[...].launch_status(...) there and check the statuses "
            "after the loop" % (cfg_ty.kernel_name, cfg_ty.kernel_name))
    status, reason, messages = emit_launch(context, builder, cfg_ty, args[0], sig.args[1:],
                                           args[1:], catch=False)
    emit_raise_if_failed(context, builder, launch_error_raiser(cfg_ty.kernel_name, messages),
                         status, reason)
    return context.get_dummy_value()


def launch_error_raiser(kernel_name, messages, what="launch"):
    """The ``@njit`` ``raise_error(status, reason)`` of a launch (or of
    occupancy query *what*): :class:`CudaLaunchError` with the text of
    *messages* (see :func:`emit_launch`) for *reason*."""
    return raiser(CudaLaunchError, (kernel_name, "", what),
                  tuple([(i, (kernel_name, text, what)) for i, text in enumerate(messages) if i]))


class _LaunchMethod(types.BoundFunction):
    """``cfg.launch_status`` and ``cfg.preload``, typed with the arguments as
    given: Numba's bound methods unliteral constants first, which would hide
    the refusal of one that does not fit its parameter (an ``int8`` given 300)."""

    def get_call_type(self, context, args, kws):
        return self.template(context).apply(args, kws)


# The model of a bound method is its receiver's, as Numba's own.
default_manager.register(_LaunchMethod, lambda dmm, ty: dmm[ty.this])


def _launch_method_template(key):
    class LaunchMethodTemplate(AbstractTemplate):
        def generic(self, args, kws):
            return launch_signature(self.this, args, kws, return_type=types.int32)

    LaunchMethodTemplate.key = key
    return LaunchMethodTemplate


_LAUNCH_STATUS = _launch_method_template("LaunchConfig.launch_status")
_PRELOAD = _launch_method_template("LaunchConfig.preload")


@infer_getattr
class LaunchConfigAttributes(AttributeTemplate):
    """Methods of a configured kernel (:mod:`.occupancy` adds its queries)."""

    key = LaunchConfig
    metadata = {"target": "cpu"}

    def resolve_launch_status(self, cfg_ty):
        return _LaunchMethod(_LAUNCH_STATUS, cfg_ty)

    def resolve_preload(self, cfg_ty):
        return _LaunchMethod(_PRELOAD, cfg_ty)


@lower_builtin("LaunchConfig.launch_status", LaunchConfig, types.VarArg(types.Any))
def lower_launch_status(context, builder, sig, args):
    """``cfg.launch_status(args...)``: launch, returning the CUresult."""
    return emit_launch(context, builder, sig.args[0], args[0], sig.args[1:], args[1:])[0]


def emit_preload(context, builder, cfg_ty, argtypes, image=None):
    """Emit loading the image of *cfg_ty*'s kernel for *argtypes* (or the
    image record *image*, as for :func:`emit_launch`) into the current
    context; the ``CUresult``."""
    return backends.BACKEND.emit_preload(context, builder, planned(context, cfg_ty, argtypes),
                                         image)


@lower_builtin("LaunchConfig.preload", LaunchConfig, types.VarArg(types.Any))
def lower_preload(context, builder, sig, args):
    """``cfg.preload(args...)``: load the image into the current context."""
    return emit_preload(context, builder, sig.args[0], sig.args[1:])
