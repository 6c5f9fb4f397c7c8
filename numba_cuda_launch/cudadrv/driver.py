"""Where compiled code calls the CUDA driver: one table of function pointers.

Compiled code calls driver functions only through the table, bound by name
(``numba_cuda_launch_driver_table``, an llvmlite symbol), so a machine without
a driver still compiles and its launches return ``CUDA_ERROR_NO_DEVICE``, tests
swap in a recording fake driver (:func:`use_functions`), and ``cache=True``
object code rebinds to this process's table; and the context and device such
a call runs in (a launch's stream's, or the current context; a thread with
none gets device 0's primary context, as with the CUDA runtime API).
docs/architecture.md, docs/devices.md.
"""

import contextlib
import ctypes
import functools
import threading
import weakref

from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NO_DEVICE, \
    CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_INITIALIZED

__all__ = [
    "ENTRY_POINTS",
    "PROTOTYPES",
    "prototype",
    "TABLE_SYMBOL",
    "driver_problem",
    "use_functions",
    "current_functions",
    "call",
    "function_pointer",
    "cold_function",
    "link_runtime",
    "zeroed_global",
    "process_global",
    "return_if_failed",
    "set_unused",
    "unused_reason",
    "emit_ensure_context",
    "emit_with_context",
    "emit_in_context",
    "emit_launch_device",
    "emit_context_device",
]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_vp = ctypes.c_void_p

#: The C types of the prototypes below: (LLVM type for compiled code, ctypes
#: type for Python stand-ins such as the recording fake driver).
C_TYPES = {
    "int": (_i32, ctypes.c_int),
    "unsigned": (_i32, ctypes.c_uint),
    "size_t": (_i64, ctypes.c_uint64),
    "CUdeviceptr": (_i64, ctypes.c_uint64),
    "void*": (_i8p, _vp),
    "const char*": (_i8p, ctypes.c_char_p),
    "void**": (_i8p.as_pointer(), ctypes.POINTER(_vp)),
    "void***": (_i8p.as_pointer().as_pointer(), ctypes.POINTER(_vp)),
    "int*": (_i32.as_pointer(), ctypes.POINTER(ctypes.c_int)),
    "size_t*": (_i64.as_pointer(), ctypes.POINTER(ctypes.c_uint64)),
    "float*": (ir.FloatType().as_pointer(), ctypes.POINTER(ctypes.c_float)),
}

#: The one declaration of the driver functions compiled code may call: name
#: -> C argument types (every one returns a ``CUresult``, an ``int``). Order
#: is the table's layout; append only.
PROTOTYPES = {
    "cuInit": ("unsigned",),
    # (CUlibrary* out, const void* image, CUjit_option*, void**, unsigned,
    #  CUlibraryOption*, void**, unsigned)
    "cuLibraryLoadData": ("void**", "void*", "void*", "void*", "unsigned", "void*", "void*",
                          "unsigned"),
    "cuLibraryGetKernel": ("void**", "void*", "const char*"),
    "cuLibraryUnload": ("void*",),
    # (f, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMem, stream,
    #  void** kernelParams, void** extra)
    "cuLaunchKernel": ("void*",) + ("unsigned",) * 7 + ("void*", "void**", "void**"),
    "cuLaunchCooperativeKernel": ("void*",) + ("unsigned",) * 7 + ("void*", "void**"),
    "cuGetErrorName": ("int", "void**"),
    "cuCtxGetCurrent": ("void**",),
    "cuCtxSetCurrent": ("void*",),
    "cuDeviceGet": ("int*", "int"),
    "cuDevicePrimaryCtxRetain": ("void**", "int"),
    "cuKernelGetFunction": ("void**", "void*"),
    # (void* data, CUpointer_attribute, CUdeviceptr)
    "cuPointerGetAttribute": ("void*", "int", "CUdeviceptr"),
    # Synchronisation and events (cudadrv/events.py). Symbols every CUDA 12
    # and 13 driver exports: cuEventDestroy_v2 is what cuda.h has named
    # cuEventDestroy since CUDA 4.0; cuEventElapsedTime_v2 and
    # cuCtxSynchronize_v2 are newer than CUDA 12.0, so the plain ones.
    "cuCtxSynchronize": (),
    "cuStreamSynchronize": ("void*",),
    "cuStreamQuery": ("void*",),
    "cuEventCreate": ("void**", "unsigned"),
    "cuEventRecord": ("void*", "void*"),  # (CUevent, CUstream)
    "cuEventQuery": ("void*",),
    "cuEventSynchronize": ("void*",),
    "cuEventElapsedTime": ("float*", "void*", "void*"),  # (ms, start, end)
    "cuEventDestroy_v2": ("void*",),
    # Launch attributes (clusters): (const CUlaunchConfig*, f, void** params,
    # void** extra)
    "cuLaunchKernelEx": ("void*", "void*", "void**", "void**"),
    # Stream capture and graphs (versioned names: the ABI of the name the
    # CUDA 12/13 headers map to; the table binds symbols as they are).
    "cuStreamBeginCapture_v2": ("void*", "int"),
    "cuStreamEndCapture": ("void*", "void**"),
    "cuStreamIsCapturing": ("void*", "int*"),
    "cuThreadExchangeStreamCaptureMode": ("int*",),
    # (stream, status*, id*, CUgraph*, const CUgraphNode** deps, size_t* n)
    "cuStreamGetCaptureInfo_v2": ("void*", "int*", "size_t*", "void**", "void***", "size_t*"),
    "cuGraphNodeGetType": ("void*", "int*"),
    "cuGraphInstantiateWithFlags": ("void**", "void*", "size_t"),
    "cuGraphLaunch": ("void*", "void*"),
    # (CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*)
    "cuGraphExecUpdate_v2": ("void*", "void*", "void*"),
    # (CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*)
    "cuGraphExecKernelNodeSetParams_v2": ("void*", "void*", "void*"),
    "cuGraphDestroy": ("void*",),
    "cuGraphExecDestroy": ("void*",),
    # Occupancy: (int* out, CUfunction, int blockSize, size_t dynamicSMem)
    "cuOccupancyMaxActiveBlocksPerMultiprocessor": ("int*", "void*", "int", "size_t"),
    # (int* minGrid, int* block, CUfunction, callback (NULL), size_t smem,
    #  int blockSizeLimit)
    "cuOccupancyMaxPotentialBlockSize": ("int*", "int*", "void*", "void*", "size_t", "int"),
    # (int* out, CUfunction, const CUlaunchConfig*)
    "cuOccupancyMaxActiveClusters": ("int*", "void*", "void*"),
    # (CUgraphNode, CUkernelNodeAttrID, CUkernelNodeAttrValue* out)
    "cuGraphKernelNodeGetAttribute": ("void*", "int", "void*"),
    # CUDA 12.4: (CUkernel / CUfunction, size_t index, size_t* offset,
    # size_t* size); CUDA_ERROR_INVALID_VALUE past the last parameter.
    "cuKernelGetParamInfo": ("void*", "size_t", "size_t*", "size_t*"),
    "cuFuncGetParamInfo": ("void*", "size_t", "size_t*", "size_t*"),
    # Dynamic shared memory above 48 KiB (cudadrv/sharedmem.py):
    # (CUdevice* out); (int* count); (int* out, CUdevice_attribute, CUdevice);
    # (int* out, CUfunction_attribute, CUkernel, CUdevice);
    # (CUfunction_attribute, int value, CUkernel, CUdevice)
    "cuCtxGetDevice": ("int*",),
    "cuDeviceGetCount": ("int*",),
    "cuDeviceGetAttribute": ("int*", "int", "int"),
    "cuKernelGetAttribute": ("int*", "int", "void*", "int"),
    "cuKernelSetAttribute": ("int", "int", "void*", "int"),
    # Conditional graph nodes (cudadrv/conditional.py), CUDA 12.3+ ABIs:
    # (int* version)
    "cuDriverGetVersion": ("int*",),
    # (stream, status*, id*, CUgraph*, const CUgraphNode** deps,
    #  const CUgraphEdgeData** edges, size_t* n)
    "cuStreamGetCaptureInfo_v3": ("void*", "int*", "size_t*", "void**", "void***", "void**",
                                  "size_t*"),
    # (CUgraphConditionalHandle* out, CUgraph, CUcontext, unsigned default,
    #  unsigned flags)
    "cuGraphConditionalHandleCreate": ("size_t*", "void*", "void*", "unsigned", "unsigned"),
    # (CUgraphNode* out, CUgraph, const CUgraphNode* deps, const
    #  CUgraphEdgeData* edges, size_t n, CUgraphNodeParams*)
    "cuGraphAddNode_v2": ("void**", "void*", "void**", "void*", "size_t", "void*"),
    # (stream, CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n,
    #  unsigned flags)
    "cuStreamUpdateCaptureDependencies_v2": ("void*", "void**", "void*", "size_t", "unsigned"),
    # (stream, CUgraph, const CUgraphNode* deps, const CUgraphEdgeData*
    #  edges, size_t n, CUstreamCaptureMode)
    "cuStreamBeginCaptureToGraph": ("void*", "void*", "void**", "void*", "size_t", "int"),
    # The context of a stream's work (a CUkernel launched on a stream runs
    # in the stream's context): (stream, CUcontext* out)
    "cuStreamGetCtx": ("void*", "void**"),
    # A graph's nodes (CUgraph, CUgraphNode* nodes or NULL, size_t* n): with
    # NULL, n receives their number; and one node's removal (CUgraphNode).
    "cuGraphGetNodes": ("void*", "void**", "size_t*"),
    "cuGraphDestroyNode": ("void*",),
}

#: name -> (LLVM return type, LLVM argument types), from :data:`PROTOTYPES`.
ENTRY_POINTS = {name: (_i32, tuple(C_TYPES[t][0] for t in args))
                for name, args in PROTOTYPES.items()}


def prototype(name):
    """The ctypes function type of entry point *name* (``CFUNCTYPE``), from
    :data:`PROTOTYPES`: what a Python stand-in for it is wrapped in."""
    return ctypes.CFUNCTYPE(ctypes.c_int, *(C_TYPES[t][1] for t in PROTOTYPES[name]))


TABLE_SYMBOL = "numba_cuda_launch_driver_table"


class _Table(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in ENTRY_POINTS]


_TABLE = _Table()
_lock = threading.Lock()
_problem = None


# Stubs for any entry point: the C calling convention lets a function that
# takes no arguments ignore those it is called with.
_NO_DRIVER = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: CUDA_ERROR_NO_DEVICE)
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


def driver_problem() -> str | None:
    """Why the real driver is not bound, or None when it is."""
    return _problem


_unused = None  # why compiled code in this process calls no driver function


def set_unused(reason):
    """Note that compiled code in this process calls no driver function,
    and why (the launch backend of the process says so)."""
    global _unused
    _unused = reason


def unused_reason():
    """Why compiled code in this process calls no driver function, or None."""
    return _unused


def current_functions():
    """The addresses now in the table, by entry point name."""
    return {name: getattr(_TABLE, name) for name in ENTRY_POINTS}


# [(token, table before it, its functions)], innermost last; holding the
# functions keeps them alive while the table points to them.
_installed = []


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
            setattr(_TABLE, name, fn if isinstance(fn, int) else ctypes.cast(fn, _vp).value)
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
            del _installed[i:]
        if out_of_order:
            raise RuntimeError(
                "driver functions replaced (a RecordingDriver entered) inside this one "
                "were still active when it ended: end the innermost first. The driver "
                "table is restored to what it was before this one.")


_INDEX = {name: i for i, name in enumerate(ENTRY_POINTS)}
_FNTYPES = {name: ir.FunctionType(restype, argtypes).as_pointer()
            for name, (restype, argtypes) in ENTRY_POINTS.items()}
_TABLE_TYPE = ir.ArrayType(_i8p, len(ENTRY_POINTS))


def process_global(module, name, ty):
    """*module*'s declaration (made on first use) of process-wide state
    *name* of LLVM type *ty*: memory this process bound to the llvmlite
    symbol *name* (``llvm_binding.add_symbol``), as the driver table is, so
    cached and AOT object code find it by name too."""
    gv = module.globals.get(name)
    if gv is None:
        gv = ir.GlobalVariable(module, ty, name)
        gv.linkage = "external"
    return gv


def function_pointer(builder, name):
    """Emit a load of entry point *name*'s address from the table (an
    ``i8*``): for code that must call later the very function bound now."""
    table = process_global(builder.module, TABLE_SYMBOL, _TABLE_TYPE)
    return builder.load(builder.gep(table, [ir.Constant(_i32, 0),
                                            ir.Constant(_i32, _INDEX[name])], inbounds=True))


def call(builder, name, args):
    """Emit a call of driver entry point *name* through the table."""
    # process_global and function_pointer written out: lowering calls this
    # for every driver call it emits (tests/test_launch_site_trace.py)
    module = builder.module
    table = module.globals.get(TABLE_SYMBOL)
    if table is None:
        table = ir.GlobalVariable(module, _TABLE_TYPE, TABLE_SYMBOL)
        table.linkage = "external"
    address = builder.load(builder.gep(table, [ir.Constant(_i32, 0),
                                               ir.Constant(_i32, _INDEX[name])], inbounds=True))
    return builder.call(builder.bitcast(address, _FNTYPES[name]), args)


def zeroed_global(module, name, ty, align):
    """The module's internal global *name* of LLVM type *ty*, zero-initialised
    (made on first use): per-process state of emitted code (a loaded kernel,
    a raised limit)."""
    gv = module.globals.get(name)
    if gv is None:
        gv = cgutils.add_global_variable(module, ty, name)
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ty, None)
        gv.align = align
    return gv


# The package's runtime: the bodies of the cold functions below, emitted once
# per process as LLVM IR text that every library calling them takes in
# (link_runtime), as hidden ``weak_odr`` functions (kept when linked in before
# their callers, merged where two libraries meet, never exported): each piece
# of compiled code (and its cached or AOT object code) carries them, and
# lowering a launch emits a declaration only.
_COLD = {}  # name -> (argument types, define(fn, builder))
_runtime_ir = []  # [the runtime's LLVM IR text], once made
_linked = weakref.WeakSet()  # code libraries the runtime is linked into


def cold_function(name, argtypes, optimised=False):
    """Decorator: ``define(fn, builder)`` emits the body of the never-inlined
    ``i32 name(argtypes...)`` for rarely run driver work (first loads,
    context binding), part of the package's runtime. The decorated name
    becomes ``get(module)``: its declaration in *module*; code lowered in a
    context that calls it must take the runtime in with :func:`link_runtime`.
    Not *optimised* (LLVM's ``optnone``), unless it is on a path run often:
    every library that links the runtime would otherwise run LLVM's O3 over
    it again (half a ``jax_kernel`` handler's module)."""
    def decorate(define):
        _COLD[name] = (tuple(argtypes), define, optimised)

        @functools.wraps(define)
        def get(module):
            fn = module.globals.get(name)
            if fn is None:
                fn = ir.Function(module, ir.FunctionType(_i32, argtypes), name)
            return fn
        return get
    return decorate


def link_runtime(context):
    """Give the code being lowered in *context* the package's runtime (once
    per library): what calls a :func:`cold_function` needs it."""
    library = context.active_code_library
    if library in _linked:
        return
    if not _runtime_ir:
        module = context.create_module("numba_cuda_launch_runtime")
        for name, (argtypes, define, optimised) in _COLD.items():
            fn = module.globals.get(name) or \
                ir.Function(module, ir.FunctionType(_i32, argtypes), name)
            fn.linkage = "weak_odr"
            fn.attributes.add("noinline")
            fn.attributes.add("cold")
            if not optimised:
                fn.attributes.add("optnone")
            define(fn, ir.IRBuilder(fn.append_basic_block("entry")))
        _runtime_ir.append(str(module).replace("define weak_odr ", "define weak_odr hidden "))
    library.add_llvm_module(llvm_binding.parse_assembly(_runtime_ir[0]))
    _linked.add(library)


def return_if_failed(builder, status, cleanup=None):
    """Emit: if *status* is not 0, run *cleanup* (emits code) and return it."""
    failed = builder.icmp_signed("!=", status, ir.Constant(_i32, 0))
    with builder.if_then(failed, likely=False):
        if cleanup is not None:
            cleanup()
        builder.ret(status)


# -- the context a call runs in ------------------------------------------------------
# A CUkernel launches in the context of its stream, or for the default
# streams in whatever context is current on the calling thread: the primary
# context numba-cuda and JAX use, or any other. A thread with no current
# context (a fresh thread of a C caller's) gets device 0's primary context,
# as with the CUDA runtime API.

@cold_function("numba_cuda_launch_ensure_context", ())
def _ensure_context(fn, builder):
    ctx = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
    return_if_failed(builder, call(builder, "cuCtxGetCurrent", [ctx]))
    with builder.if_then(cgutils.is_not_null(builder, builder.load(ctx)), likely=True):
        builder.ret(ir.Constant(_i32, 0))
    dev = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    return_if_failed(builder, call(builder, "cuDeviceGet",
                                                 [dev, ir.Constant(_i32, 0)]))
    return_if_failed(builder, call(
        builder, "cuDevicePrimaryCtxRetain", [ctx, builder.load(dev)]))
    builder.ret(call(builder, "cuCtxSetCurrent", [builder.load(ctx)]))


def emit_ensure_context(builder):
    """Emit making device 0's primary context current for a thread with none
    (a thread that has one keeps it); returns the status (0 on success)."""
    return builder.call(_ensure_context(builder.module), [])


def emit_with_context(builder, emit_call):
    """Emit binding a context as :func:`emit_ensure_context` does, then
    *emit_call()* (a driver call returning its ``CUresult``) if that
    succeeded; returns the status. For calls whose answer with no context
    current must never be relied on."""
    status = cgutils.alloca_once_value(builder, emit_ensure_context(builder))
    with builder.if_then(builder.icmp_signed("==", builder.load(status), ir.Constant(_i32, 0)),
                         likely=True):
        builder.store(emit_call(), status)
    return builder.load(status)


def emit_in_context(builder, emit_call):
    """Emit *emit_call()* (emits a driver call, returns its ``CUresult``)
    once, in a block run again when it fails for want of a context
    (``CUDA_ERROR_INVALID_CONTEXT``, or ``CUDA_ERROR_NOT_INITIALIZED`` in a
    process that never initialised the driver) after initialising the driver
    and binding a context as :func:`emit_ensure_context` does. Returns the
    status. The common case costs one compare: no context query first."""
    status = cgutils.alloca_once(builder, _i32)
    retried = cgutils.alloca_once_value(builder, cgutils.false_bit)
    attempt = builder.append_basic_block("ncl.in_context")
    done = builder.append_basic_block("ncl.in_context.done")
    builder.branch(attempt)
    builder.position_at_end(attempt)
    first = emit_call()
    builder.store(first, status)
    retry = builder.and_(builder.not_(builder.load(retried)), builder.or_(
        builder.icmp_signed("==", first, ir.Constant(_i32, CUDA_ERROR_INVALID_CONTEXT)),
        builder.icmp_signed("==", first, ir.Constant(_i32, CUDA_ERROR_NOT_INITIALIZED))))
    with builder.if_then(retry, likely=False):
        builder.store(cgutils.true_bit, retried)
        bound = cgutils.alloca_once_value(builder, call(builder, "cuInit", [ir.Constant(_i32, 0)]))
        with builder.if_then(builder.icmp_signed("==", builder.load(bound), ir.Constant(_i32, 0))):
            builder.store(emit_ensure_context(builder), bound)
        # bound: try again; not: the first status stands
        builder.cbranch(builder.icmp_signed("==", builder.load(bound), ir.Constant(_i32, 0)),
                        attempt, done)
    builder.branch(done)
    builder.position_at_end(done)
    return builder.load(status)


#: CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: with 0, the streams whose work
#: runs in the current context
_LAST_DEFAULT_STREAM = 2


def emit_context_device(builder, ctx):
    """``(status, device)`` (``i32``): the device of context *ctx* (an
    ``i8*``), asked with *ctx* current (``cuCtxGetDevice``) and the calling
    thread's context made current again when it was another."""
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    device = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    current = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
    builder.store(call(builder, "cuCtxGetCurrent", [current]), status)
    other = builder.and_(builder.icmp_signed("==", builder.load(status), ir.Constant(_i32, 0)),
                         builder.icmp_unsigned("!=", builder.load(current), ctx))
    with builder.if_then(other, likely=False):
        builder.store(call(builder, "cuCtxSetCurrent", [ctx]), status)
    with builder.if_then(builder.icmp_signed("==", builder.load(status), ir.Constant(_i32, 0)),
                         likely=True):
        builder.store(call(builder, "cuCtxGetDevice", [device]), status)
    with builder.if_then(other, likely=False):
        call(builder, "cuCtxSetCurrent", [builder.load(current)])
    return builder.load(status), builder.load(device)


def emit_launch_device(builder, stream):
    """``(status, device)`` (``i32``): the device a launch on *stream* (an
    ``i8*``) runs on. A ``CUkernel`` runs in its stream's context, the
    current one for the default streams (0, 1, 2): ``cuStreamGetCtx`` and
    that context's device for the others (a stream being recorded may be
    asked: ``cuStreamGetDevice`` would invalidate its recording, driver
    580), ``cuCtxGetDevice`` for these."""
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    device = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    own = builder.icmp_unsigned(">", builder.ptrtoint(stream, ir.IntType(64)),
                                ir.Constant(ir.IntType(64), _LAST_DEFAULT_STREAM))
    with builder.if_else(own) as (of_stream, default):
        with of_stream:
            ctx = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
            builder.store(call(builder, "cuStreamGetCtx", [stream, ctx]), status)
            with builder.if_then(builder.icmp_signed("==", builder.load(status),
                                                     ir.Constant(_i32, 0))):
                asked, dev = emit_context_device(builder, builder.load(ctx))
                builder.store(asked, status)
                builder.store(dev, device)
        with default:
            builder.store(call(builder, "cuCtxGetDevice", [device]), status)
    return builder.load(status), builder.load(device)
