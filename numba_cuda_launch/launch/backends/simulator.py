"""Launches from compiled code under numba-cuda's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``): a ``FakeCUDAKernel`` gets a CPU type, so a
launch types and is checked as on a GPU, then calls back into Python (the
GIL taken) to run the kernel on host memory, or to record it when its stream
captures a CUDA graph (:mod:`.simgraph`). README.md, "Without a GPU: the
CUDA simulator" and "what works where".
"""

import ctypes
import functools
import threading

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import NativeValue, typeof_impl, unbox
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
from numba.cuda.simulator.kernel import FakeCUDAKernel

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.errors import CUDA_ERROR_LAUNCH_FAILED
from numba_cuda_launch.launch import launchconfig
from numba_cuda_launch.launch.backends import LaunchBackend, call_jitted, register, simgraph
from numba_cuda_launch.launch.guards import block_threads

__all__ = ["SimulatedKernel", "SimulatorBackend", "CUDA_ERROR_LAUNCH_FAILED"]

MAX_BLOCK = 1024  # threads per block in the occupancy model
# A simulator kernel is not thread-safe (configuring it mutates it): one launch at a time.
_lock = threading.RLock()


class SimulatedKernel(launchconfig.KernelType):
    """The CPU type of a simulator kernel."""

    def __init__(self, kernel):
        super().__init__(kernel, "SimulatedKernel(%s)" % kernel.fn.__name__)


@typeof_impl.register(FakeCUDAKernel)
def _typeof_sim_kernel(val, c):
    return SimulatedKernel(val)


@unbox(SimulatedKernel)
def _unbox_sim_kernel(typ, obj, c):
    # The type is the kernel (its key): a kernel passed in carries no data.
    return NativeValue(c.context.get_dummy_value())


launchconfig.add_kernel_type(SimulatedKernel)


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
    the ``CUresult``. With *catch* false the kernel's exception propagates."""
    with _lock, _compat.simulator_numba_spelling(launch.kernel):
        try:
            launch.kernel[launch.grid, launch.block, 0, launch.sharedmem](*launch.args)
        except Exception:
            if not catch:
                raise
            import traceback

            traceback.print_exc()
            return CUDA_ERROR_LAUNCH_FAILED
    return 0


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
    pointer_types = tuple(_HALF if t == types.float16 else _ctype_of(t) for t in argtypes)

    @numba.njit
    def launch(h0, h1, g0, g1, g2, b0, b1, b2, shmem, args):
        with numba.objmode(status="int32"):
            status = target(kernel, h0, h1, (g0, g1, g2), (b0, b1, b2), shmem, args,
                            pointer_types, catch)
        return status

    return launch


class SimulatorBackend(LaunchBackend):
    """Runs simulator kernels in Python through an object-mode helper."""

    waits_for_producer_streams = False

    def claims(self, kernel):
        return _compat.is_simulated(kernel)

    def emit_preload(self, context, builder, kernel):
        return ir.Constant(ir.IntType(32), 0)  # nothing to load

    def emit_occupancy(self, builder, query, cfg):
        # The model: one multiprocessor running one block at a time (the
        # simulator's own max_cooperative_grid_blocks is 1), of up to 1024
        # threads. max_active_clusters is refused when typing.
        i32 = ir.IntType(32)
        if query == "max_potential_block_size":
            return ir.Constant(i32, 0), [ir.Constant(i32, 1), ir.Constant(i32, MAX_BLOCK)]
        threads = block_threads(builder, cfg)[0]  # at most 2**31-1: checked before
        fits = builder.icmp_unsigned("<=", threads, ir.Constant(i32, MAX_BLOCK))
        return ir.Constant(i32, 0), [builder.zext(fits, i32)]

    def emit_is_device_accessible(self, builder, address, host_allocated):
        # The simulator's "device" memory is host memory: only an array that
        # Numba or NumPy allocated is known to be host-only, as on a GPU.
        return builder.not_(host_allocated)

    def _emit_call(self, context, builder, kernel, cfg, formal_types, values, catch,
                   handles, target):
        # Pointers travel as integers and float16 as its bits (Numba cannot
        # box either); the Python side rebuilds them (_as_kernel_arg).
        hosted = types.Tuple([types.uintp if isinstance(t, types.CPointer)
                              else types.uint16 if t == types.float16 else t
                              for t in formal_types])
        vals = [builder.ptrtoint(v, ir.IntType(64)) if isinstance(t, types.CPointer)
                else builder.bitcast(v, ir.IntType(16)) if t == types.float16 else v
                for v, t in zip(values, formal_types)]
        handles = [builder.ptrtoint(h, ir.IntType(64)) for h in handles]
        args = context.make_tuple(builder, hosted, vals)
        helper = _helper(kernel, tuple(formal_types), catch, target)
        return call_jitted(context, builder, helper,
                           (types.uintp,) * 2 + (types.uint32,) * 7 + (hosted,),
                           handles + cfg.dims + [cfg.sharedmem, args])

    def emit_launch(self, context, builder, kernel, cfg, formal_types, values, catch):
        null = ir.Constant(ir.IntType(8).as_pointer(), None)
        return self._emit_call(context, builder, kernel, cfg, formal_types, values, catch,
                               [cfg.stream, null], _simulate)

    def emit_node_update(self, context, builder, kernel, cfg, formal_types, values, exe, node):
        return self._emit_call(context, builder, kernel, cfg, formal_types, values, True,
                               [exe, node], _set_node)


register(SimulatorBackend())
