"""CUDA graphs from nopython code and Python: record launches by stream
capture, replay them, update a recorded launch's arguments (public as
:mod:`numba_cuda_launch.graphs`), each operation emitted by the backend's
runtime (the driver's, or the simulator's graphs). See docs/graphs.md.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.typing.templates import AttributeTemplate, bound_function, infer_getattr, signature
from numba.extending import (NativeValue, box, intrinsic, lower_builtin, make_attribute_wrapper,
                             models, overload, overload_method, register_model, typeof_impl,
                             unbox)

from numba_cuda_launch.errors import (CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_INVALID_VALUE,
                                      CUDA_ERROR_NOT_SUPPORTED, CudaGraphError,
                                      KernelTypingError, NopythonUsageError)
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.caching import record_driver_calls
from numba_cuda_launch.launch.call import emit_launch
from numba_cuda_launch.launch.refusals import Guards, emit_raise_if_failed, raiser
from numba_cuda_launch.launch.launchconfig import (LaunchConfig, is_stream_type, negative_stream,
                                                   stream_value)
from numba_cuda_launch.launch.plan import plan_launch
from numba_cuda_launch.launch.pyobjects import box_integers, unbox_integers
from numba_cuda_launch.launch.stream import Stream, python_stream
from numba_cuda_launch.launch.sync import NEGATIVE_STREAM, STREAM_REFUSED, emit_unless_refused, \
    jitted_call
from numba_cuda_launch.compat.numba_extending import Function
from numba_cuda_launch.cudadrv import graph as _rt

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
    handle: int

    def __init__(self, handle: int) -> None:
        if not isinstance(handle, numbers.Integral) or isinstance(handle, bool) or \
                not 0 <= handle < 1 << 64:
            raise TypeError("%s(): handle must be a driver handle, an integer between 0 and "
                            "2**64-1, not %r (%s)" % (type(self).__name__, handle,
                                                      type(handle).__name__))
        self.handle = int(handle)

    def __repr__(self) -> str:
        return "<%s %s>" % (type(self).__name__,
                            hex(self.handle) if self.handle else "(none)")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and cast(_Handle, other).handle == self.handle

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.handle))


class _Destroyable(_Handle):
    __slots__ = ()

    def destroy(self) -> int:
        """Release the handle (a graph's :class:`KernelNode` handles with it);
        returns the ``CUresult``. Destroying twice from Python is harmless."""
        status = jitted_call("destroy", True)(self) if self.handle else 0
        self.handle = 0
        return status


class Graph(_Destroyable):
    """A recorded CUDA graph (``CUgraph``), from :func:`end_capture`."""

    __slots__ = ()

    def instantiate(self) -> GraphExec:
        """The executable graph (:class:`GraphExec`); raises
        :class:`CudaGraphError`."""
        return jitted_call("instantiate", True)(self)

    if TYPE_CHECKING:  # in nopython code only
        def instantiate_status(self) -> tuple[int, GraphExec]:
            """:meth:`instantiate` as ``(status, exe)``."""


class GraphExec(_Destroyable):
    """An executable CUDA graph (``CUgraphExec``), from
    :meth:`Graph.instantiate`."""

    __slots__ = ()

    def launch(self, stream: Stream) -> None:
        """Replay the graph on *stream* (a numba-cuda stream or a raw
        ``CUstream`` integer); raises :class:`CudaGraphError`."""
        jitted_call("launch", True)(self, python_stream(stream))

    def update(self, graph: Graph) -> None:
        """Take the parameters of *graph*, recorded with the same topology
        (``cuGraphExecUpdate``); raises :class:`CudaGraphError`."""
        jitted_call("update", True)(self, graph)

    if TYPE_CHECKING:  # in nopython code only
        def launch_status(self, stream: Stream) -> int:
            """:meth:`launch`, returning the ``CUresult``."""

        def update_status(self, graph: Graph) -> int:
            """:meth:`update`, returning the ``CUresult``."""

        def update_launch(self, node: KernelNode, cfg: Any, *args: Any) -> None:
            """Give recorded launch *node* the configuration *cfg*
            (``kernel[griddim, blockdim, ...]``) and arguments *args*."""

        def update_launch_status(self, node: KernelNode, cfg: Any, *args: Any) -> int:
            """:meth:`update_launch`, returning the ``CUresult``."""


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


class _HandleModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("handle", types.voidptr)])


def _make(context, builder, ty, handle):
    value = cgutils.create_struct_proxy(ty)(context, builder)
    value.handle = handle
    return value._getvalue()


def _handle(context, builder, ty, value):
    return cgutils.create_struct_proxy(ty)(context, builder, value=value).handle


def _box_handle(typ, val, c):
    handle = _handle(c.context, c.builder, typ, val)
    return box_integers(c, _PY_CLASSES[typ], [c.builder.ptrtoint(handle, ir.IntType(64))])


def _unbox_handle(typ, obj, c):
    (handle,) = unbox_integers(c, obj, ["handle"])
    value = _make(c.context, c.builder, typ, c.builder.inttoptr(handle, _i8p))
    return NativeValue(value, is_error=c.pyapi.c_api_error())


for _ty, _cls in _PY_CLASSES.items():
    register_model(type(_ty))(_HandleModel)
    make_attribute_wrapper(type(_ty), "handle", "handle")
    typeof_impl.register(_cls)(lambda val, c, _t=_ty: _t)
    box(type(_ty))(_box_handle)
    unbox(type(_ty))(_unbox_handle)


# -- driver calls (status forms) ---------------------------------------------------

def _check_stream(what, stream):
    if not is_stream_type(stream):
        raise NopythonUsageError(
            "graphs.%s: the stream must be a raw CUstream (voidptr or an integer) or a "
            "numba.cuda stream object passed in as an argument; got %s" % (what, stream))


def _check_graph(what, value):
    if not isinstance(value, GraphType):
        raise NopythonUsageError("graphs.%s: expected a Graph (from graphs.end_capture), got %s"
                                 % (what, value))


#: A stream as the intrinsics calling the driver take it (from
#: :func:`_stream_ptr`): its raw ``CUstream`` and whether it is refused.
_STREAM = types.Tuple((types.voidptr, types.boolean))


@intrinsic
def _stream_ptr(typingctx, stream):
    """*stream* as a :data:`_STREAM`: refused when a negative integer."""
    _check_stream("stream", stream)

    def codegen(context, builder, sig, args):
        ty, value = sig.args[0], args[0]
        return context.make_tuple(builder, _STREAM, [
            stream_value(context, builder, ty, value), negative_stream(builder, ty, value)])
    return _STREAM(stream), codegen


def _on_stream(context, builder, ret, stream, emit):
    """``emit(raw CUstream)``, a value of type *ret* (a ``CUresult``, or a
    tuple of ``(status, reason, ...)``), for *stream* (a :data:`_STREAM`);
    a refused one does not run *emit* (no driver call):
    :func:`..sync.emit_unless_refused`."""
    raw, refused = cgutils.unpack_tuple(builder, stream)
    return emit_unless_refused(context, builder, ret, refused, lambda: emit(raw))


def _takes_stream(codegen):
    """*codegen* of an intrinsic whose first argument is a :data:`_STREAM`,
    run with its raw ``CUstream`` as :func:`_on_stream` runs it."""
    def stream_codegen(context, builder, sig, args):
        return _on_stream(context, builder, sig.return_type, args[0], lambda raw: codegen(
            context, builder, sig, [raw] + list(args[1:])))
    return stream_codegen


#: Why begin_capture refused a capture (reasons 1.. in this order).
_BEGIN_MESSAGES = (
    "the stream is CU_STREAM_LEGACY (handle 1), the legacy default stream, which cannot "
    "be captured: capture on a stream of your own (cuda.stream())",
    "the stream is CU_STREAM_PER_THREAD (handle 2), the per-thread default stream: "
    "capture on a stream of your own (cuda.stream())",
    "mode must be graphs.CAPTURE_GLOBAL (0), graphs.CAPTURE_THREAD_LOCAL (1) or "
    "graphs.CAPTURE_RELAXED (2)",
    "the legacy default stream (0) cannot be captured: capture on a stream of your own "
    "(cuda.stream())",
    "the stream is already capturing: end that capture first (graphs.end_capture or "
    "graphs.abort_capture)",
)


@intrinsic
def _begin_capture(typingctx, stream, mode):
    """``(status, reason)``: the capture begun, or refused (reason: the
    index of the sentence in _BEGIN_MESSAGES, from 1)."""
    if not isinstance(mode, types.Integer):
        raise NopythonUsageError("graphs.begin_capture: mode must be an integer "
                                 "(graphs.CAPTURE_THREAD_LOCAL, ...), got %s" % mode)
    ret = types.UniTuple(types.int32, 2)

    @_takes_stream
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        guards = Guards(builder, _BEGIN_MESSAGES)
        handle = builder.ptrtoint(args[0], ir.IntType(64))
        for value, message in enumerate(_BEGIN_MESSAGES[:2], 1):  # handles 1 and 2
            guards.check(lambda v=value: builder.icmp_unsigned("==", handle, handle.type(v)),
                         message)
        wide = context.cast(builder, args[1], sig.args[1], types.int64)
        guards.check(lambda: builder.icmp_unsigned("<", wide.type(_rt.CAPTURE_RELAXED), wide),
                     _BEGIN_MESSAGES[2])  # unsigned: a negative mode is out of range too
        guards.check_status(lambda: BACKEND.runtime(context).emit_begin_capture(
            builder, args[0], builder.trunc(wide, _i32)), "")
        status = builder.load(guards.status)
        guards.explain(lambda: cgutils.is_null(builder, args[0]), _BEGIN_MESSAGES[3])
        guards.explain(lambda: builder.icmp_signed(
            "==", status, status.type(CUDA_ERROR_ILLEGAL_STATE)), _BEGIN_MESSAGES[4])
        status, reason, _ = guards.result()
        return context.make_tuple(builder, ret, [status, reason])
    return ret(_STREAM, mode), codegen


def _driver_call(emit_name, *results):
    """An intrinsic ``f(*args)`` returning the *results* (types; a tuple of
    them when more than one) of emitter *emit_name* of the backend's runtime. A
    Graph, GraphExec or KernelNode argument reaches the emitter as its
    handle, a :data:`_STREAM` as its raw ``CUstream`` (:func:`_on_stream`: a
    refused one is not given to the emitter); a handle the emitter returns
    comes back as such a value."""
    ret = types.Tuple(results) if len(results) > 1 else results[0]

    @intrinsic
    def call(typingctx, *argtys):
        def codegen(context, builder, sig, args):
            record_driver_calls(context)
            values = [_handle(context, builder, ty, v) if ty in _PY_CLASSES else v
                      for ty, v in zip(argtys, cgutils.unpack_tuple(builder, args[0]))]

            def emit(values):
                out = getattr(BACKEND.runtime(context), emit_name)(builder, *values)
                if len(results) == 1:
                    return out
                return context.make_tuple(builder, ret, [
                    _make(context, builder, ty, v) if ty in _PY_CLASSES else v
                    for ty, v in zip(results, out)])
            if _STREAM not in argtys:
                return emit(values)
            at = argtys.index(_STREAM)
            return _on_stream(context, builder, ret, values[at], lambda raw: emit(
                values[:at] + [raw] + values[at + 1:]))
        return ret(types.StarArgTuple.from_types(argtys)), codegen
    return call


# A stream is passed as a _STREAM (_stream_ptr).
_end_capture = _driver_call("emit_end_capture", types.int32, types.int32, graph_type)
_end_body = _driver_call("emit_end_body", types.int32, types.int32)
_abort_capture = _driver_call("emit_abort_capture", types.int32)
_last_node = _driver_call("emit_last_node", types.int32, types.int32, kernel_node_type)
_instantiate = _driver_call("emit_instantiate", types.int32, graph_exec_type)
_graph_launch = _driver_call("emit_graph_launch", types.int32, types.int32)
_exec_update = _driver_call("emit_exec_update", types.int32, types.int32)


def _destroy_method(ty, emit_name):
    """``destroy()`` of nopython type *ty*: the ``CUresult`` of *emit_name*."""
    destroy = _driver_call(emit_name, types.int32)
    overload_method(type(ty), "destroy", target="cpu")(lambda value: lambda value: destroy(value))


_destroy_method(graph_type, "emit_graph_destroy")
_destroy_method(graph_exec_type, "emit_exec_destroy")


# -- raising ---------------------------------------------------------------------

def _raiser(operation, details=(), kernel=""):
    """The CudaGraphError :func:`raiser` of *operation*; *details*: ``(reason, text)``
    (and a refused stream's, :data:`..sync.STREAM_REFUSED`)."""
    return raiser(CudaGraphError, (operation, "", kernel),
                  tuple((r, (operation, text, kernel))
                        for r, text in details + ((STREAM_REFUSED, NEGATIVE_STREAM),)))


#: end_capture's refusal while a body of the graph is being recorded
BODY_OPEN = ("a body of one of its conditional nodes is still being recorded on another "
             "stream: end that first (graphs.end_body)")
#: the end of a recording holding a WHILE node whose body is empty
WHILE_EMPTY = ("a WHILE node of this recording (graphs.add_while) has an empty body: no "
               "launch was recorded into it (graphs.begin_body(body_stream, node) ... "
               "graphs.end_body), and on a GPU the loop would never end. Record its body "
               "first; the recording goes on (graphs.abort_capture drops it)")
#: a replay refused on a stream of another device (cudadrv/graphdevices.py)
OTHER_DEVICE = ("the graph has conditional nodes, which belong to the device it was "
                "recorded on, and the stream is of another device (or, for a default "
                "stream, the current context is): launch it on a stream of its own device, "
                "or record the graph again on this one (a graph per device)")
_fail_begin = _raiser("begin_capture", tuple(enumerate(_BEGIN_MESSAGES, 1)))
_fail_end = _raiser("end_capture", (
    (_rt.END_NOT_CAPTURING, "no capture is in progress on this stream (begin one with "
                            "graphs.begin_capture)"),
    (_rt.END_BODY_OPEN, BODY_OPEN),
    (_rt.END_RECORDS_BODY, "the stream is recording a body of a conditional node "
                           "(graphs.begin_body), not a graph: end it with graphs.end_body; "
                           "the recording goes on"),
    (_rt.END_WHILE_EMPTY, WHILE_EMPTY)))
_fail_last = _raiser("last_launch", (
    (_rt.NODE_NOT_CAPTURING, "the stream is not capturing"),
    (_rt.NODE_NOT_ONE, "the stream's last captured operation is not one launch (call "
                       "last_launch right after the launch, on the stream it used)"),
    (_rt.NODE_NOT_KERNEL, "the stream's last captured operation is not a kernel launch"),
))
_UNINSTANTIABLE, _INSTANTIATED, _NULL_GRAPH = 1, 2, 3
_fail_instantiate = _raiser("instantiate", (
    (_UNINSTANTIABLE,
     "the driver refused the graph: it was destroyed (graph.destroy()), or it has a "
     "conditional handle (graphs.conditional_handle) that no conditional node uses"),
    (_NULL_GRAPH,
     "the graph is NULL: destroyed from Python (graph.destroy() sets its handle to 0), or "
     "from a failed end_capture_status"),
    (_INSTANTIATED,
     "a graph with conditional nodes has one executable graph at a time: destroy the "
     "first (exe.destroy()) or record the graph again"),))
_fail_launch = _raiser("launch", (
    (_rt.LAUNCH_WHILE_LIMIT,
     "a WHILE node ran its body as many times as the simulator allows "
     "(NUMBA_CUDA_LAUNCH_SIM_WHILE_LIMIT, 100000 by default) and its condition is still "
     "not 0: a kernel of the body must set it to 0 (graphs.set_conditional) to end the "
     "loop"),
    (_rt.LAUNCH_OTHER_DEVICE, OTHER_DEVICE),
))
_fail_update = _raiser("update", tuple(
    (result, "the graph cannot update this executable graph: " + text)
    for result, text in _rt.UPDATE_RESULTS.items()))


# -- module functions (nopython, and callable from Python) ------------------------

def _module_function(fn: Function) -> Function:
    """*fn* as a module function: a nopython function (an overload of the
    function returned, which has *fn*'s signature: keywords and defaults
    included) that Python calls with its stream read by
    :func:`..sync.python_stream` (a bad one is a TypeError naming *fn*)."""
    parameters = inspect.signature(fn)
    # read by their truth value in compiled code: anything but a boolean is refused
    flags = [p.name for p in parameters.parameters.values() if p.annotation in ("bool", bool)]

    @functools.wraps(fn)
    def python_form(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = parameters.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError("graphs.%s(): %s" % (fn.__name__, exc)) from None
        bound.apply_defaults()
        for name in flags:  # nopython code refuses them too, as typing errors
            if not isinstance(bound.arguments[name], (bool, np.bool_)):
                raise TypeError("graphs.%s(): %s must be True or False, not %r" % (
                    fn.__name__, name, bound.arguments[name]))
        stream, *rest = bound.args
        try:
            stream = python_stream(stream)
        except TypeError as exc:
            raise TypeError("graphs.%s(): %s" % (fn.__name__, exc)) from None
        return jitted(stream, *rest)

    # Numba folds keywords and defaults by fn's own signature
    overload(python_form, target="cpu", strict=False)(lambda *args, **kwargs: fn)
    # Python runs the overload too: fn is compiled once per signature for both
    jitted = jitted_call(python_form)
    return cast(Function, python_form)


@_module_function
def begin_capture_status(stream: Stream, mode: int = CAPTURE_THREAD_LOCAL) -> int:
    """Start recording the work submitted to *stream* (``cuStreamBeginCapture``):
    launches on it are recorded, not run, until :func:`end_capture`.
    Returns the ``CUresult``."""
    return _begin_capture(_stream_ptr(stream), mode)[0]


@_module_function
def begin_capture(stream: Stream, mode: int = CAPTURE_THREAD_LOCAL) -> None:
    """:func:`begin_capture_status`, raising :class:`CudaGraphError` on
    failure (the default streams, 0, 1 and 2, are not captured)."""
    status, reason = _begin_capture(_stream_ptr(stream), mode)
    if status != 0:
        _fail_begin(status, reason)


@_module_function
def end_capture_status(stream: Stream) -> tuple[int, Graph]:
    """End the capture on *stream*: ``(status, graph)``, the recorded
    :class:`Graph` (a NULL one when the status is not 0; a capture that
    was invalidated ends with ``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED``).
    These do not end (the recording goes on): one whose conditional node's
    body is still being recorded (``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``),
    one holding a WHILE node with an empty body
    (``CUDA_ERROR_INVALID_VALUE``), a body's (``CUDA_ERROR_ILLEGAL_STATE``:
    :func:`end_body` ends it)."""
    status, reason, graph = _end_capture(_stream_ptr(stream))
    return status, graph


@_module_function
def end_capture(stream: Stream) -> Graph:
    """End the capture on *stream* and return the recorded :class:`Graph`;
    raises :class:`CudaGraphError` (saying whether the recording goes on,
    as :func:`end_capture_status` lists)."""
    status, reason, graph = _end_capture(_stream_ptr(stream))
    if status != 0:
        _fail_end(status, reason)
    return graph


@_module_function
def last_launch_status(stream: Stream) -> tuple[int, KernelNode]:
    """``(status, node)``: the :class:`KernelNode` recorded by the last
    launch on capturing *stream* (call it right after that launch), to
    update with ``GraphExec.update_launch``."""
    status, reason, node = _last_node(_stream_ptr(stream))
    return status, node


@_module_function
def last_launch(stream: Stream) -> KernelNode:
    """:func:`last_launch_status`, returning the node and raising
    :class:`CudaGraphError` (saying why) when there is none."""
    status, reason, node = _last_node(_stream_ptr(stream))
    if status != 0:
        _fail_last(status, reason)
    return node


@_module_function
def abort_capture(stream: Stream) -> int:
    """End any recording in progress on *stream* and drop what it recorded
    (a graph's recording is destroyed; a body's launches are removed, the
    body is empty again); returns the ``CUresult`` (0 also when the stream
    was not recording). For recovery after a failure inside a recording."""
    return _abort_capture(_stream_ptr(stream))


# -- methods ------------------------------------------------------------------------

@intrinsic
def _is_null(typingctx, value):
    """True if Graph, GraphExec or KernelNode *value* holds no handle."""
    def codegen(context, builder, sig, args):
        return cgutils.is_null(builder, _handle(context, builder, sig.args[0], args[0]))
    return types.boolean(value), codegen


@overload_method(GraphType, "instantiate_status", target="cpu")
def _ol_instantiate_status(graph):
    return lambda graph: _instantiate(graph)


@overload_method(GraphType, "instantiate", target="cpu")
def _ol_instantiate(graph):
    def impl(graph):
        status, exe = _instantiate(graph)
        if status != 0:
            _fail_instantiate(status, _NULL_GRAPH if _is_null(graph) else
                              _UNINSTANTIABLE if status == CUDA_ERROR_INVALID_VALUE
                              else _INSTANTIATED if status == CUDA_ERROR_NOT_SUPPORTED else 0)
        return exe
    return impl


@overload_method(GraphExecType, "launch_status", target="cpu")
def _ol_launch_status(exe, stream):
    _check_stream("GraphExec.launch_status", stream)
    return lambda exe, stream: _graph_launch(exe, _stream_ptr(stream))[0]


@overload_method(GraphExecType, "launch", target="cpu")
def _ol_launch(exe, stream):
    _check_stream("GraphExec.launch", stream)

    def impl(exe, stream):
        status, reason = _graph_launch(exe, _stream_ptr(stream))
        if status != 0:
            _fail_launch(status, reason)
    return impl


@overload_method(GraphExecType, "update_status", target="cpu")
def _ol_update_status(exe, graph):
    _check_graph("GraphExec.update_status", graph)
    return lambda exe, graph: _exec_update(exe, graph)[0]


@overload_method(GraphExecType, "update", target="cpu")
def _ol_update(exe, graph):
    _check_graph("GraphExec.update", graph)

    def impl(exe, graph):
        status, result = _exec_update(exe, graph)
        if status != 0:
            _fail_update(status, result)
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
    plan_launch(cfg_ty.dispatcher, args[2:], cfg_ty.source, cfg_ty.kernel_name)  # typing errors as a launch's
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

    def submit(plan, cfg, values):
        return BACKEND.emit_node_update(context, builder, plan, cfg, values, exe, node)

    def check(guards, plan, cfg):
        BACKEND.emit_node_checks(builder, guards, plan, cfg, node)
    return emit_launch(context, builder, sig.args[2], args[2], sig.args[3:], args[3:],
                       submit=submit, check=check)


@lower_builtin("GraphExec.update_launch_status", GraphExecType, types.VarArg(types.Any))
def _lower_update_launch_status(context, builder, sig, args):
    """``exe.update_launch_status(node, cfg, args...)``: the CUresult."""
    return _emit_update_launch(context, builder, sig, args)[0]


@lower_builtin("GraphExec.update_launch", GraphExecType, types.VarArg(types.Any))
def _lower_update_launch(context, builder, sig, args):
    """``exe.update_launch(node, cfg, args...)``: raises CudaGraphError."""
    status, reason, messages = _emit_update_launch(context, builder, sig, args)
    details = tuple((i, text) for i, text in enumerate(messages) if i)
    emit_raise_if_failed(context, builder,
                         _raiser("update_launch", details, sig.args[2].kernel_name),
                         status, reason)
    return context.get_dummy_value()
