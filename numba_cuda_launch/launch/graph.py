"""CUDA graphs from nopython code: record launches by stream capture,
replay them, change their arguments. Public as
:mod:`numba_cuda_launch.graphs`.

A recorded loop, in an ``@njit`` (or ``@cfunc``) function::

    from numba_cuda_launch import graphs

    graphs.begin_capture(stream)            # launches on stream are recorded
    scale[g, b, stream](x, 2.0)
    node = graphs.last_launch(stream)       # that launch, to update later
    shift[g, b, stream](x, y)
    graph = graphs.end_capture(stream)      # a Graph
    exe = graph.instantiate()               # a GraphExec
    for i in range(steps):
        exe.update_launch(node, scale[g, b], x, factors[i])  # new arguments
        exe.launch(stream)                  # replays both launches
    exe.destroy()
    graph.destroy()

``Graph``, ``GraphExec`` and ``KernelNode`` are nopython types holding the
driver's handles (``CUgraph``, ``CUgraphExec``, ``CUgraphNode``); they can
be returned to Python, where they are objects with the same methods (each
calls compiled code), and passed back in. Nothing is reference-counted:
``destroy()`` releases a graph or an executable graph, once. A
``KernelNode`` belongs to its graph: keep the graph until the last
``update_launch`` of its nodes (an executable graph does not need its
graph otherwise).

Every operation that can fail has a raising form, which raises
:class:`~numba_cuda_launch.CudaGraphError` (in a ``@cfunc`` an exception
is reported as unraisable), and a ``_status`` form returning the
``CUresult`` (0 on success) first: ``status, graph =
graphs.end_capture_status(stream)``. ``destroy()`` returns the
``CUresult`` and never raises.

Captures use the driver's thread-local mode by default (``mode=`` takes
:data:`CAPTURE_GLOBAL`, :data:`CAPTURE_THREAD_LOCAL` or
:data:`CAPTURE_RELAXED`): other threads keep working and may capture on
their own streams. Kernel images load on a function's first launch; drivers
of CUDA 12.3 and later allow that during a capture, older ones refuse it
(``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``): there, call
``cfg.preload(args...)`` for each kernel before ``begin_capture``. A
raising launch or operation that fails during a capture leaves the stream
capturing: ``graphs.abort_capture(stream)`` ends the capture and drops
what it recorded.
"""

import functools

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.core.typing.templates import AttributeTemplate, bound_function, infer_getattr, signature
from numba.extending import (NativeValue, box, intrinsic, lower_builtin, make_attribute_wrapper,
                             models, overload_method, register_model, typeof_impl, unbox)

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.errors import CudaGraphError, KernelTypingError, NopythonUsageError
from numba_cuda_launch.launch.backends import call_jitted
from numba_cuda_launch.launch.call import emit_launch
from numba_cuda_launch.launch.launchconfig import LaunchConfig
from numba_cuda_launch.launch.selection import select_kernel
from numba_cuda_launch.launch.stream import is_stream_type, stream_handle_value
from numba_cuda_launch.runtime import graph as _rt
from numba_cuda_launch.launch.pointer import is_null as _is_null

__all__ = [
    "Graph", "GraphExec", "KernelNode",
    "CAPTURE_GLOBAL", "CAPTURE_THREAD_LOCAL", "CAPTURE_RELAXED",
    "begin_capture", "begin_capture_status", "end_capture", "end_capture_status",
    "last_launch", "last_launch_status", "abort_capture",
]

#: Capture modes (the driver's ``CUstreamCaptureMode``).
CAPTURE_GLOBAL = _rt.CAPTURE_GLOBAL
CAPTURE_THREAD_LOCAL = _rt.CAPTURE_THREAD_LOCAL
CAPTURE_RELAXED = _rt.CAPTURE_RELAXED

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)


# -- Python objects ---------------------------------------------------------------

class _Handle:
    """A driver handle as a Python object; ``handle`` is the integer (0 once
    destroyed from Python)."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = int(handle)

    def __repr__(self):
        return "<%s %s>" % (type(self).__name__,
                            hex(self.handle) if self.handle else "(none)")

    def __eq__(self, other):
        return type(other) is type(self) and other.handle == self.handle

    def __hash__(self):
        return hash((type(self).__name__, self.handle))


class Graph(_Handle):
    """A recorded CUDA graph (``CUgraph``), from :func:`end_capture`."""

    __slots__ = ()

    def instantiate(self):
        """The executable graph (:class:`GraphExec`); raises
        :class:`CudaGraphError`."""
        return _py_instantiate(self)

    def destroy(self):
        """Release the graph (its :class:`KernelNode` handles with it);
        returns the ``CUresult``. Destroying twice from Python is harmless."""
        status = _py_graph_destroy(self) if self.handle else 0
        self.handle = 0
        return status


class GraphExec(_Handle):
    """An executable CUDA graph (``CUgraphExec``), from
    :meth:`Graph.instantiate`."""

    __slots__ = ()

    def launch(self, stream):
        """Replay the graph on *stream* (a numba-cuda stream or a raw
        ``CUstream`` integer); raises :class:`CudaGraphError`."""
        _py_launch(self, stream)

    def update(self, graph):
        """Take the parameters of *graph*, recorded with the same topology
        (``cuGraphExecUpdate``); raises :class:`CudaGraphError`."""
        _py_update(self, graph)

    def destroy(self):
        """Release the executable graph; returns the ``CUresult``."""
        status = _py_exec_destroy(self) if self.handle else 0
        self.handle = 0
        return status


class KernelNode(_Handle):
    """One recorded launch (a kernel ``CUgraphNode``), from
    :func:`last_launch`; valid while its graph is."""

    __slots__ = ()


# -- nopython types -------------------------------------------------------------

class GraphType(types.Type):
    def __init__(self):
        super().__init__(name="Graph")


class GraphExecType(types.Type):
    def __init__(self):
        super().__init__(name="GraphExec")


class KernelNodeType(types.Type):
    def __init__(self):
        super().__init__(name="KernelNode")


graph_type, graph_exec_type, kernel_node_type = GraphType(), GraphExecType(), KernelNodeType()
_PY_CLASSES = {graph_type: Graph, graph_exec_type: GraphExec, kernel_node_type: KernelNode}

for _ty, _cls in _PY_CLASSES.items():
    @register_model(type(_ty))
    class _HandleModel(models.StructModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, [("handle", types.voidptr)])

    make_attribute_wrapper(type(_ty), "handle", "handle")
    typeof_impl.register(_cls)(lambda val, c, _t=_ty: _t)


def _make(context, builder, ty, handle):
    value = cgutils.create_struct_proxy(ty)(context, builder)
    value.handle = handle
    return value._getvalue()


def _handle(context, builder, ty, value):
    return cgutils.create_struct_proxy(ty)(context, builder, value=value).handle


for _ty in _PY_CLASSES:
    @box(type(_ty))
    def _box_handle(typ, val, c):
        cls = c.pyapi.unserialize(c.pyapi.serialize_object(_PY_CLASSES[typ]))
        handle = _handle(c.context, c.builder, typ, val)
        as_int = c.pyapi.long_from_ulonglong(c.builder.ptrtoint(handle, ir.IntType(64)))
        obj = c.pyapi.call_function_objargs(cls, [as_int])
        c.pyapi.decref(as_int)
        c.pyapi.decref(cls)
        return obj

    @unbox(type(_ty))
    def _unbox_handle(typ, obj, c):
        attr = c.pyapi.object_getattr_string(obj, "handle")
        out = cgutils.alloca_once_value(c.builder, ir.Constant(_i8p, None))
        with c.builder.if_then(cgutils.is_not_null(c.builder, attr), likely=True):
            c.builder.store(c.pyapi.long_as_voidptr(attr), out)
            c.pyapi.decref(attr)
        value = _make(c.context, c.builder, typ, c.builder.load(out))
        return NativeValue(value, is_error=c.pyapi.c_api_error())


# -- driver calls (status forms) ---------------------------------------------------

#: Every graph entry point's refusal under the simulator, whose launches
#: run at once in Python: nothing could be recorded or replayed.
SIMULATOR_REFUSAL = (
    "CUDA graphs need a GPU or the recording driver (numba_cuda_launch.testing."
    "RecordingDriver); under numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) launches run "
    "at once, so there is nothing to capture or replay")


def _check_stream(what, stream):
    if _compat.simulator_enabled():
        # The module functions reach this through _stream_ptr: name the module.
        raise NopythonUsageError("%s: %s" % ("numba_cuda_launch.graphs" if what == "stream"
                                             else "graphs." + what, SIMULATOR_REFUSAL))
    if not is_stream_type(stream):
        raise NopythonUsageError(
            "graphs.%s: the stream must be a raw CUstream (voidptr or an integer) or a "
            "numba.cuda stream object passed in as an argument; got %s" % (what, stream))


def _check(what, value, ty):
    if not isinstance(value, ty):
        raise NopythonUsageError("graphs.%s: expected a %s, got %s" % (
            what, {GraphType: "Graph (from graphs.end_capture)",
                   GraphExecType: "GraphExec (from graph.instantiate())",
                   KernelNodeType: "KernelNode (from graphs.last_launch)"}[ty], value))


@intrinsic
def _stream_ptr(typingctx, stream):
    _check_stream("stream", stream)

    def codegen(context, builder, sig, args):
        return stream_handle_value(context, builder, sig.args[0], args[0])
    return types.voidptr(stream), codegen


@intrinsic
def _begin_capture(typingctx, stream, mode):
    if not isinstance(mode, types.Integer):
        raise NopythonUsageError("graphs.begin_capture: mode must be an integer "
                          "(graphs.CAPTURE_THREAD_LOCAL, ...), got %s" % mode)

    def codegen(context, builder, sig, args):
        mode_val = context.cast(builder, args[1], sig.args[1], types.int32)
        return _rt.emit_begin_capture(builder, args[0], mode_val)
    return types.int32(types.voidptr, mode), codegen


@intrinsic
def _end_capture(typingctx, stream):
    ret = types.Tuple((types.int32, graph_type))

    def codegen(context, builder, sig, args):
        status, graph = _rt.emit_end_capture(builder, args[0])
        return context.make_tuple(builder, ret, [status, _make(context, builder, graph_type,
                                                               graph)])
    return ret(types.voidptr), codegen


@intrinsic
def _abort_capture(typingctx, stream):
    def codegen(context, builder, sig, args):
        return _rt.emit_abort_capture(builder, args[0])
    return types.int32(types.voidptr), codegen


@intrinsic
def _last_node(typingctx, stream):
    ret = types.Tuple((types.int32, types.int32, kernel_node_type))

    def codegen(context, builder, sig, args):
        status, reason, node = _rt.emit_last_node(builder, args[0])
        return context.make_tuple(builder, ret, [
            status, reason, _make(context, builder, kernel_node_type, node)])
    return ret(types.voidptr), codegen


@intrinsic
def _instantiate(typingctx, graph):
    _check("Graph.instantiate", graph, GraphType)
    ret = types.Tuple((types.int32, graph_exec_type))

    def codegen(context, builder, sig, args):
        status, exe = _rt.emit_instantiate(builder, _handle(context, builder, graph_type,
                                                            args[0]))
        return context.make_tuple(builder, ret, [
            status, _make(context, builder, graph_exec_type, exe)])
    return ret(graph), codegen


@intrinsic
def _graph_launch(typingctx, exe, stream):
    def codegen(context, builder, sig, args):
        return _rt.emit_graph_launch(
            builder, _handle(context, builder, graph_exec_type, args[0]), args[1])
    return types.int32(exe, types.voidptr), codegen


@intrinsic
def _exec_update(typingctx, exe, graph):
    _check("GraphExec.update", graph, GraphType)
    ret = types.UniTuple(types.int32, 2)

    def codegen(context, builder, sig, args):
        status, result = _rt.emit_exec_update(
            builder, _handle(context, builder, graph_exec_type, args[0]),
            _handle(context, builder, graph_type, args[1]))
        return context.make_tuple(builder, ret, [status, result])
    return ret(exe, graph), codegen


@intrinsic
def _graph_destroy(typingctx, graph):
    def codegen(context, builder, sig, args):
        return _rt.emit_graph_destroy(builder, _handle(context, builder, graph_type, args[0]))
    return types.int32(graph), codegen


@intrinsic
def _exec_destroy(typingctx, exe):
    def codegen(context, builder, sig, args):
        return _rt.emit_exec_destroy(builder, _handle(context, builder, graph_exec_type,
                                                      args[0]))
    return types.int32(exe), codegen


# -- raising ---------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _raiser(operation, details=(), kernel=""):
    """An ``@njit`` ``raise_graph_error(status, reason)`` raising
    CudaGraphError for *operation*, with the text of *details* (pairs
    ``(reason, text)``) matching *reason*. Raised from a function of its
    own, as launches do (see launch.call): each branch has constant text."""
    src = ["def raise_graph_error(status, reason):"]
    for reason, text in details:
        src.append("    if reason == %d:\n        raise CudaGraphError(status, %r, %r, %r)"
                   % (reason, operation, text, kernel))
    src.append("    raise CudaGraphError(status, %r, '', %r)" % (operation, kernel))
    ns = {"CudaGraphError": CudaGraphError}
    exec("\n".join(src), ns)
    return njit(ns["raise_graph_error"])


_LEGACY = 1
_fail_begin = _raiser("begin_capture", (
    (_LEGACY, "the legacy default stream (0) cannot be captured: capture on a stream "
              "of your own (cuda.stream())"),))
_fail_end = _raiser("end_capture")
_fail_last = _raiser("last_launch", (
    (_rt.NODE_NOT_CAPTURING, "the stream is not capturing"),
    (_rt.NODE_NOT_ONE, "the stream's last captured operation is not one launch (call "
                       "last_launch right after the launch, on the stream it used)"),
    (_rt.NODE_NOT_KERNEL, "the stream's last captured operation is not a kernel launch"),
))
_fail_instantiate = _raiser("instantiate")
_fail_launch = _raiser("launch")
_fail_update = _raiser("update", tuple(
    (result, "the graph cannot update this executable graph: " + text)
    for result, text in _rt.UPDATE_RESULTS.items()))


# -- module functions (nopython, and callable from Python) ------------------------

@njit
def begin_capture_status(stream, mode=CAPTURE_THREAD_LOCAL):
    """Start recording the work submitted to *stream* (``cuStreamBeginCapture``):
    launches on it are recorded, not run, until :func:`end_capture`.
    Returns the ``CUresult``."""
    return _begin_capture(_stream_ptr(stream), mode)


@njit
def begin_capture(stream, mode=CAPTURE_THREAD_LOCAL):
    """:func:`begin_capture_status`, raising :class:`CudaGraphError` on
    failure (the legacy default stream, 0, cannot be captured)."""
    raw = _stream_ptr(stream)
    status = _begin_capture(raw, mode)
    if status != 0:
        _fail_begin(status, _LEGACY if _is_null(raw) else 0)


@njit
def end_capture_status(stream):
    """End the capture on *stream*: ``(status, graph)``, the recorded
    :class:`Graph` (a NULL one when the status is not 0; a capture that
    was invalidated ends with ``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED``)."""
    return _end_capture(_stream_ptr(stream))


@njit
def end_capture(stream):
    """End the capture on *stream* and return the recorded :class:`Graph`;
    raises :class:`CudaGraphError` (the capture is ended all the same)."""
    status, graph = _end_capture(_stream_ptr(stream))
    if status != 0:
        _fail_end(status, 0)
    return graph


@njit
def last_launch_status(stream):
    """``(status, node)``: the :class:`KernelNode` recorded by the last
    launch on capturing *stream* (call it right after that launch), to
    update with ``GraphExec.update_launch``."""
    status, reason, node = _last_node(_stream_ptr(stream))
    return status, node


@njit
def last_launch(stream):
    """:func:`last_launch_status`, returning the node and raising
    :class:`CudaGraphError` (saying why) when there is none."""
    status, reason, node = _last_node(_stream_ptr(stream))
    if status != 0:
        _fail_last(status, reason)
    return node


@njit
def abort_capture(stream):
    """End any capture in progress on *stream* and destroy what it recorded;
    returns the ``CUresult`` (0 also when the stream was not capturing).
    For recovery after a failure inside a capture."""
    return _abort_capture(_stream_ptr(stream))


# -- methods ------------------------------------------------------------------------

@overload_method(GraphType, "instantiate_status", target="cpu")
def _ol_instantiate_status(graph):
    def impl(graph):
        return _instantiate(graph)
    return impl


@overload_method(GraphType, "instantiate", target="cpu")
def _ol_instantiate(graph):
    def impl(graph):
        status, exe = _instantiate(graph)
        if status != 0:
            _fail_instantiate(status, 0)
        return exe
    return impl


@overload_method(GraphType, "destroy", target="cpu")
def _ol_graph_destroy(graph):
    def impl(graph):
        return _graph_destroy(graph)
    return impl


@overload_method(GraphExecType, "launch_status", target="cpu")
def _ol_launch_status(exe, stream):
    _check_stream("GraphExec.launch_status", stream)

    def impl(exe, stream):
        return _graph_launch(exe, _stream_ptr(stream))
    return impl


@overload_method(GraphExecType, "launch", target="cpu")
def _ol_launch(exe, stream):
    _check_stream("GraphExec.launch", stream)

    def impl(exe, stream):
        status = _graph_launch(exe, _stream_ptr(stream))
        if status != 0:
            _fail_launch(status, 0)
    return impl


@overload_method(GraphExecType, "update_status", target="cpu")
def _ol_update_status(exe, graph):
    _check("GraphExec.update_status", graph, GraphType)

    def impl(exe, graph):
        status, result = _exec_update(exe, graph)
        return status
    return impl


@overload_method(GraphExecType, "update", target="cpu")
def _ol_update(exe, graph):
    _check("GraphExec.update", graph, GraphType)

    def impl(exe, graph):
        status, result = _exec_update(exe, graph)
        if status != 0:
            _fail_update(status, result)
    return impl


@overload_method(GraphExecType, "destroy", target="cpu")
def _ol_exec_destroy(exe):
    def impl(exe):
        return _exec_destroy(exe)
    return impl


# -- exe.update_launch(node, cfg, args...) -------------------------------------------

def _update_launch_signature(exe_ty, args, kws, what):
    if kws:
        raise KernelTypingError("GraphExec.%s: keyword arguments are not supported (got %s)"
                                % (what, ", ".join(kws)))
    if len(args) < 2 or not isinstance(args[0], KernelNodeType) or \
            not isinstance(args[1], LaunchConfig):
        raise KernelTypingError(
            "GraphExec.%s(node, kernel[griddim, blockdim, ...], args...): node must be a "
            "KernelNode (from graphs.last_launch) and the second argument a configured "
            "kernel; got %s" % (what, ", ".join(str(a) for a in args[:2]) or "nothing"))
    cfg_ty = args[1]
    selection = select_kernel(cfg_ty.dispatcher, args[2:])
    if _compat.is_simulated(selection.kernel):
        raise KernelTypingError("kernel %r: %s" % (cfg_ty.kernel_name, SIMULATOR_REFUSAL))
    return signature(types.int32 if what.endswith("_status") else types.none, *args,
                     recvr=exe_ty)


@infer_getattr
class GraphExecAttributes(AttributeTemplate):
    key = GraphExecType
    metadata = {"target": "cpu"}

    @bound_function("GraphExec.update_launch_status")
    def resolve_update_launch_status(self, exe_ty, args, kws):
        return _update_launch_signature(exe_ty, args, kws, "update_launch_status")

    @bound_function("GraphExec.update_launch")
    def resolve_update_launch(self, exe_ty, args, kws):
        return _update_launch_signature(exe_ty, args, kws, "update_launch")


def _emit_update_launch(context, builder, sig, args):
    exe = _handle(context, builder, graph_exec_type, args[0])
    node = _handle(context, builder, kernel_node_type, args[1])

    def submit(backend, kernel, cfg, formal_types, values):
        return backend.emit_node_update(context, builder, kernel, cfg, formal_types, values,
                                        exe, node)
    return emit_launch(context, builder, sig.args[2], args[2], sig.args[3:], args[3:],
                       submit=submit)


@lower_builtin("GraphExec.update_launch_status", GraphExecType, types.VarArg(types.Any))
def _lower_update_launch_status(context, builder, sig, args):
    """``exe.update_launch_status(node, cfg, args...)``: the CUresult."""
    return _emit_update_launch(context, builder, sig, args)[0]


@lower_builtin("GraphExec.update_launch", GraphExecType, types.VarArg(types.Any))
def _lower_update_launch(context, builder, sig, args):
    """``exe.update_launch(node, cfg, args...)``: raises CudaGraphError."""
    status, reason, messages = _emit_update_launch(context, builder, sig, args)
    failed = builder.icmp_signed("!=", status, ir.Constant(status.type, 0))
    details = tuple((i, text) for i, text in enumerate(messages) if i)
    with cgutils.if_unlikely(builder, failed):
        call_jitted(context, builder,
                    _raiser("update_launch", details, sig.args[2].kernel_name),
                    (types.int32, types.int32), [status, reason])
    return context.get_dummy_value()


# -- Python methods call the compiled code -------------------------------------------

@njit
def _py_instantiate(graph):
    return graph.instantiate()


@njit
def _py_graph_destroy(graph):
    return graph.destroy()


@njit
def _py_launch(exe, stream):
    exe.launch(stream)


@njit
def _py_update(exe, graph):
    exe.update(graph)


@njit
def _py_exec_destroy(exe):
    return exe.destroy()
