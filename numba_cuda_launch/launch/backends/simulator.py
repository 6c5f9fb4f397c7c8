"""Launches from compiled code under numba-cuda's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``): a ``FakeCUDAKernel`` gets a CPU type, so a
launch types and is checked as on a GPU, then calls back into Python (the
GIL taken) to run the kernel on host memory, or to record it when its stream
captures a CUDA graph (:mod:`.simgraph`). README.md, "Without a GPU: the
CUDA simulator" and "what works where".

Code lowered inside :func:`bound_launches` finds its kernels by a name
bound in the running process (:func:`bind_kernel`) instead of holding them,
so that code (``jax_kernel`` handlers) may be cached across processes.
"""

import contextlib
import ctypes
import functools
import inspect
import threading
import time
from dataclasses import dataclass

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import typeof_impl

from numba_cuda_launch.compat import simulator as _simulator
from numba_cuda_launch.compat.numba_caching import LaunchTargetChanged, add_reload_checks
from numba_cuda_launch.cudadrv import driver as _driver
from numba_cuda_launch.cudadrv import events as _events
from numba_cuda_launch.cudadrv.launch import DEFAULT_PER_BLOCK
from numba_cuda_launch.errors import (CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE,
                                      CUDA_ERROR_LAUNCH_FAILED,
                                      CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, CudaLaunchError)
from numba_cuda_launch.kernels import KernelSource, KernelType, register
from numba_cuda_launch.launch.backends import simgraph
from numba_cuda_launch.launch.backends.backend import BOUND_TARGET, LaunchBackend
from numba_cuda_launch.launch.backends.driver import SHARED_TOO_LARGE
from numba_cuda_launch.launch.conditionalhandle import HANDLE_OUTSIDE_GRAPH, ConditionalHandle
from numba_cuda_launch.launch.refusals import BLOCK_THREADS_MAX, LIMITS, block_threads, \
    call_jitted

__all__ = ["SimulatedKernel", "SimulatedKernels", "SimulatedRuntime", "SimulatorBackend",
           "CUDA_ERROR_LAUNCH_FAILED", "bind_kernel", "bound_launches", "BoundKernelCheck"]

MAX_BLOCK = 1024  # threads per block in the occupancy model
_TOO_LARGE = "%s is more than CUDA launches (%s), which a GPU's driver refuses"
_TOO_MANY_THREADS = ("blockdim has more than %d threads in all, which a GPU's driver refuses"
                     % BLOCK_THREADS_MAX)
# A simulator kernel is not thread-safe (configuring it mutates it): one launch at a time.
_lock = threading.RLock()
FakeCUDAKernel = _simulator.simulated_kernel_class()
FakeCUDAArray = _simulator.array_class()
_ORIGINAL = _simulator.ORIGINAL_METHODS


class SimulatedKernels(KernelSource):
    """The source of the simulator's kernels: the signatures they were
    declared with (:mod:`...compat.simulator` records them), nothing to
    compile, the Python function run as it is."""

    name = "numba-cuda"

    def claims(self, obj):
        return isinstance(obj, FakeCUDAKernel)

    def kernel_name(self, kernel):
        return kernel.fn.__name__

    def qualified_name(self, kernel):
        fn = kernel.fn
        return "%s.%s" % (getattr(fn, "__module__", None) or "_", fn.__qualname__)

    def parameters(self, kernel):
        return list(inspect.signature(kernel.fn).parameters.values())

    def is_device_function(self, kernel):
        return bool(kernel._device)

    def can_compile(self, kernel):
        return not _simulator.declared_signatures(kernel)

    def compiled_kernels(self, kernel):
        return {sig: kernel for sig in _simulator.declared_signatures(kernel)}

    def compile(self, kernel, argtypes):
        return kernel  # nothing to compile: the simulator runs the Python function

    def lazy_problem(self, kernel, problem):
        if _simulator.declared_through_package(kernel):
            return problem
        return ("it was made by a cuda.jit bound before numba_cuda_launch was imported "
                "(from numba.cuda import jit), and numba-cuda's simulator keeps no "
                "signature, so it is launched as a lazily compiled kernel (%s); import "
                "numba_cuda_launch before binding jit, or write cuda.jit" % problem)

    def launch_problems(self, kernel, overload):
        # The simulator accepts any signature; on a GPU cuda.jit would have
        # refused this one.
        refused = _simulator.signature_refusal(kernel)
        return [refused] if refused else []


SOURCE = register(SimulatedKernels(), first=True)


class SimulatedKernel(KernelType):
    """The CPU type of a simulator kernel."""

    source = SOURCE

    def __init__(self, kernel):
        super().__init__(kernel, "SimulatedKernel(%s)" % kernel.fn.__name__)


@typeof_impl.register(FakeCUDAKernel)
def _typeof_sim_kernel(val, c):
    return SimulatedKernel(val)


def _ctype_of(ty):
    if ty == types.voidptr or not isinstance(ty, types.CPointer):
        return None
    from numba.core.typing.ctypes_utils import _FROM_CTYPES

    for ctype, nbtype in _FROM_CTYPES.items():
        if nbtype == ty.dtype:
            return ctypes.POINTER(ctype)
    return ctypes.c_void_p


_HALF = "float16"  # marks a float16 argument, passed as its 16 bits


def _as_kernel_arg(value, pointer_type):
    if pointer_type is _HALF:
        return np.uint16(value).view(np.float16)
    if pointer_type is not None:
        return ctypes.cast(ctypes.c_void_p(value), pointer_type)
    if isinstance(value, np.ndarray):
        # Already "device" memory for the simulator: run on it in place
        # (the simulator would otherwise copy it, and refuse strided views).
        return FakeCUDAArray(value)
    if isinstance(value, tuple):
        return tuple(_as_kernel_arg(v, None) for v in value)
    return value


def _run(launch, catch):
    """Run a :class:`~.simgraph.KernelLaunch` in the simulator (GIL held);
    the ``CUresult``. With *catch* false the kernel's exception propagates.
    The simulator's own methods run it (not the ones recording launches
    from Python: this one runs now)."""
    kernel = launch.kernel
    configure = _ORIGINAL.get("__getitem__", FakeCUDAKernel.__getitem__)
    call = _ORIGINAL.get("__call__", FakeCUDAKernel.__call__)
    with _lock, _simulator.numba_spelling(kernel):
        try:
            call(configure(kernel, (launch.grid, launch.block, 0, launch.sharedmem)),
                 *launch.args)
        except Exception:
            if not catch:
                raise
            import traceback

            traceback.print_exc()
            return CUDA_ERROR_LAUNCH_FAILED
    return 0


def _python_launch(kernel, args):
    """A launch from Python (``kernel[g, b, stream](...)``): recorded when
    its stream records a graph (True), refused as compiled code refuses it
    (a ``ConditionalHandle`` on a stream recording none; the legacy stream
    while a stream records), else run now by the simulator (False)."""
    for arg in args:  # a loop, not a comprehension: no call on this path
        if isinstance(arg, ConditionalHandle):
            break
    else:
        if not simgraph.STATE.captures:
            return False
    handles = [i for i, a in enumerate(args) if isinstance(a, ConditionalHandle)]
    stream = kernel.stream
    handle = 0 if stream is None or isinstance(stream, int) and stream == 0 else \
        stream if isinstance(stream, int) else id(stream)
    name = getattr(kernel, "__name__", "kernel")
    if handles and simgraph.STATE.capture_of(handle) is None:
        names = list(inspect.signature(kernel.fn).parameters)
        i = handles[0]
        raise CudaLaunchError(CUDA_ERROR_INVALID_VALUE, name, HANDLE_OUTSIDE_GRAPH % (
            "parameter %r (argument %d)" % (names[i] if i < len(names) else i, i + 1)))
    recorded = tuple(a.handle if isinstance(a, ConditionalHandle) else
                     FakeCUDAArray(a) if isinstance(a, np.ndarray) and a.ndim else a
                     for a in args)
    launch = simgraph.KernelLaunch(kernel, tuple(kernel.grid_dim), tuple(kernel.block_dim),
                                   kernel.dynshared_size, recorded, _run)
    status = simgraph.STATE.record(handle, launch)
    if status:
        raise CudaLaunchError(status, name, "" if status != CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
                              else "the legacy default stream (0) cannot be used while a "
                              "stream records a graph: launch on a stream of your own")
    return status is not None


_simulator.set_python_launch_hook(_python_launch)


def _as_launch(kernel, grid, block, sharedmem, args, pointer_types):
    args = tuple(_as_kernel_arg(a, pt) for a, pt in zip(args, pointer_types))
    return simgraph.KernelLaunch(kernel, grid, block, sharedmem, args, _run)


def _simulate(kernel, stream, _, grid, block, sharedmem, args, pointer_types, catch):
    """Run a launch on *stream* now, or record it if the stream captures a graph."""
    launch = _as_launch(kernel, grid, block, sharedmem, args, pointer_types)
    status = simgraph.STATE.record(stream, launch)
    return _run(launch, catch) if status is None else status


def _set_node(kernel, exe, node, grid, block, sharedmem, args, pointer_types, catch):
    """Set kernel node *node* of executable graph *exe* to this launch."""
    launch = _as_launch(kernel, grid, block, sharedmem, args, pointer_types)
    return simgraph.STATE.set_node(exe, node, lambda old: launch)[0]


@functools.lru_cache(maxsize=None)
def _helper(kernel, argtypes, catch, target):
    """An @njit function running *target* (a simulated launch, or the
    update of a recorded one) in object mode: ``(h0, h1, grid, block,
    sharedmem, args)``, h0 and h1 the stream (and 0) or the executable
    graph and the node, *args* the tuple of arguments."""
    pointer_types = _pointer_types(argtypes)

    @numba.njit
    def launch(h0, h1, g0, g1, g2, b0, b1, b2, shmem, args):
        with numba.objmode(status="int32"):
            status = target(kernel, h0, h1, (g0, g1, g2), (b0, b1, b2), shmem, args,
                            pointer_types, catch)
        return status

    return launch


# -- kernels found by name ------------------------------------------------------

_BOUND = {}  # name -> the kernel code lowered in bound_launches launches under it
_binding = threading.local()  # .names: {id(kernel): name} while lowering such code


def bind_kernel(name, kernel):
    """Make *name* stand for *kernel* in code lowered by
    :func:`bound_launches` (in this process or, cached, in another)."""
    with _lock:
        _BOUND[name] = kernel


@contextlib.contextmanager
def bound_launches(names):
    """Lower launches of the kernels in *names* ``{name: kernel}`` (bound
    with :func:`bind_kernel`) as launches of whatever the name is bound to
    when they run: the code holds no Python object of this process."""
    outer = getattr(_binding, "names", None)
    _binding.names = {id(k): n for n, k in names.items()}
    try:
        yield
    finally:
        _binding.names = outer


def bound_name(kernel):
    """The name *kernel* is launched by in the code being lowered, or None."""
    names = getattr(_binding, "names", None)
    return None if names is None else names.get(id(kernel))


@dataclass(frozen=True)
class BoundKernelCheck:
    """Run by Numba when it loads cached code launching a kernel by *name*:
    refuses it (a cache miss) unless this process simulates kernels and has
    bound the name."""

    name: str

    def __call__(self):
        if not _simulator.enabled() or self.name not in _BOUND:
            raise LaunchTargetChanged("no simulated kernel is bound to %r here" % self.name)


@functools.lru_cache(maxsize=None)
def _pointer_types(argtypes):
    return tuple(_HALF if t == types.float16 else _ctype_of(t) for t in argtypes)


def _call_bound(spec, values):
    """Run *spec*'s target ``(name, target, argument types, catch)`` for the
    kernel bound to the name, with *values* ``(h0, h1, grid x, y, z, block
    x, y, z, sharedmem, args)``; CUDA_ERROR_INVALID_HANDLE if none is."""
    name, target, argtypes, catch = spec
    kernel = _BOUND.get(name)
    if kernel is None:
        return CUDA_ERROR_INVALID_HANDLE
    h0, h1, g0, g1, g2, b0, b1, b2, sharedmem, args = values
    return target(kernel, h0, h1, (g0, g1, g2), (b0, b1, b2), sharedmem, args,
                  _pointer_types(argtypes), catch)


def _emit_bound_call(context, builder, spec, valtypes, values):
    """Call :func:`_call_bound` with *spec* and *values* (of *valtypes*),
    the GIL taken: its status, or CUDA_ERROR_LAUNCH_FAILED when the call
    raised (its traceback printed). The code holds *spec* and the function
    pickled (by value: names, types; by reference: module functions), no
    object of this process, and needs no object-mode function (whose
    compilation, at its first call in each process, would cost more than
    loading the code)."""
    pyapi = context.get_python_api(builder)
    env_manager = context.get_env_manager(builder)
    tupty = types.Tuple(valtypes)
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, CUDA_ERROR_LAUNCH_FAILED))
    gil = pyapi.gil_ensure()
    boxed = pyapi.from_native_value(tupty, context.make_tuple(builder, tupty, values),
                                    env_manager)
    with builder.if_else(cgutils.is_null(builder, boxed)) as (failed, boxed_ok):
        with failed:
            pyapi.err_write_unraisable(ir.Constant(pyapi.pyobj, None))
        with boxed_ok:
            fn = pyapi.unserialize(pyapi.serialize_object(_call_bound))
            spec_obj = pyapi.unserialize(pyapi.serialize_object(spec))
            result = pyapi.call_function_objargs(fn, [spec_obj, boxed])
            pyapi.decref(boxed)
            with builder.if_else(cgutils.is_null(builder, result)) as (raised, returned):
                with raised:
                    pyapi.err_write_unraisable(ir.Constant(pyapi.pyobj, None))
                with returned:
                    value = pyapi.long_as_longlong(result)
                    pyapi.decref(result)
                    builder.store(builder.trunc(value, _i32), status)
    pyapi.gil_release(gil)
    return builder.load(status)


_i32 = ir.IntType(32)
_i8p = ir.IntType(8).as_pointer()


@numba.njit
def _host_ms():
    # The simulator's clock: host time, in object mode.
    with numba.objmode(t="float64"):
        t = time.perf_counter() * 1e3
    return t


def _invalid_unless(builder, ok, emit=None):
    """CUDA_ERROR_INVALID_HANDLE unless *ok* (an ``i1``); else *emit()*, then 0."""
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, CUDA_ERROR_INVALID_HANDLE))
    with builder.if_then(ok, likely=True):
        if emit is not None:
            emit()
        builder.store(ir.Constant(_i32, 0), status)
    return builder.load(status)


class SimulatedRuntime(simgraph.Emitters):
    """The simulator's emitters of synchronisation, events and graph
    operations, with the driver's arguments and results
    (:class:`.driver.DriverRuntime`): simulated launches have completed when
    they return, events time on the host clock, graphs are
    :mod:`.simgraph`'s."""

    def _idle(self, builder, *args):
        return ir.Constant(_i32, 0)

    emit_context_synchronize = emit_stream_synchronize = emit_stream_query = _idle

    def _event_status(self, builder, payload, emit=None):
        """CUDA_ERROR_INVALID_HANDLE for a destroyed event, else *emit()* then 0."""
        event = builder.load(_events.payload_field(builder, payload, "event"))
        return _invalid_unless(builder, cgutils.is_not_null(builder, event), emit)

    def emit_event_create(self, builder, payload, flags):
        """No CUevent: a non-NULL marker in its place (NULL once destroyed),
        no destroy function, not recorded (NaN)."""
        _events.init_payload(builder, payload, flags)
        builder.store(builder.inttoptr(ir.Constant(ir.IntType(64), 1), _i8p),
                      _events.payload_field(builder, payload, "event"))
        return ir.Constant(_i32, 0)

    def emit_event_record(self, builder, payload, stream):
        return self._event_status(builder, payload, lambda: builder.store(
            call_jitted(self.context, builder, _host_ms, (), []),
            _events.payload_field(builder, payload, "host_ms")))

    emit_event_query = emit_event_synchronize = _event_status
    emit_event_destroy = staticmethod(_events.emit_event_destroy)

    def emit_event_elapsed_time(self, builder, ms, start, end):
        """The host time between two simulated events; as the driver,
        CUDA_ERROR_INVALID_HANDLE unless both exist, time and were recorded."""
        usable = builder.not_(functools.reduce(
            builder.or_, _events.event_problems(builder, start)
            + _events.event_problems(builder, end)))
        times = [builder.load(_events.payload_field(builder, p, "host_ms")) for p in (start, end)]
        return _invalid_unless(builder, usable, lambda: builder.store(
            builder.fptrunc(builder.fsub(times[1], times[0]), ir.FloatType()), ms))

    def emit_event_handle(self, builder, payload):
        return ir.Constant(_i8p, None)  # no CUevent behind a simulated event

    def emit_launch_device(self, builder, stream):
        return ir.Constant(_i32, 0), ir.Constant(_i32, 0)  # one simulated device, 0


class SimulatorBackend(LaunchBackend):
    """Runs simulator kernels in Python through an object-mode helper."""

    name = "simulator"
    compiles_kernels = False
    waits_for_producer_streams = False
    runs_on_host = True
    device_memory = False
    no_handles = ("under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) kernels run as Python "
                  "and have no image or driver handle")

    def __init__(self):
        _driver.set_unused(
            "under numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) kernels run in Python "
            "on host memory (the addresses given are dereferenced): run without "
            "NUMBA_ENABLE_CUDASIM to record them")

    def runtime(self, context):
        return SimulatedRuntime(context)

    def cache_target(self):
        return (self.name,) if getattr(_binding, "names", None) is None else BOUND_TARGET

    def launches_by_name(self, kernels):
        for name, kernel in kernels.items():
            bind_kernel(name, kernel)
        return bound_launches(kernels)

    def array_classes(self):
        return (FakeCUDAArray,)

    def describe_array(self, obj):
        if not isinstance(obj, FakeCUDAArray):
            return None
        ary = obj._ary
        return ary.ctypes.data, ary.shape, ary.strides, ary.dtype, not ary.flags.writeable

    def stream_classes(self):
        return (_simulator.stream_class(),)

    def run_kernel_function(self, name, *args):
        # set_conditional sets the simulated handle; the PDL controls do
        # nothing (a simulated launch has completed when the next starts)
        if name == "set_conditional":
            simgraph.set_conditional(*args)
        return True

    def stream_handle(self, stream):
        # unique while it lives, so that simulated graphs capture on it as on
        # a real one; an address, as a CUstream: never 0, 1 or 2
        return id(stream)

    def refusal(self, source, kernel):
        if source is SOURCE:
            return None
        # a launch would put host memory in a real GPU launch
        return ("this process runs numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), which "
                "simulates numba-cuda kernels only, and %s; run without NUMBA_ENABLE_CUDASIM to "
                "launch it on a GPU, or simulate a numba-cuda kernel (from numba import cuda)"
                % source.simulation_refusal(kernel))

    def plan_parts(self, source, overload):
        return {}

    def cluster_refusal(self):
        return "thread-block clusters are not simulated by numba-cuda's CUDA simulator"

    def orders_launches(self):
        return True  # griddepcontrol_wait() and launch_dependents() do nothing here

    def emit_preload(self, context, builder, plan, image=None):
        return ir.Constant(ir.IntType(32), 0)  # nothing to load

    def emit_launch_checks(self, context, builder, guards, plan, cfg, image=None):
        # The simulator's device is of compute capability 5.2, whose blocks
        # get 48 KiB of shared memory: more is refused as a GPU refuses more
        # than it gives (the same status and sentence).
        guards.check(lambda: builder.icmp_unsigned(">", cfg.sharedmem,
                                                   cfg.sharedmem.type(DEFAULT_PER_BLOCK)),
                     SHARED_TOO_LARGE)
        # A GPU's driver refuses dimensions beyond CUDA's limits (run-time
        # values reach it unchecked); the simulator would run them, for
        # hours or out of memory for a large grid.
        for what, dims in (("griddim", cfg.dims[:3]), ("blockdim", cfg.dims[3:6])):
            for d, limit in zip(dims, LIMITS[what][0]):
                guards.check(lambda d=d, limit=limit: builder.icmp_unsigned(">", d, d.type(limit)),
                             _TOO_LARGE % (what, LIMITS[what][1]))
        guards.check(lambda: builder.icmp_unsigned(
            ">", block_threads(builder, cfg)[0], ir.Constant(ir.IntType(32), BLOCK_THREADS_MAX)),
            _TOO_MANY_THREADS)

    def emit_occupancy(self, builder, query, cfg, threads):
        # The model: one multiprocessor running one block at a time (the
        # simulator's own max_cooperative_grid_blocks is 1), of up to 1024
        # threads. max_active_clusters is refused when typing.
        i32 = ir.IntType(32)
        if query == "max_potential_block_size":
            return ir.Constant(i32, 0), [ir.Constant(i32, 1), ir.Constant(i32, MAX_BLOCK)]
        fits = builder.icmp_unsigned("<=", threads, ir.Constant(i32, MAX_BLOCK))
        return ir.Constant(i32, 0), [builder.zext(fits, i32)]

    def emit_is_device_accessible(self, builder, address, host_allocated):
        # The simulator's "device" memory is host memory: only an array that
        # Numba or NumPy allocated is known to be host-only, as on a GPU.
        return builder.not_(host_allocated)

    def _emit_call(self, context, builder, plan, cfg, values, catch, handles, target):
        # Pointers travel as integers and float16 as its bits (Numba cannot
        # box either); the Python side rebuilds them (_as_kernel_arg).
        formal_types = plan.argtypes
        hosted = types.Tuple([types.uintp if isinstance(t, types.CPointer)
                              else types.uint16 if t == types.float16 else t
                              for t in formal_types])
        vals = [builder.ptrtoint(v, ir.IntType(64)) if isinstance(t, types.CPointer)
                else builder.bitcast(v, ir.IntType(16)) if t == types.float16 else v
                for v, t in zip(values, formal_types)]
        handles = [builder.ptrtoint(h, ir.IntType(64)) for h in handles]
        args = context.make_tuple(builder, hosted, vals)
        name = bound_name(plan.overload)
        if name is not None:
            add_reload_checks(context, [BoundKernelCheck(name)])
            # a kernel's exception is a failed launch here (catch or not):
            # the code bound launches are lowered in is a handler's cfunc
            return _emit_bound_call(
                context, builder, (name, target, tuple(formal_types), True),
                (types.uintp,) * 2 + (types.uint32,) * 7 + (hosted,),
                handles + cfg.dims + [cfg.sharedmem, args])
        helper = _helper(plan.overload, tuple(formal_types), catch, target)
        return call_jitted(context, builder, helper,
                           (types.uintp,) * 2 + (types.uint32,) * 7 + (hosted,),
                           handles + cfg.dims + [cfg.sharedmem, args])

    def emit_launch(self, context, builder, plan, cfg, values, catch, image=None):
        null = ir.Constant(ir.IntType(8).as_pointer(), None)
        return self._emit_call(context, builder, plan, cfg, values, catch,
                               [cfg.stream, null], _simulate)

    def emit_node_update(self, context, builder, plan, cfg, values, exe, node):
        return self._emit_call(context, builder, plan, cfg, values, True, [exe, node],
                               _set_node)
