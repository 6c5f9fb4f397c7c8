"""A recording fake CUDA driver, for testing launch code without a GPU.

Used as a context manager, :class:`RecordingDriver` takes the place of the
CUDA driver for launches from compiled code and records every image load and
launch: kernel, grid, block, shared memory, stream and the bytes of each
kernel parameter (read with the sizes from :func:`kernel_handle`'s layout)::

    with RecordingDriver() as rec:
        rec.register(numba_cuda_launch.kernel_handle(kernel, argtypes))
        my_cfunc_or_njit(...)
    print(rec.launches)
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
