"""A recording fake CUDA driver, for testing launch code without a GPU.

:class:`RecordingDriver` (public in :mod:`numba_cuda_launch.testing`) takes the
place of the driver table for launches from compiled code and records image
loads, launches with their parameter bytes, CUDA graphs (:mod:`.graphstate`),
synchronisation and events, occupancy queries and a fatbin's choice of code,
each with the device it went to: devices have primary contexts, streams
belong to a device's context, and a launch runs in its stream's context.
README.md ("Testing without a GPU"), docs/devices.md, docs/graphs.md,
docs/events.md, docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import itertools
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numba_cuda_launch.errors import (
    CUDA_ERROR_INVALID_CLUSTER_SIZE as _INVALID_CLUSTER_SIZE,
    CUDA_ERROR_INVALID_CONTEXT as _INVALID_CONTEXT,
    CUDA_ERROR_ILLEGAL_STATE as _ILLEGAL_STATE,
    CUDA_ERROR_INVALID_HANDLE as _INVALID_HANDLE,
    CUDA_ERROR_INVALID_VALUE as _INVALID_VALUE,
    CUDA_ERROR_NO_BINARY_FOR_GPU as _NO_BINARY,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED as _CAPTURE_UNSUPPORTED,
    error_name,
)
from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.fatbin import driver_choice, fatbin_entries, is_fatbin
from numba_cuda_launch.cudadrv.graph import CAPTURE_RELAXED as _RELAXED
from numba_cuda_launch.cudadrv.conditional import NODE_TYPE_CONDITIONAL as _NODE_CONDITIONAL
from numba_cuda_launch.cudadrv.graphstate import (ConditionalHandleRecord, ConditionalNode,
                                                  GraphState, RecordedExec, RecordedGraph)
from numba_cuda_launch.cudadrv.image import param_sizes

__all__ = ["RecordingDriver", "Launch", "RecordedGraph", "RecordedExec", "OccupancyQuery",
           "CodeChoice", "ConditionalNode", "ConditionalHandleRecord", "occupancy_model"]

_vp = ctypes.c_void_p
_u32 = ctypes.c_uint
_c_int = ctypes.c_int
_PRIMARY_CONTEXT = 0xC0
_CU_EVENT_DISABLE_TIMING = 0x2
_ATTR_COOPERATIVE, _ATTR_CLUSTER, _ATTR_PROGRAMMATIC = 2, 4, 6
# CUfunction_attribute and CUdevice_attribute values (cuda.h)
_FUNC_SHARED_SIZE, _FUNC_MAX_DYNAMIC_SHARED = 1, 8
_ATTR_SHARED_PER_BLOCK, _ATTR_MULTIPROCESSORS, _ATTR_SHARED_PER_BLOCK_OPTIN = 8, 16, 97


class _LaunchConfigC(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", _u32 * 3), ("block", _u32 * 3), ("sharedmem", _u32),
                ("stream", _vp), ("attrs", _vp), ("count", _u32)]


class _LaunchAttributeC(ctypes.Structure):  # CUlaunchAttribute
    _fields_ = [("id", _c_int), ("pad", ctypes.c_char * 4), ("value", _u32 * 16)]


class _KernelNodeParamsC(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", _vp), ("grid", _u32 * 3), ("block", _u32 * 3), ("sharedmem", _u32),
                ("params", _vp), ("extra", _vp), ("kern", _vp), ("ctx", _vp)]


class _UpdateInfoC(ctypes.Structure):  # CUgraphExecUpdateResultInfo
    _fields_ = [("result", _c_int), ("node", _vp), ("from_node", _vp)]


class _ConditionalNodeParamsC(ctypes.Structure):  # CUgraphNodeParams, conditional
    _fields_ = [("type", _c_int), ("reserved0", _c_int * 3), ("handle", ctypes.c_uint64),
                ("kind", _c_int), ("size", _u32), ("bodies", _vp), ("ctx", _vp),
                ("rest", ctypes.c_int64 * 26)]


def _launch_config(address):
    """The ``CUlaunchConfig`` at *address* and its attributes, {id: values}."""
    cfg = _LaunchConfigC.from_address(address)
    attrs = (_LaunchAttributeC * cfg.count).from_address(cfg.attrs) if cfg.count else []
    return cfg, {a.id: tuple(a.value[:3]) for a in attrs}


@dataclass
class CodeChoice:
    """The code of a fatbin a launch (or a load) ran on a device, as the
    driver picks it: ``kind`` ``"cubin"`` or ``"ptx"`` and the ``cc`` it was
    built for, both None when nothing in the image fits the device."""

    device: int
    device_cc: tuple[int, ...]
    kernel: str
    kind: str | None
    cc: tuple[int, int] | None


@dataclass
class Launch:
    """One recorded launch. ``params`` holds the bytes of each kernel
    parameter, or is None when their sizes are unknown in this process (the
    launch code was compiled in another one and loaded from Numba's cache,
    and the kernel was not :meth:`RecordingDriver.register`-ed)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    sharedmem: int
    stream: int
    params: list[bytes] | None
    cooperative: bool
    #: thread-block cluster dimensions (a cuLaunchKernelEx attribute), or None
    cluster: tuple[int, int, int] | None = None
    #: the executable graph (handle) whose replay ran this launch, else 0
    graph: int = 0
    #: a programmatic dependent launch (the cuLaunchKernelEx attribute
    #: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION set to 1)
    dependent: bool = False
    #: the device it ran on: its stream's (RecordingDriver.add_stream), else
    #: the current context's; a replayed launch keeps its graph's device
    device: int = 0


@dataclass
class OccupancyQuery:
    """One occupancy query: ``kind`` is ``"max_active_blocks"``,
    ``"max_potential_block_size"`` or ``"max_active_clusters"``."""

    kind: str
    kernel: str
    block_size: int
    sharedmem: int
    cluster: tuple[int, int, int] | None
    result: tuple[int, ...]
    #: the device of the current context, which answers it
    device: int = 0


#: An occupancy answer: ``(block_size, sharedmem)`` -> blocks per multiprocessor.
Occupancy = Callable[[int, int], int]


def occupancy_model(block_size: int, sharedmem: int) -> int:
    """The fake driver's answer to "blocks per multiprocessor": a simple
    model (2048 threads, 32 blocks and 228 KiB of shared memory per
    multiprocessor, 1024 threads per block), not any device's."""
    if not 1 <= block_size <= 1024:
        return 0
    blocks = min(32, 2048 // block_size)
    if sharedmem:
        blocks = min(blocks, (228 * 1024) // sharedmem)
    return blocks


def _check_integer(name, value, low, high, why="", where="RecordingDriver()"):
    """Refuse *value* of parameter *name* unless it is an integer in *low*..*high*."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("%s: %s must be an integer, not %r%s" % (where, name, value, why))
    if not low <= value <= high:
        raise ValueError("%s: %s must be between %d and %d, not %r%s"
                         % (where, name, low, high, value, why))


def _per_device(value, device):
    """*value*, or its entry for *device* when it is a dict of them."""
    return value[device] if isinstance(value, dict) else value


def _put(out, value):
    """Store *value* through a driver function's out-parameter: success."""
    out[0] = value
    return 0


def _keep_cluster(new, old):
    # cuGraphExecUpdate: a node keeps the cluster it was recorded with
    return dataclasses.replace(new, cluster=old.cluster)


class RecordingDriver:
    """Records launches instead of running them.

    ``launch_status``/``load_status`` set the ``CUresult`` launches and image
    loads return (to test error handling). Not for concurrent use with real
    launches: while active, every compiled launch in the process is routed
    here. Recorders nest (the innermost records); ending one while another
    made inside it is active raises RuntimeError and restores the driver
    table as it was before the outer one.

    Several devices (docs/devices.md): *device_count* devices (by default
    one, or as many as *compute_capability* names), each with a primary
    context (:meth:`primary_context`); :meth:`use_device` makes one current
    on the calling thread, :meth:`add_stream` makes a stream one of a
    device's. ``multiprocessors``, ``shared_per_block``,
    ``shared_per_block_optin`` and *occupancy* may be dicts by device.
    """

    # Kernel handles outlive one fake: a compiled function keeps the handle
    # it loaded for the rest of the process, as with the real driver.
    _names: dict[int, str] = {}
    _fatbins: dict[int, Any] = {}  # kernel handle -> the entries of its fatbin image

    #: multiprocessors of the fake device (occupancy answers), or {device: count}
    multiprocessors: int | dict[int, int] = 132
    #: shared memory per block of the fake device: by default, and at most
    #: with the opt-in (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK(_OPTIN));
    #: either may be {device: bytes}
    shared_per_block: int | dict[int, int] = 48 * 1024
    shared_per_block_optin: int | dict[int, int] = 227 * 1024
    #: devices of the fake driver (cuDeviceGetCount)
    device_count = 1

    def __init__(self, layouts: Mapping[str, Sequence[int]] | None = None,
                 launch_status: int = 0, load_status: int = 0, has_context: bool = True,
                 occupancy: Occupancy | Mapping[int, Occupancy] = occupancy_model,
                 load_during_capture: bool = True,
                 compute_capability: Sequence[int] | Mapping[int, Sequence[int]] | None = None,
                 driver_version: int = 13000, device_count: int | None = None) -> None:
        for name, value in (("launch_status", launch_status), ("load_status", load_status)):
            _check_integer(name, value, 0, 2**31 - 1)
        for name, value in (("has_context", has_context),
                            ("load_during_capture", load_during_capture)):
            if not isinstance(value, bool):
                raise TypeError("RecordingDriver(): %s must be True or False, not %r"
                                % (name, value))
        _check_integer("driver_version", driver_version, 1, 2**31 - 1,
                       " (cuDriverGetVersion's answer: 13000 for CUDA 13.0)")
        if device_count is not None:
            _check_integer("device_count", device_count, 1, 2**31 - 1)
        if not callable(occupancy) and not isinstance(occupancy, Mapping):
            raise TypeError("RecordingDriver(): occupancy must be a function (block_size, "
                            "sharedmem) -> blocks, or a dict of them by device, not %r"
                            % (occupancy,))
        # entry name -> [param sizes]
        self.layouts: dict[str, Sequence[int]] = dict(layouts or {})
        # (major, minor) of every device, or {ordinal: (major, minor)}; None:
        # any image runs anywhere
        self.compute_capability = compute_capability
        if device_count is not None:
            self.device_count = device_count
        elif isinstance(compute_capability, dict):
            self.device_count = max(compute_capability) + 1
        self._streams: dict[int, int] = {}  # stream handle -> context: add_stream
        #: (context, kernel name): a kernel's first use in a context (a
        #: launch, capture or cuKernelGetFunction), where the driver loads
        #: the library's code into that context
        self.context_loads: list[tuple[int, str]] = []
        self._used_in: set[tuple[int, int]] = set()  # (context, kernel handle) in context_loads
        # CodeChoice of each launch of a fatbin's kernel, and failed loads
        self.choices: list[CodeChoice] = []
        self._library_fatbins: dict[int, Any] = {}  # library handle -> fatbin entries
        # [(start, end)]: what cuPointerGetAttribute knows
        self.device_memory: list[tuple[int, int]] = []
        self.pointer_queries: list[int] = []  # addresses asked about
        self.launch_status = launch_status
        self.load_status = load_status
        self.loads: list[int] = []
        self.unloads: list[int] = []
        self.launches: list[Launch] = []
        self.contexts_made_current = 0
        self.functions: list[tuple[int, str]] = []  # (context, kernel) loaded by cfg.preload
        # live handle -> (kind, parameter sizes): add_kernel
        self._loaded: dict[int, tuple[str, tuple[int, ...]]] = {}
        self._graph_state = GraphState(keep_destroyed=True, own=dataclasses.replace,
                                       update=_keep_cluster)
        self.graphs: dict[int, RecordedGraph] = self._graph_state.graphs  # handle -> graph
        self.execs: dict[int, RecordedExec] = self._graph_state.execs  # handle -> exec
        self.graph_launches: list[tuple[int, int]] = []  # (exec handle, stream)
        self.node_updates: list[tuple[int, int, Launch]] = []  # (exec handle, node, Launch)
        self.exec_updates: list[tuple[int, int, int]] = []  # (exec, graph handle, status)
        #: conditional handle -> ConditionalHandleRecord (graph, default, ...)
        self.handles: dict[int, ConditionalHandleRecord] = self._graph_state.handles
        #: what cuDriverGetVersion answers (13000: CUDA 13.0)
        self.driver_version = driver_version
        self.occupancy_queries: list[OccupancyQuery] = []
        #: block_size, sharedmem -> blocks per multiprocessor, or {device: that}
        self.occupancy = occupancy
        # False: image loads during a capture fail as on drivers before CUDA 12.3
        self.load_during_capture = load_during_capture
        #: cuKernelSetAttribute calls: (kernel name, attribute, value, device)
        self.kernel_attributes: list[tuple[str, int, int, int]] = []
        #: static shared memory of kernels, by name (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        self.static_shared: dict[str, int] = {}
        # (kernel handle, device) -> max dynamic shared memory
        self._shared_limits: dict[tuple[int, int], int] = {}
        # (driver function, handles...) of synchronisation and events
        self.calls: list[tuple[Any, ...]] = []
        # driver function name -> the CUresult it returns instead
        self.statuses: dict[str, int] = {}
        self.elapsed_ms = 0.25
        self.events_created = 0
        self.events_destroyed = 0
        # live handle -> [flags, recorded stream or None]
        self._events: dict[int, list[Any]] = {}
        self._has_context = has_context
        self._thread = threading.local()
        self._lock = threading.Lock()
        # (a call with *args fills every parameter, as mypy counts: call-arg)
        fns = dict(
            cuInit=lambda flags: 0,
            cuLibraryLoadData=self._load,
            cuLibraryGetKernel=self._get_kernel,
            cuLibraryUnload=self._unload,
            cuLaunchKernel=lambda *args: self._record(*args[:10], False),  # type: ignore[call-arg]
            cuLaunchCooperativeKernel=lambda *args: self._record(  # type: ignore[call-arg]
                *args, True),
            cuCtxGetCurrent=lambda out: _put(out, self._current()),
            cuCtxSetCurrent=self._set_context,
            cuDeviceGet=lambda out, ordinal: _put(out, ordinal),
            cuDevicePrimaryCtxRetain=lambda out, dev: _put(out, _PRIMARY_CONTEXT + dev),
            cuKernelGetFunction=self._get_function,
            cuGetErrorName=self._error_name,
            cuPointerGetAttribute=self._pointer_attribute,
            cuLaunchKernelEx=self._launch_ex,
            cuStreamBeginCapture_v2=lambda s, mode: self._graph_state.begin_capture(
                s or 0, mode, self._device_of(self._stream_context(s))),
            cuStreamEndCapture=self._end_capture,
            cuStreamIsCapturing=self._is_capturing,
            cuThreadExchangeStreamCaptureMode=self._exchange_capture_mode,
            cuStreamGetCaptureInfo_v2=self._capture_info,
            cuGraphNodeGetType=self._node_type,
            cuGraphKernelNodeGetAttribute=self._node_attribute,
            cuGraphInstantiateWithFlags=self._instantiate,
            cuGraphLaunch=self._graph_launch,
            cuGraphExecUpdate_v2=self._exec_update,
            cuGraphExecKernelNodeSetParams_v2=self._node_set_params,
            cuGraphDestroy=lambda g: self._graph_state.destroy(self.graphs, g),
            cuGraphExecDestroy=lambda e: self._graph_state.destroy(self.execs, e),
            cuOccupancyMaxActiveBlocksPerMultiprocessor=self._max_active_blocks,
            cuOccupancyMaxPotentialBlockSize=self._max_potential_block_size,
            cuOccupancyMaxActiveClusters=self._max_active_clusters,
            cuKernelGetParamInfo=lambda *a: self._param_info("CUkernel", *a),
            cuFuncGetParamInfo=lambda *a: self._param_info("CUfunction", *a),
            cuCtxGetDevice=self._ctx_device,
            cuDeviceGetCount=lambda out: _put(out, self.device_count),
            cuDeviceGetAttribute=self._device_attribute,
            cuKernelGetAttribute=self._kernel_attribute,
            cuKernelSetAttribute=self._set_kernel_attribute,
            cuDriverGetVersion=lambda out: _put(out, self.driver_version),
            cuStreamGetCaptureInfo_v3=self._capture_info_v3,
            cuGraphConditionalHandleCreate=self._handle_create,
            cuGraphAddNode_v2=self._add_node,
            cuStreamUpdateCaptureDependencies_v2=self._update_dependencies,
            cuStreamBeginCaptureToGraph=self._begin_capture_to_graph,
            cuCtxSynchronize=lambda: self._log("cuCtxSynchronize"),
            cuStreamSynchronize=self._stream_synchronize,
            cuStreamQuery=lambda s: self._log("cuStreamQuery", s or 0),
            cuEventCreate=self._event_create,
            cuEventRecord=self._event_record,
            cuEventQuery=lambda e: self._event_call("cuEventQuery", e),
            cuEventSynchronize=lambda e: self._event_call("cuEventSynchronize", e),
            cuEventElapsedTime=self._event_elapsed,
            cuStreamGetCtx=self._stream_ctx,
            cuGraphGetNodes=self._graph_nodes,
            cuGraphDestroyNode=self._graph_state.destroy_node,
        )
        self._fns = {name: driver.prototype(name)(fn) for name, fn in fns.items()}
        self._active = False

    def register(self, handle: Any) -> None:
        """Know the parameter sizes of a numba_cuda_launch.KernelHandle (not
        needed for launch code compiled in this process, which records its
        kernels' parameter sizes itself)."""
        self.layouts[handle.entry_name] = [p.size for p in handle.params]

    def add_kernel(self, handle: int, name: str, param_sizes: Iterable[int],
                   kind: str = "CUkernel") -> None:
        """Treat *handle* as a kernel another library loaded: a ``CUkernel``
        or a ``CUfunction`` (*kind*) of entry *name* whose parameters have
        *param_sizes* bytes. Launches of it are recorded with their
        parameter bytes; the param-info queries of its kind answer
        *param_sizes*; ``cuKernelGetFunction`` refuses a ``CUfunction``
        (``CUDA_ERROR_INVALID_HANDLE``), as the driver does."""
        with self._lock:
            self._names[handle] = name
            self._loaded[handle] = (kind, tuple(param_sizes))
        self.layouts[name] = list(param_sizes)

    def _param_info(self, kind, handle, index, offset, size):
        known = self._loaded.get(handle)
        if known is None or known[0] != kind:
            return _INVALID_HANDLE
        sizes = known[1]
        if index >= len(sizes):
            return _INVALID_VALUE
        # Offsets as the driver lays parameters out: each aligned to its size.
        at = where = 0
        for n in sizes[:index + 1]:
            align = max(1, min(n, 8))
            where = (at + align - 1) // align * align
            at = where + n
        offset[0], size[0] = where, sizes[index]
        return 0

    def add_device_memory(self, address: int, nbytes: int) -> None:
        """Treat ``[address, address + nbytes)`` as device memory: the fake
        ``cuPointerGetAttribute`` knows it (any other address is refused with
        ``CUDA_ERROR_INVALID_VALUE``, as the driver refuses host memory)."""
        self.device_memory.append((int(address), int(address) + int(nbytes)))

    def _pointer_attribute(self, out, attribute, address):
        with self._lock:
            self.pointer_queries.append(address)
        if any(lo <= address < hi for lo, hi in self.device_memory):
            ctypes.cast(out, ctypes.POINTER(ctypes.c_uint))[0] = 2  # CU_MEMORYTYPE_DEVICE
            return 0
        return _INVALID_VALUE

    def _current(self):
        return getattr(self._thread, "ctx", _PRIMARY_CONTEXT if self._has_context else None)

    @staticmethod
    def primary_context(ordinal: int) -> int:
        """The fake handle of device *ordinal*'s primary context (what
        ``cuDevicePrimaryCtxRetain`` gives)."""
        return _PRIMARY_CONTEXT + ordinal

    def use_device(self, ordinal: int) -> None:
        """Make device *ordinal*'s primary context current on this thread, as
        ``cuCtxSetCurrent`` does (launches on streams of no device, and
        occupancy queries, then go to that device)."""
        _check_integer("ordinal", ordinal, 0, self.device_count - 1,
                       " (the fake has %d devices: device_count)" % self.device_count,
                       "RecordingDriver.use_device")
        self._thread.ctx = _PRIMARY_CONTEXT + ordinal

    def add_stream(self, stream: int, device: int) -> int:
        """Make *stream* (a handle above 2: 0, 1 and 2 are the default
        streams of the current context) a stream of device *device*'s primary
        context, as ``cuStreamCreate`` with that context current does: a
        kernel launched on it runs on that device whatever context is
        current (the driver launches a ``CUkernel`` in its stream's context),
        a capture on it records a graph of that device, and
        ``cuStreamGetCtx`` answers so. Other streams
        belong to the context current when they are used. Returns *stream*."""
        if not isinstance(stream, int) or stream <= 2:
            raise ValueError("RecordingDriver.add_stream: stream must be an integer handle "
                             "above 2 (0, 1 and 2 are the current context's default "
                             "streams), not %r" % (stream,))
        if not 0 <= device < self.device_count:
            raise ValueError("RecordingDriver.add_stream: device %r is not one of the %d "
                             "devices (device_count)" % (device, self.device_count))
        self._streams[stream] = _PRIMARY_CONTEXT + device
        return stream

    def _stream_context(self, stream):
        """The context work on *stream* runs in: its own (:meth:`add_stream`),
        else the current context (None when there is none)."""
        return self._streams.get(stream or 0) or self._current()

    def _stream_ctx(self, stream, out):
        ctx = self._stream_context(stream)
        return _put(out, ctx) if ctx else _INVALID_CONTEXT

    def _use_in(self, ctx, kernel):
        """Note *kernel*'s first use in context *ctx* (a library's code is
        loaded into each context that uses it)."""
        if self._loaded.get(kernel, ("CUkernel",))[0] != "CUkernel":
            return  # a CUfunction is its context's already
        with self._lock:
            if (ctx, kernel) not in self._used_in:
                self._used_in.add((ctx, kernel))
                self.context_loads.append((ctx, self._names[kernel]))

    def _runs(self, kernel, entries, device, record=True):
        """0 when *device* can run fatbin *entries* of *kernel* (recording
        the choice if *record*), else ``CUDA_ERROR_NO_BINARY_FOR_GPU``
        (recorded)."""
        ordinal = device
        cc = self.compute_capability
        if isinstance(cc, dict):
            cc = cc.get(ordinal)
        if cc is None or entries is None:
            return 0
        chosen = driver_choice(entries, cc)
        if not record and chosen is not None:
            return 0
        with self._lock:
            self.choices.append(CodeChoice(ordinal, tuple(cc), kernel, chosen and chosen.kind,
                                           chosen and chosen.cc))
        return 0 if chosen is not None else _NO_BINARY

    def _set_context(self, ctx):
        self._thread.ctx = ctx
        with self._lock:
            self.contexts_made_current += 1
        return 0

    # CUresult -> NUL-terminated name, kept for the process
    _error_names: dict[int, ctypes.Array[ctypes.c_char]] = {}

    def _error_name(self, status, out):
        buf = self._error_names.get(status)
        if buf is None:
            buf = self._error_names[status] = ctypes.create_string_buffer(
                error_name(status).encode())
        return _put(out, ctypes.addressof(buf))

    def _get_function(self, out, kernel):
        if kernel not in self._names or self._loaded.get(kernel, ("CUkernel",))[0] != "CUkernel":
            return _INVALID_HANDLE
        ctx = self._current()
        status = self._runs(self._names[kernel], self._fatbins.get(kernel), self._device_of(ctx))
        if status:
            return status
        self._use_in(ctx, kernel)
        with self._lock:
            self.functions.append((ctx, self._names[kernel]))
        return _put(out, kernel)

    def _load(self, out, image, *rest):
        if self.load_status:
            return self.load_status
        if not self.load_during_capture:
            with self._graph_state.lock:
                mine = [c for c in self._graph_state.captures.values()
                        if c.thread == threading.get_ident() and c.mode != _RELAXED]
                for c in mine:
                    c.invalidated = True
            if mine:
                return _CAPTURE_UNSUPPORTED
        entries = None  # any device runs it: not a fatbin, or its entries are compressed
        head = ctypes.string_at(image, 16) if image else b""
        if is_fatbin(head):
            with contextlib.suppress(ValueError):
                entries = fatbin_entries(ctypes.string_at(
                    image, 16 + int.from_bytes(head[8:16], "little")))
        with self._lock:
            self.loads.append(image)
            out[0] = 0x1000 + len(self.loads)
            self._library_fatbins[out[0]] = entries
        return 0

    def _get_kernel(self, out, lib, name):
        # With lazy loading (the default) the driver finds no code for the
        # device here, not when the library is loaded.
        entries = self._library_fatbins.get(lib)
        status = self._runs(name.decode(), entries, self._device_of(self._current()),
                            record=False)
        if status:
            return status
        with self._lock:
            handle = 0x100000 + len(RecordingDriver._names)
            self._names[handle] = name.decode()
            if entries is not None:
                self._fatbins[handle] = entries
            out[0] = handle
        return 0

    def _unload(self, lib):
        with self._lock:
            self.unloads.append(lib)
        return 0

    def _params(self, name, params):
        sizes = self.layouts.get(name) or param_sizes(name)
        if sizes is None:
            return None
        params = ctypes.cast(params, ctypes.POINTER(_vp))
        return [ctypes.string_at(params[i], size) for i, size in enumerate(sizes)]

    # -- kernel and device attributes (dynamic shared memory above 48 KiB) ------------

    def _device_of(self, ctx):
        """The device of context *ctx*: a primary context's, else 0."""
        dev = (ctx or 0) - _PRIMARY_CONTEXT
        # compute_capability may name more devices than device_count
        cc = self.compute_capability
        count = max(self.device_count, max(cc) + 1 if isinstance(cc, dict) else 0)
        return dev if 0 <= dev < count else 0

    def _device(self):
        """The device of the current context."""
        return self._device_of(self._current())

    def _ctx_device(self, out):
        if not self._current():
            return _INVALID_CONTEXT
        return _put(out, self._device())

    def _attribute(self, out, values, attr, dev):
        """Answer attribute *attr* of *values* on device *dev*."""
        if attr not in values or not 0 <= dev < self.device_count:
            return _INVALID_VALUE
        return _put(out, values[attr])

    def _device_attribute(self, out, attr, dev):
        if not 0 <= dev < self.device_count:
            return _INVALID_VALUE
        return self._attribute(out, {
            _ATTR_SHARED_PER_BLOCK: _per_device(self.shared_per_block, dev),
            _ATTR_SHARED_PER_BLOCK_OPTIN: _per_device(self.shared_per_block_optin, dev),
            _ATTR_MULTIPROCESSORS: _per_device(self.multiprocessors, dev)}, attr, dev)

    def _static(self, kernel):
        return self.static_shared.get(self._names[kernel], 0)

    def _shared_limit(self, kernel, dev):
        return self._shared_limits.get(
            (kernel, dev), _per_device(self.shared_per_block, dev) - self._static(kernel))

    def _kernel_attribute(self, out, attr, kernel, dev):
        if kernel not in self._names:
            return _INVALID_HANDLE
        return self._attribute(out, {_FUNC_SHARED_SIZE: self._static(kernel),
                                     _FUNC_MAX_DYNAMIC_SHARED: self._shared_limit(kernel, dev)},
                               attr, dev)

    def _set_kernel_attribute(self, attr, value, kernel, dev):
        if kernel not in self._names:
            return _INVALID_HANDLE
        value &= 0xFFFFFFFF
        if attr != _FUNC_MAX_DYNAMIC_SHARED or not 0 <= dev < self.device_count \
                or value + self._static(kernel) > _per_device(self.shared_per_block_optin, dev):
            return _INVALID_VALUE
        with self._lock:
            self.kernel_attributes.append((self._names[kernel], attr, value, dev))
            self._shared_limits[(kernel, dev)] = value
        return 0

    def _record(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, coop, cluster=None,
                dependent=False):
        if not self._current():
            return _INVALID_CONTEXT
        name = self._names.get(f)
        if name is None:
            return _INVALID_HANDLE
        ctx = self._stream_context(stream)  # a CUkernel runs in its stream's context
        device = self._device_of(ctx)
        if shmem > self._shared_limit(f, device):
            # the driver refuses more than the kernel's limit on the device
            return _INVALID_VALUE
        status = self._runs(name, self._fatbins.get(f), device)
        if status:
            return status
        self._use_in(ctx, f)
        launch = Launch(name, (gx, gy, gz), (bx, by, bz), shmem, stream or 0,
                        self._params(name, params), coop, cluster, dependent=dependent,
                        device=device)
        status = self._graph_state.record(stream or 0, launch)
        if status is None:
            with self._lock:
                self.launches.append(launch)
        return status or self.launch_status

    # -- cuLaunchKernelEx ----------------------------------------------------------

    def _launch_ex(self, config, f, params, extra):
        cfg, attrs = _launch_config(config)
        cluster, coop = attrs.get(_ATTR_CLUSTER), bool(attrs.get(_ATTR_COOPERATIVE, (0,))[0])
        if cluster is not None and any(c == 0 or g % c for g, c in zip(cfg.grid, cluster)):
            return _INVALID_CLUSTER_SIZE
        dependent = bool(attrs.get(_ATTR_PROGRAMMATIC, (0,))[0])
        return self._record(f, *cfg.grid, *cfg.block, cfg.sharedmem, cfg.stream,
                            ctypes.cast(params, _vp).value, coop, cluster, dependent)

    # -- stream capture --------------------------------------------------------------

    def _end_capture(self, stream, out):
        status, handle = self._graph_state.end_capture(stream or 0)
        out[0] = handle or None
        return status

    def _exchange_capture_mode(self, mode):
        # The thread's capture mode (global, 0, until exchanged).
        previous = getattr(self._thread, "capture_mode", 0)
        self._log("cuThreadExchangeStreamCaptureMode", mode[0])
        self._thread.capture_mode = mode[0]
        mode[0] = previous
        return 0

    def _unsafe_during_capture(self):
        """True if this thread may not synchronise: it captures in a mode other
        than relaxed, or any thread captures in global mode, unless this thread
        exchanged its mode for relaxed."""
        if getattr(self._thread, "capture_mode", 0) == _RELAXED:
            return False
        me = threading.get_ident()
        with self._graph_state.lock:
            return any((c.thread == me and c.mode != _RELAXED) or c.mode == 0
                       for c in self._graph_state.captures.values())

    def _is_capturing(self, stream, out):
        return self._capture_info(stream, out, *[ctypes.pointer(_vp())] * 4)

    def _capture_info(self, stream, status, ident, graph, deps, count):
        with self._graph_state.lock:  # another thread may be recording into it
            capture = self._graph_state.captures.get(stream or 0)
            last = next(reversed(capture.by_node), 0) if capture else 0
        status[0] = 0 if capture is None else 2 if capture.invalidated else 1
        ident[0] = id(capture) if capture else 0
        graph[0] = capture.graph if capture else None
        # the capture's dependency, the last node recorded; valid until this
        # thread's next call, as the driver's
        self._thread.deps = (_vp * 1)(last)
        deps[0] = ctypes.addressof(self._thread.deps) if capture else None
        count[0] = 1 if last else 0
        return 0

    def _capture_info_v3(self, stream, status, ident, graph, deps, edges, count):
        edges[0] = None  # default edges only
        return self._capture_info(stream, status, ident, graph, deps, count)

    # -- conditional nodes -----------------------------------------------------------

    def _handle_create(self, out, graph, ctx, default, flags):
        status, handle = self._graph_state.create_handle(graph or 0, ctx or 0, default, flags)
        return status or _put(out, handle)

    def _add_node(self, out, graph, deps, edges, count, params):
        p = _ConditionalNodeParamsC.from_address(params)
        if p.type != _NODE_CONDITIONAL:
            return _INVALID_VALUE  # the fake adds conditional nodes only
        status, node, bodies = self._graph_state.add_conditional(
            graph or 0, p.ctx or 0, p.handle, p.kind, p.size, self._device_of(p.ctx))
        if status:
            return status
        p.bodies = bodies  # the driver's out-parameter
        return _put(out, node)

    def _update_dependencies(self, stream, deps, edges, count, flags):
        # The node added last is the capture's dependency already.
        return 0 if self._graph_state.capture_of(stream or 0) else _ILLEGAL_STATE

    def _begin_capture_to_graph(self, stream, graph, deps, edges, count, mode):
        return self._graph_state.begin_capture_to_graph(stream or 0, graph or 0, mode)

    def _graph_nodes(self, graph, nodes, count):
        found = self._graph_state.nodes_of(graph or 0)
        if found is None:
            return _INVALID_VALUE
        if nodes:  # the first count[0] of them, NULL past the last
            for i in range(count[0]):
                nodes[i] = found[i] if i < len(found) else None
            return _put(count, min(count[0], len(found)))
        return _put(count, len(found))

    def _node_type(self, node, out):
        launch = self._graph_state.node_launch(node)
        if launch is None:
            return _INVALID_VALUE
        # CU_GRAPH_NODE_TYPE_KERNEL (the fake records kernel launches) or conditional
        return _put(out, _NODE_CONDITIONAL if isinstance(launch, ConditionalNode) else 0)

    def _node_attribute(self, node, attr, out):
        # cuGraphKernelNodeGetAttribute: what the node was recorded with (a
        # cluster of (0, 0, 0) and not cooperative unless the launch set them).
        launch = self._graph_state.node_launch(node)
        if launch is None:
            return _INVALID_VALUE
        value = (_u32 * 16).from_address(out)
        if attr == _ATTR_COOPERATIVE:
            value[0] = int(launch.cooperative)
        elif attr == _ATTR_CLUSTER:
            value[:3] = launch.cluster or (0, 0, 0)
        else:
            return _INVALID_VALUE
        return 0

    # -- graphs ----------------------------------------------------------------------

    def _instantiate(self, out, graph, flags):
        status, handle = self._graph_state.instantiate(graph)
        if not status:
            out[0] = handle
        return status

    def _graph_launch(self, exe, stream):
        record = self._graph_state.exec_record(exe)
        if record is None:
            return _INVALID_VALUE
        if not self._current():
            return _INVALID_CONTEXT
        record.start()
        # Conditional nodes' bodies run as kernels set their conditions:
        # no kernel runs here, so only the graph's own launches are recorded.
        with self._lock:
            self.graph_launches.append((exe, stream or 0))
            self.launches.extend(dataclasses.replace(launch, stream=stream or 0, graph=exe)
                                 for launch in record.launches.values()
                                 if isinstance(launch, Launch))
        return self.launch_status

    def _exec_update(self, exe, graph, info):
        status, result = self._graph_state.exec_update(exe, graph)
        if status == _INVALID_VALUE:
            return status
        _UpdateInfoC.from_address(info).result = result
        with self._lock:
            self.exec_updates.append((exe, graph, status))
        return status

    def _node_set_params(self, exe, node, params):
        p = _KernelNodeParamsC.from_address(params)
        name = self._names.get(p.func or p.kern)
        if name is None:  # a missing node is the first error
            missing = self._graph_state.exec_node(exe, node) is None
            return _INVALID_VALUE if missing else _INVALID_HANDLE
        # the node keeps its attributes (cooperative, cluster)
        status, launch = self._graph_state.set_node(exe, node, lambda old: Launch(
            name, tuple(p.grid), tuple(p.block), p.sharedmem, 0, self._params(name, p.params),
            old.cooperative, old.cluster))
        if status:
            return status
        with self._lock:
            self.node_updates.append((exe, node, launch))
        return 0

    def live_graphs(self) -> list[int]:
        """Handles of the graphs and executable graphs not destroyed yet."""
        return self._graph_state.live()

    # -- occupancy ---------------------------------------------------------------------

    # A CUfunction from cuKernelGetFunction is the current context's: the
    # queries answer for the current context's device.

    def _query(self, kind, func, block, smem, cluster, result):
        with self._lock:
            self.occupancy_queries.append(OccupancyQuery(
                kind, self._names[func], block, smem, cluster, result, self._device()))

    def _model(self):
        """The current device's occupancy model and multiprocessor count."""
        dev = self._device()
        return _per_device(self.occupancy, dev), _per_device(self.multiprocessors, dev)

    def _max_active_blocks(self, out, func, block, smem):
        if func not in self._names:
            return _INVALID_HANDLE
        out[0] = self._model()[0](block, smem)
        self._query("max_active_blocks", func, block, smem, None, (out[0],))
        return 0

    def _max_potential_block_size(self, grid_out, block_out, func, callback, smem, limit):
        if func not in self._names:
            return _INVALID_HANDLE
        occupancy, multiprocessors = self._model()
        best = max(range(32, (limit or 1024) + 1, 32),
                   key=lambda b: (b * occupancy(b, smem), b))
        grid_out[0] = occupancy(best, smem) * multiprocessors
        block_out[0] = best
        self._query("max_potential_block_size", func, 0, smem, None,
                    (grid_out[0], block_out[0]))
        return 0

    def _max_active_clusters(self, out, func, config):
        if func not in self._names:
            return _INVALID_HANDLE
        cfg, attrs = _launch_config(config)
        cluster = attrs.get(_ATTR_CLUSTER)
        if cluster is None:
            return _INVALID_CLUSTER_SIZE  # no cluster given and none compiled in
        block = math.prod(cfg.block)
        occupancy, multiprocessors = self._model()
        out[0] = occupancy(block, cfg.sharedmem) * multiprocessors // math.prod(cluster)
        self._query("max_active_clusters", func, block, cfg.sharedmem, cluster, (out[0],))
        return 0

    # -- synchronisation and events (docs/events.md) ----------------------------------

    _event_handles = itertools.count(0xE000001)  # fake event handles are process-wide
    # fake event handle -> the RecordingDriver that made it
    _event_owners: dict[int, RecordingDriver] = {}

    @property
    def live_events(self) -> list[int]:
        """The fake events created and not yet destroyed."""
        with self._lock:
            return sorted(self._events)

    def _log(self, *entry):
        status = self.statuses.get(entry[0], 0)
        with self._lock:
            self.calls.append(entry)
        if not self._current():
            # The driver needs a current context (the pessimistic reading
            # for cuEventDestroy, which cudadrv/events.py copes with).
            return _INVALID_CONTEXT
        return status

    def _stream_synchronize(self, stream):
        status = self._log("cuStreamSynchronize", stream or 0)
        if not status and self._unsafe_during_capture():
            return _CAPTURE_UNSUPPORTED
        return status

    def _event_create(self, out, flags):
        status = self._log("cuEventCreate", 0, flags)  # handle 0: none made
        if status:
            return status
        with self._lock:
            handle = next(RecordingDriver._event_handles)
            self._events[handle] = [flags, None]
            RecordingDriver._event_owners[handle] = self
            self.events_created += 1
            self.calls[-1] = ("cuEventCreate", handle, flags)
        return _put(out, handle)

    def _event_call(self, name, event, *more):
        status = self._log(name, event, *more)
        if not status and event not in self._events:
            return _INVALID_HANDLE
        return status

    def _event_record(self, event, stream):
        status = self._event_call("cuEventRecord", event, stream or 0)
        if not status:
            self._events[event][1] = stream or 0
        return status

    def _event_elapsed(self, out, start, end):
        status = self._log("cuEventElapsedTime", start, end)
        if status:
            return status
        for event in (start, end):
            state = self._events.get(event)
            if state is None or state[1] is None or state[0] & _CU_EVENT_DISABLE_TIMING:
                return _INVALID_HANDLE
        return _put(out, self.elapsed_ms)

    def _event_destroy(self, event):
        status = self._log("cuEventDestroy", event)
        if status:
            return status
        with self._lock:
            if self._events.pop(event, None) is None:
                return _INVALID_HANDLE
            self.events_destroyed += 1
        return 0

    def __enter__(self) -> RecordingDriver:
        unused = driver.unused_reason()
        if unused:
            # Compiled code calls no driver function (the simulator runs the
            # kernel in Python on the addresses given: fake ones crash).
            raise RuntimeError("RecordingDriver cannot record launches in this process: %s"
                               % unused)
        if self._active:
            raise RuntimeError("this RecordingDriver is already active: one instance "
                               "is entered once at a time (make another to nest)")
        self._ctx = driver.use_functions(cuEventDestroy_v2=_EVENT_DESTROY, **self._fns)
        self._ctx.__enter__()
        self._active = True
        return self

    def __exit__(self, *exc: Any) -> Any:
        self._active = False
        return self._ctx.__exit__(*exc)


def _destroy_fake_event(event):
    # One function for every RecordingDriver: events keep the destroy
    # function they were created with, which must outlive the fake.
    owner = RecordingDriver._event_owners.get(event)
    if owner is None:
        return _INVALID_HANDLE
    status = owner._event_destroy(event)
    if status == 0:
        RecordingDriver._event_owners.pop(event, None)
    return status


_EVENT_DESTROY = driver.prototype("cuEventDestroy_v2")(_destroy_fake_event)
