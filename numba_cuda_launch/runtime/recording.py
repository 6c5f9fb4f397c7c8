"""A recording fake CUDA driver, for testing launch code without a GPU.

Used as a context manager, :class:`RecordingDriver` takes the place of the
CUDA driver for launches from compiled code and records every image load and
launch: kernel, grid, block, shared memory, stream and the bytes of each
kernel parameter (read with the sizes from :func:`kernel_handle`'s layout)::

    with RecordingDriver() as rec:
        rec.register(numba_cuda_launch.kernel_handle(kernel, argtypes))
        my_cfunc_or_njit(...)
    print(rec.launches)

Synchronisation and event calls are logged in order in ``rec.calls``
(``("cuEventRecord", event, stream)``, ...), ``rec.statuses`` makes one
driver function return an error (``{"cuStreamQuery": 600}``: a busy
stream), and ``rec.events_created``/``events_destroyed``/``live_events``
count the fake events.
"""

import ctypes
import threading
from dataclasses import dataclass

from numba_cuda_launch.errors import error_name
from numba_cuda_launch.runtime import driver
from numba_cuda_launch.runtime.image import param_sizes

_vp = ctypes.c_void_p
_u32 = ctypes.c_uint
_INIT = ctypes.CFUNCTYPE(ctypes.c_int, _u32)
_LOAD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_vp), _vp, _vp, _vp, _u32, _vp, _vp, _u32)
_GETK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_vp), _vp, ctypes.c_char_p)
_UNLOAD = ctypes.CFUNCTYPE(ctypes.c_int, _vp)
_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, _vp, *([_u32] * 7), _vp, ctypes.POINTER(_vp), ctypes.POINTER(_vp))
_GETCTX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_vp))
_SETCTX = ctypes.CFUNCTYPE(ctypes.c_int, _vp)
_DEVGET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int)
_RETAIN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_vp), ctypes.c_int)
_GETFUNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_vp), _vp)
_ERRNAME = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(_vp))
_PRIMARY_CONTEXT = 0xC0
_COOP = ctypes.CFUNCTYPE(ctypes.c_int, _vp, *([_u32] * 7), _vp, ctypes.POINTER(_vp))
_PTRATTR = ctypes.CFUNCTYPE(ctypes.c_int, _vp, ctypes.c_int, ctypes.c_uint64)
_NOARGS = ctypes.CFUNCTYPE(ctypes.c_int)
_ONEPTR = ctypes.CFUNCTYPE(ctypes.c_int, _vp)
_EVCREATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_vp), _u32)
_EVRECORD = ctypes.CFUNCTYPE(ctypes.c_int, _vp, _vp)
_ELAPSED = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_float), _vp, _vp)
_CU_EVENT_DISABLE_TIMING = 0x2


__all__ = ["RecordingDriver", "Launch"]


@dataclass
class Launch:
    """One recorded launch. ``params`` holds the bytes of each kernel
    parameter, or is None when their sizes are unknown in this process (the
    launch code was compiled in another one and loaded from Numba's cache,
    and the kernel was not :meth:`RecordingDriver.register`-ed)."""

    kernel: str
    grid: tuple
    block: tuple
    sharedmem: int
    stream: int
    params: list
    cooperative: bool


class RecordingDriver:
    """Records launches instead of running them.

    ``launch_status``/``load_status`` set the ``CUresult`` launches and image
    loads return (to test error handling). Not for concurrent use with real
    launches: while active, every compiled launch in the process is routed
    here. Recorders nest (the innermost records); ending one while another
    made inside it is active raises RuntimeError and restores the driver
    table as it was before the outer one.
    """

    # Kernel handles outlive one fake: a compiled function keeps the handle
    # it loaded for the rest of the process, as with the real driver.
    _names = {}

    def __init__(self, layouts=None, launch_status=0, load_status=0, has_context=True):
        self.layouts = dict(layouts or {})  # entry name -> [param sizes]
        self.device_memory = []  # [(start, end)]: what cuPointerGetAttribute knows
        self.pointer_queries = []  # addresses asked about
        self.launch_status = launch_status
        self.load_status = load_status
        self.loads = []
        self.unloads = []
        self.launches = []
        self.contexts_made_current = 0
        self.functions = []  # (context, kernel) loaded by cfg.preload
        self._has_context = has_context
        self._thread = threading.local()
        self._lock = threading.Lock()
        self._fns = dict(
            cuInit=_INIT(lambda flags: 0),
            cuLibraryLoadData=_LOAD(self._load),
            cuLibraryGetKernel=_GETK(self._get_kernel),
            cuLibraryUnload=_UNLOAD(self._unload),
            cuLaunchKernel=_LAUNCH(self._launch),
            cuLaunchCooperativeKernel=_COOP(self._launch_coop),
            cuCtxGetCurrent=_GETCTX(self._get_context),
            cuCtxSetCurrent=_SETCTX(self._set_context),
            cuDeviceGet=_DEVGET(self._device_get),
            cuDevicePrimaryCtxRetain=_RETAIN(self._retain),
            cuKernelGetFunction=_GETFUNC(self._get_function),
            cuGetErrorName=_ERRNAME(self._error_name),
            cuPointerGetAttribute=_PTRATTR(self._pointer_attribute),
        )
        self._init_events()
        self._active = False

    def register(self, handle):
        """Know the parameter sizes of a numba_cuda_launch.KernelHandle (not
        needed for launch code compiled in this process, which records its
        kernels' parameter sizes itself)."""
        self.layouts[handle.entry_name] = [p.size for p in handle.params]

    def add_device_memory(self, address, nbytes):
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
        return 1  # CUDA_ERROR_INVALID_VALUE

    def _current(self):
        return getattr(self._thread, "ctx", _PRIMARY_CONTEXT if self._has_context else None)

    def _get_context(self, out):
        out[0] = self._current()
        return 0

    def _set_context(self, ctx):
        self._thread.ctx = ctx
        with self._lock:
            self.contexts_made_current += 1
        return 0

    _error_names = {}  # CUresult -> NUL-terminated name, kept for the process

    def _error_name(self, status, out):
        buf = self._error_names.get(status)
        if buf is None:
            buf = self._error_names[status] = ctypes.create_string_buffer(
                error_name(status).encode())
        out[0] = ctypes.addressof(buf)
        return 0

    def _get_function(self, out, kernel):
        if kernel not in self._names:
            return 400  # CUDA_ERROR_INVALID_HANDLE
        with self._lock:
            self.functions.append((self._current(), self._names[kernel]))
        out[0] = kernel
        return 0

    def _device_get(self, out, ordinal):
        out[0] = ordinal
        return 0

    def _retain(self, out, dev):
        out[0] = _PRIMARY_CONTEXT + dev
        return 0

    def _load(self, out, image, *rest):
        if self.load_status:
            return self.load_status
        with self._lock:
            self.loads.append(image)
            out[0] = 0x1000 + len(self.loads)
        return 0

    def _get_kernel(self, out, lib, name):
        with self._lock:
            handle = 0x100000 + len(RecordingDriver._names)
            self._names[handle] = name.decode()
            out[0] = handle
        return 0

    def _unload(self, lib):
        with self._lock:
            self.unloads.append(lib)
        return 0

    def _record(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, coop):
        if not self._current():
            return 201  # CUDA_ERROR_INVALID_CONTEXT
        name = self._names.get(f)
        if name is None:
            return 400  # CUDA_ERROR_INVALID_HANDLE
        sizes = self.layouts.get(name) or param_sizes(name)
        data = None if sizes is None else \
            [ctypes.string_at(params[i], size) for i, size in enumerate(sizes)]
        with self._lock:
            self.launches.append(Launch(name, (gx, gy, gz), (bx, by, bz), shmem,
                                        stream or 0, data, coop))
        return self.launch_status

    def _launch(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        return self._record(f, gx, gy, gz, bx, by, bz, shmem, stream, params, False)

    def _launch_coop(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params):
        return self._record(f, gx, gy, gz, bx, by, bz, shmem, stream, params, True)

    # Synchronisation and events (numba_cuda_launch.runtime.events).
    #
    # ``calls`` logs them in order as (driver function, handles...);
    # ``statuses`` maps a driver function name to the CUresult it returns
    # instead of succeeding (``{"cuStreamQuery": 600}``: a busy stream).
    # Fake events are handles from a process-wide counter; one recorded on
    # a stream and not destroyed times ``elapsed_ms`` apart from another, as
    # the driver refuses (CUDA_ERROR_INVALID_HANDLE) one never recorded, one
    # made without timing, or one destroyed. An event is destroyed through
    # the destroy function it was created with (runtime/events.py), so
    # ``events_destroyed`` counts destroys even after this fake has ended.

    _event_counter = [0]
    _event_owners = {}  # fake event handle -> the RecordingDriver that made it

    def _init_events(self):
        self.calls = []
        self.statuses = {}
        self.elapsed_ms = 0.25
        self.events_created = 0
        self.events_destroyed = 0
        self._events = {}  # live handle -> [flags, recorded stream or None]
        self._fns.update(
            cuCtxSynchronize=_NOARGS(self._ctx_synchronize),
            cuStreamSynchronize=_ONEPTR(lambda s: self._sync_call("cuStreamSynchronize", s)),
            cuStreamQuery=_ONEPTR(lambda s: self._sync_call("cuStreamQuery", s)),
            cuEventCreate=_EVCREATE(self._event_create),
            cuEventRecord=_EVRECORD(self._event_record),
            cuEventQuery=_ONEPTR(lambda e: self._event_call("cuEventQuery", e)),
            cuEventSynchronize=_ONEPTR(lambda e: self._event_call("cuEventSynchronize", e)),
            cuEventElapsedTime=_ELAPSED(self._event_elapsed),
            cuEventDestroy_v2=_EVENT_DESTROY,
        )

    @property
    def live_events(self):
        """The fake events created and not yet destroyed."""
        with self._lock:
            return sorted(self._events)

    def _log(self, *entry):
        status = self.statuses.get(entry[0], 0)
        with self._lock:
            self.calls.append(entry)
        if not self._current():
            # The driver needs a current context (the pessimistic reading
            # for cuEventDestroy, which runtime/events.py copes with).
            return 201  # CUDA_ERROR_INVALID_CONTEXT
        return status

    def _ctx_synchronize(self):
        return self._log("cuCtxSynchronize")

    def _sync_call(self, name, stream):
        return self._log(name, stream or 0)

    def _event_create(self, out, flags):
        status = self._log("cuEventCreate", 0, flags)  # handle 0: none made
        if status:
            return status
        with self._lock:
            RecordingDriver._event_counter[0] += 1
            handle = 0xE000000 + RecordingDriver._event_counter[0]
            self._events[handle] = [flags, None]
            RecordingDriver._event_owners[handle] = self
            self.events_created += 1
            self.calls[-1] = ("cuEventCreate", handle, flags)
        out[0] = handle
        return 0

    def _event_call(self, name, event, *more):
        status = self._log(name, event, *more)
        if not status and event not in self._events:
            return 400  # CUDA_ERROR_INVALID_HANDLE
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
                return 400  # CUDA_ERROR_INVALID_HANDLE
        out[0] = self.elapsed_ms
        return 0

    def _event_destroy(self, event):
        status = self._log("cuEventDestroy", event)
        if status:
            return status
        with self._lock:
            if self._events.pop(event, None) is None:
                return 400  # CUDA_ERROR_INVALID_HANDLE
            self.events_destroyed += 1
        return 0

    def __enter__(self):
        if self._active:
            raise RuntimeError("this RecordingDriver is already active: one instance "
                               "is entered once at a time (make another to nest)")
        self._ctx = driver.use_functions(**self._fns)
        self._ctx.__enter__()
        self._active = True
        return self

    def __exit__(self, *exc):
        self._active = False
        return self._ctx.__exit__(*exc)


def _destroy_fake_event(event):
    # One function for every RecordingDriver: events keep the destroy
    # function they were created with, which must outlive the fake.
    owner = RecordingDriver._event_owners.get(event)
    if owner is None:
        return 400  # CUDA_ERROR_INVALID_HANDLE
    status = owner._event_destroy(event)
    if status == 0:
        RecordingDriver._event_owners.pop(event, None)
    return status


_EVENT_DESTROY = _ONEPTR(_destroy_fake_event)
