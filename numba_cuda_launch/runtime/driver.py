"""Where compiled code calls the CUDA driver.

Compiled launch code never names a driver function directly: it calls through
one table of function pointers, itself bound by name
(``numba_cuda_launch_driver_table``, registered with llvmlite's symbol
table). So

* a machine without a driver still compiles and links, and a launch there
  returns ``CUDA_ERROR_NO_DEVICE`` instead of jumping to a missing symbol;
* tests swap in a recording fake driver with :func:`use_functions`;
* object code cached by ``cache=True`` rebinds to this process's table.

One indirect call through a table costs a load from L1; a launch costs
microseconds.
"""

import contextlib
import ctypes
import threading

from llvmlite import binding as llvm_binding
from llvmlite import ir

__all__ = [
    "ENTRY_POINTS",
    "TABLE_SYMBOL",
    "driver_problem",
    "use_functions",
    "current_functions",
    "call",
    "function_pointer",
    "cold_function",
    "return_if_failed",
]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)

#: The driver functions compiled code may call: name -> (LLVM return type,
#: LLVM argument types). Order is the table's layout; append only.
ENTRY_POINTS = {
    "cuInit": (_i32, (_i32,)),
    # (CUlibrary* out, const void* image, CUjit_option*, void**, unsigned,
    #  CUlibraryOption*, void**, unsigned)
    "cuLibraryLoadData": (
        _i32,
        (_i8p.as_pointer(), _i8p, _i8p, _i8p, _i32, _i8p, _i8p, _i32),
    ),
    "cuLibraryGetKernel": (_i32, (_i8p.as_pointer(), _i8p, _i8p)),
    "cuLibraryUnload": (_i32, (_i8p,)),
    # (f, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMem, stream,
    #  void** kernelParams, void** extra)
    "cuLaunchKernel": (
        _i32,
        (_i8p,) + (_i32,) * 7 + (_i8p, _i8p.as_pointer(), _i8p.as_pointer()),
    ),
    "cuLaunchCooperativeKernel": (
        _i32,
        (_i8p,) + (_i32,) * 7 + (_i8p, _i8p.as_pointer()),
    ),
    "cuGetErrorName": (_i32, (_i32, _i8p.as_pointer())),
    "cuCtxGetCurrent": (_i32, (_i8p.as_pointer(),)),
    "cuCtxSetCurrent": (_i32, (_i8p,)),
    "cuDeviceGet": (_i32, (_i32.as_pointer(), _i32)),
    "cuDevicePrimaryCtxRetain": (_i32, (_i8p.as_pointer(), _i32)),
    "cuKernelGetFunction": (_i32, (_i8p.as_pointer(), _i8p)),
    # (void* data, CUpointer_attribute, CUdeviceptr)
    "cuPointerGetAttribute": (_i32, (_i8p, _i32, ir.IntType(64))),
    # Synchronisation and events (runtime/events.py). Symbols every CUDA 12
    # and 13 driver exports: cuEventDestroy_v2 is what cuda.h has named
    # cuEventDestroy since CUDA 4.0; cuEventElapsedTime_v2 and
    # cuCtxSynchronize_v2 are newer than CUDA 12.0, so the plain ones.
    "cuCtxSynchronize": (_i32, ()),
    "cuStreamSynchronize": (_i32, (_i8p,)),
    "cuStreamQuery": (_i32, (_i8p,)),
    # (CUevent* out, unsigned flags)
    "cuEventCreate": (_i32, (_i8p.as_pointer(), _i32)),
    # (CUevent, CUstream)
    "cuEventRecord": (_i32, (_i8p, _i8p)),
    "cuEventQuery": (_i32, (_i8p,)),
    "cuEventSynchronize": (_i32, (_i8p,)),
    # (float* ms, CUevent start, CUevent end)
    "cuEventElapsedTime": (_i32, (ir.FloatType().as_pointer(), _i8p, _i8p)),
    "cuEventDestroy_v2": (_i32, (_i8p,)),
    # Launch attributes (clusters): (const CUlaunchConfig*, f, void** params,
    # void** extra)
    "cuLaunchKernelEx": (_i32, (_i8p, _i8p, _i8p.as_pointer(), _i8p.as_pointer())),
    # Stream capture and graphs (versioned names: the ABI of the name the
    # CUDA 12/13 headers map to; the table binds symbols as they are).
    "cuStreamBeginCapture_v2": (_i32, (_i8p, _i32)),
    "cuStreamEndCapture": (_i32, (_i8p, _i8p.as_pointer())),
    "cuStreamIsCapturing": (_i32, (_i8p, _i32.as_pointer())),
    "cuThreadExchangeStreamCaptureMode": (_i32, (_i32.as_pointer(),)),
    # (stream, status*, id*, CUgraph*, const CUgraphNode** deps, size_t* n)
    "cuStreamGetCaptureInfo_v2": (_i32, (_i8p, _i32.as_pointer(), _i64.as_pointer(),
                                         _i8p.as_pointer(), _i8p.as_pointer().as_pointer(),
                                         _i64.as_pointer())),
    "cuGraphNodeGetType": (_i32, (_i8p, _i32.as_pointer())),
    "cuGraphInstantiateWithFlags": (_i32, (_i8p.as_pointer(), _i8p, _i64)),
    "cuGraphLaunch": (_i32, (_i8p, _i8p)),
    # (CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*)
    "cuGraphExecUpdate_v2": (_i32, (_i8p, _i8p, _i8p)),
    # (CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*)
    "cuGraphExecKernelNodeSetParams_v2": (_i32, (_i8p, _i8p, _i8p)),
    "cuGraphDestroy": (_i32, (_i8p,)),
    "cuGraphExecDestroy": (_i32, (_i8p,)),
    # Occupancy: (int* out, CUfunction, int blockSize, size_t dynamicSMem)
    "cuOccupancyMaxActiveBlocksPerMultiprocessor": (
        _i32, (_i32.as_pointer(), _i8p, _i32, _i64)),
    # (int* minGrid, int* block, CUfunction, callback (NULL), size_t smem,
    #  int blockSizeLimit)
    "cuOccupancyMaxPotentialBlockSize": (
        _i32, (_i32.as_pointer(), _i32.as_pointer(), _i8p, _i8p, _i64, _i32)),
    # (int* out, CUfunction, const CUlaunchConfig*)
    "cuOccupancyMaxActiveClusters": (_i32, (_i32.as_pointer(), _i8p, _i8p)),
}

TABLE_SYMBOL = "numba_cuda_launch_driver_table"

CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_CONTEXT = 201


class _Table(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in ENTRY_POINTS]


_TABLE = _Table()
_lock = threading.Lock()
_keepalive = {}
_problem = None


def _no_driver_stub():
    # Any entry point may be called with any arguments: the C calling
    # convention lets a function that takes none ignore them.
    return CUDA_ERROR_NO_DEVICE


_NO_DRIVER = ctypes.CFUNCTYPE(ctypes.c_int)(_no_driver_stub)
CUDA_ERROR_NOT_FOUND = 500
_MISSING = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: CUDA_ERROR_NOT_FOUND)
#: Entry points a driver may lack (added after CUDA 12.0): bound to a stub
#: returning CUDA_ERROR_NOT_FOUND there, so that launches still work.
OPTIONAL = frozenset(list(ENTRY_POINTS)[list(ENTRY_POINTS).index("cuLaunchKernelEx"):])


def _symbol(lib, name):
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        if name not in OPTIONAL:
            raise
        return ctypes.cast(_MISSING, ctypes.c_void_p).value


def _bind_libcuda():
    """Fill the table from libcuda, or with stubs when it cannot be loaded."""
    global _problem
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        addrs = {name: _symbol(lib, name) for name in ENTRY_POINTS}
    except (OSError, AttributeError) as exc:
        _problem = "the CUDA driver (libcuda.so.1) could not be loaded: %s" % exc
        stub = ctypes.cast(_NO_DRIVER, ctypes.c_void_p).value
        addrs = dict.fromkeys(ENTRY_POINTS, stub)
    for name, addr in addrs.items():
        setattr(_TABLE, name, addr)


_bind_libcuda()
llvm_binding.add_symbol(TABLE_SYMBOL, ctypes.addressof(_TABLE))


def driver_problem():
    """Why the real driver is not bound, or None when it is."""
    return _problem


def current_functions():
    """The addresses now in the table, by entry point name."""
    return {name: getattr(_TABLE, name) for name in ENTRY_POINTS}


_installed = []  # [token, table before it, its functions]: innermost last


@contextlib.contextmanager
def use_functions(**functions):
    """Temporarily route compiled launches to other driver functions.

    Each keyword names an entry point of :data:`ENTRY_POINTS`; its value is a
    ctypes function pointer or an address with the driver function's C
    signature. Used by tests to record launches without a GPU. Not
    thread-safe with launches running concurrently.

    Uses nest: the innermost must end first. One that ends while others
    made inside it are still active restores the table to what it was
    before it (the inner ones are ended with it, so the table never keeps
    a function that is no longer alive) and raises RuntimeError.
    """
    unknown = set(functions) - set(ENTRY_POINTS)
    if unknown:
        raise KeyError("not driver entry points: %s" % sorted(unknown))
    token = object()
    with _lock:
        _installed.append((token, current_functions(), functions))
        for name, fn in functions.items():
            if not isinstance(fn, int):
                _keepalive[id(fn)] = fn
                fn = ctypes.cast(fn, ctypes.c_void_p).value
            setattr(_TABLE, name, fn)
    try:
        yield
    finally:
        with _lock:
            tokens = [entry[0] for entry in _installed]
            if token not in tokens:
                # Already ended by an outer use that ended out of order.
                return
            i = tokens.index(token)
            out_of_order = i != len(_installed) - 1
            for name, addr in _installed[i][1].items():
                setattr(_TABLE, name, addr)
            for _, _, fns in _installed[i:]:
                for fn in fns.values():
                    _keepalive.pop(id(fn), None)
            del _installed[i:]
        if out_of_order:
            raise RuntimeError(
                "driver functions replaced (a RecordingDriver entered) inside this one "
                "were still active when it ended: end the innermost first. The driver "
                "table is restored to what it was before this one.")


def _table_global(module):
    gv = module.globals.get(TABLE_SYMBOL)
    if gv is None:
        gv = ir.GlobalVariable(
            module, ir.ArrayType(_i8p, len(ENTRY_POINTS)), TABLE_SYMBOL
        )
        gv.linkage = "external"
    return gv


def call(builder, name, args):
    """Emit a call of driver entry point *name* through the table."""
    restype, argtypes = ENTRY_POINTS[name]
    index = list(ENTRY_POINTS).index(name)
    slot = builder.gep(
        _table_global(builder.module),
        [ir.Constant(_i32, 0), ir.Constant(_i32, index)],
        inbounds=True,
    )
    fnty = ir.FunctionType(restype, argtypes)
    fnptr = builder.bitcast(builder.load(slot), fnty.as_pointer())
    return builder.call(fnptr, args)


def function_pointer(builder, name):
    """Emit a load of entry point *name*'s address from the table (an
    ``i8*``): for code that must call later the very function bound now."""
    index = list(ENTRY_POINTS).index(name)
    slot = builder.gep(
        _table_global(builder.module),
        [ir.Constant(_i32, 0), ir.Constant(_i32, index)],
        inbounds=True,
    )
    return builder.load(slot)


def cold_function(module, name, argtypes):
    """A new internal, never-inlined ``i32 name(argtypes...)`` for rarely
    run driver work (first loads, context binding); returns it and a builder
    at its entry."""
    fn = ir.Function(module, ir.FunctionType(_i32, argtypes), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def return_if_failed(builder, status, cleanup=None):
    """Emit: if *status* is not 0, run *cleanup* (emits code) and return it."""
    failed = builder.icmp_signed("!=", status, ir.Constant(_i32, 0))
    with builder.if_then(failed, likely=False):
        if cleanup is not None:
            cleanup()
        builder.ret(status)
