"""Conditional graph nodes from nopython code and Python (public in
:mod:`numba_cuda_launch.graphs`): in a graph being recorded, make a
conditional handle, append an IF, IF/ELSE, WHILE or SWITCH node, record its
bodies from ordinary launches on a second stream. Replays, updates and
releases are those of :mod:`.graph`; kernels set the condition with
:func:`.intrinsics.set_conditional`. docs/graphs.md, "Conditional nodes".
"""

from __future__ import annotations

import numbers

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import (NativeValue, box, intrinsic, make_attribute_wrapper, models,
                             register_model, typeof_impl, unbox)

from numba_cuda_launch.errors import (CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_INVALID_VALUE,
                                      CUDA_ERROR_OUT_OF_MEMORY, NopythonUsageError)
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.caching import record_driver_calls
from numba_cuda_launch.launch.conditionalhandle import (ConditionalHandle, ConditionalHandleType,
                                                        conditional_handle_type, handle_value,
                                                        make_handle)
from numba_cuda_launch.launch.intrinsics import set_conditional
from numba_cuda_launch.launch.graph import (BODY_OPEN, CAPTURE_THREAD_LOCAL, WHILE_EMPTY,
                                            _BEGIN_MESSAGES, _STREAM, _end_body,
                                            _module_function, _raiser, _stream_ptr,
                                            _takes_stream)
from numba_cuda_launch.cudadrv import graph as _graph_rt
from numba_cuda_launch.launch.pyobjects import box_integers, unbox_integers
from numba_cuda_launch.launch.refusals import Guards
from numba_cuda_launch.launch.stream import Stream
from numba_cuda_launch.cudadrv import conditional as _rt
from numba_cuda_launch.cudadrv.graph import CAPTURE_RELAXED

__all__ = [
    "ConditionalHandle", "conditional_handle_type", "set_conditional",
    "ConditionalNode",
    "COND_IF", "COND_WHILE", "COND_SWITCH",
    "conditional_handle", "conditional_handle_status",
    "add_if", "add_if_status", "add_if_else", "add_if_else_status",
    "add_while", "add_while_status", "add_switch", "add_switch_status",
    "begin_body", "begin_body_status", "end_body", "end_body_status",
]

#: Kinds of conditional nodes (the driver's ``CUgraphConditionalNodeType``).
COND_IF, COND_WHILE, COND_SWITCH = _rt.COND_IF, _rt.COND_WHILE, _rt.COND_SWITCH

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_U32_MAX = 2**32 - 1


# -- the node, a Python object and a nopython value ----------------------------------

def _integer(value, what, low, high):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or \
            not low <= value <= high:
        raise TypeError("ConditionalNode(): %s must be an integer between %d and %d, not %r"
                        % (what, low, high, value))
    return int(value)


class ConditionalNode:
    """A conditional node of a graph being recorded (from :func:`add_if`,
    :func:`add_while`, ...): ``handle`` the ``CUgraphNode``, ``bodies`` the
    address of the driver's array of its body graphs (valid while the
    node's graph is), ``graph`` the ``CUgraph`` it is in, ``kind``
    (``COND_IF``, ``COND_WHILE``, ``COND_SWITCH``) and ``size``, its number
    of bodies."""

    __slots__ = ("handle", "bodies", "graph", "kind", "size")
    handle: int
    bodies: int
    graph: int
    kind: int
    size: int

    def __init__(self, handle: int, bodies: int, graph: int, kind: int, size: int) -> None:
        self.handle = _integer(handle, "handle", 0, 2**64 - 1)
        self.bodies = _integer(bodies, "bodies", 0, 2**64 - 1)
        self.graph = _integer(graph, "graph", 0, 2**64 - 1)
        self.kind = _integer(kind, "kind", 0, 2)
        self.size = _integer(size, "size", 0, _U32_MAX)

    def __repr__(self) -> str:
        return "<ConditionalNode %s%s %s>" % (
            _rt.KIND_NAMES[self.kind], "/ELSE" if self.kind == COND_IF and self.size == 2
            else "[%d]" % self.size if self.kind == COND_SWITCH else "",
            hex(self.handle) if self.handle else "(none)")

    def __eq__(self, other: object) -> bool:
        return type(other) is ConditionalNode and other.handle == self.handle

    def __hash__(self) -> int:
        return hash(("ConditionalNode", self.handle))


_FIELDS = (("handle", types.voidptr), ("bodies", types.voidptr), ("graph", types.voidptr),
           ("kind", types.int32), ("size", types.uint32))


class ConditionalNodeType(types.Type):
    def __init__(self) -> None:
        super().__init__(name="ConditionalNode")


conditional_node_type = ConditionalNodeType()


@register_model(ConditionalNodeType)
class _ConditionalNodeModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, list(_FIELDS))


for _name, _ in _FIELDS:
    make_attribute_wrapper(ConditionalNodeType, _name, _name)


@typeof_impl.register(ConditionalNode)
def _typeof_node(val, c):
    return conditional_node_type


def _node_struct(context, builder, value=None):
    return cgutils.create_struct_proxy(conditional_node_type)(context, builder, value=value)


@box(ConditionalNodeType)
def _box_node(typ, val, c):
    node = _node_struct(c.context, c.builder, val)
    b = c.builder
    return box_integers(c, ConditionalNode, [
        b.ptrtoint(node.handle, _i64), b.ptrtoint(node.bodies, _i64),
        b.ptrtoint(node.graph, _i64), b.sext(node.kind, _i64), b.zext(node.size, _i64)])


@unbox(ConditionalNodeType)
def _unbox_node(typ, obj, c):
    node = _node_struct(c.context, c.builder)
    for (name, ty), raw in zip(_FIELDS, unbox_integers(c, obj, [n for n, _ in _FIELDS])):
        setattr(node, name, c.builder.inttoptr(raw, _i8p) if ty == types.voidptr
                else c.builder.trunc(raw, _i32))
    return NativeValue(node._getvalue(), is_error=c.pyapi.c_api_error())


# -- driver calls (status forms) -------------------------------------------------------

def _check_handle(what, handle):
    if not isinstance(handle, ConditionalHandleType):
        raise NopythonUsageError(
            "graphs.%s: handle must be a ConditionalHandle (from graphs.conditional_handle), "
            "got %s" % (what, handle))


def _check_node(what, node):
    if not isinstance(node, ConditionalNodeType):
        raise NopythonUsageError(
            "graphs.%s: node must be a ConditionalNode (from graphs.add_while, add_if, "
            "add_if_else or add_switch), got %s" % (what, node))


def _check_integer(what, name, ty):
    if not isinstance(ty, (types.Integer, types.Boolean)):
        raise NopythonUsageError("graphs.%s: %s must be an integer, got %s" % (what, name, ty))


_NOT_CAPTURING = ("the stream is not recording a graph: call graphs.begin_capture(stream) "
                  "(or graphs.begin_body, for a body) first")
_INVALIDATED = ("the stream's recording was invalidated by an operation that cannot be "
                "recorded; end it (graphs.abort_capture) and record again")


def _messages(needs, *more):
    """The sentences of a conditional operation's refusals, in reason order
    (the ``REASON_*`` values of :mod:`..cudadrv.conditional`, then *more*)."""
    return ("%s needs a CUDA driver of version %s or later (cuDriverGetVersion); this "
            "driver is older" % needs, _NOT_CAPTURING, _INVALIDATED) + more


def _check_driver_status(builder, guards, emit):
    """Run *emit* (emits ``(status, reason)``, *reason* a ``REASON_*`` of
    the emitter, the index of its sentence) as ``guards.check_status``."""
    slot = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))

    def call():
        status, reason = emit()
        builder.store(reason, slot)
        return status
    guards.check_status(call, "")
    unexplained = builder.and_(builder.not_(guards.ok()), builder.icmp_signed(
        "==", builder.load(guards.reason), ir.Constant(_i32, 0)))
    with builder.if_then(unexplained):
        builder.store(builder.load(slot), guards.reason)


_DEFAULT_RANGE = "default must be between 0 and 2**32-1 (the condition's unsigned int)"
_DEFAULT_UNUSED = ("without assign_default the driver applies no default (the value is 0 "
                   "until a kernel sets it): give default=0, or assign_default=True")
_HANDLE_MESSAGES = _messages(("conditional nodes", "12.4"), _DEFAULT_RANGE, _DEFAULT_UNUSED)


@intrinsic
def _handle_create(typingctx, stream, default, assign_default):
    """``(status, reason, handle)``: a conditional handle in the graph
    *stream* records."""
    _check_integer("conditional_handle", "default", default)
    if not isinstance(assign_default, (types.Boolean, types.Omitted)):
        # a string or a number would be read by its truth value
        raise NopythonUsageError("graphs.conditional_handle: assign_default must be a "
                                 "boolean (True or False), got %s" % assign_default)
    ret = types.Tuple([types.int32, types.int32, conditional_handle_type])

    @_takes_stream
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        guards = Guards(builder, _HANDLE_MESSAGES)
        handle = cgutils.alloca_once_value(builder, ir.Constant(_i64, 0))
        wide = context.cast(builder, args[1], sig.args[1], types.int64)
        guards.check(lambda: builder.icmp_unsigned(">", wide, ir.Constant(_i64, _U32_MAX)),
                     _DEFAULT_RANGE)  # unsigned: negatives are out of range too
        assign = context.cast(builder, args[2], sig.args[2], types.boolean)
        guards.check(lambda: builder.and_(builder.not_(assign), builder.icmp_unsigned(
            "!=", wide, ir.Constant(_i64, 0))), _DEFAULT_UNUSED)
        flags = builder.select(assign, ir.Constant(_i32, _rt.ASSIGN_DEFAULT),
                               ir.Constant(_i32, 0))

        def create():
            status, reason, value = BACKEND.runtime(context).emit_handle_create(
                builder, args[0], builder.trunc(wide, _i32), flags)
            builder.store(value, handle)
            return status, reason
        _check_driver_status(builder, guards, create)
        status, reason, _ = guards.result()
        return context.make_tuple(builder, ret, [
            status, reason, make_handle(context, builder, builder.load(handle))])
    return ret(_STREAM, default, assign_default), codegen


#: Why a conditional node was refused, after the driver's reasons.
_REFUSED = ("the driver refused the node: its conditional handle must have been made "
            "(graphs.conditional_handle) on a stream recording this graph, or a graph "
            "this body is inside, whose stream is of the same context")
_SWITCH_SIZE = "a SWITCH node has 1 to 2**32-1 bodies (n)"


def _node_messages(kind, size):
    needs = ("IF/ELSE and SWITCH nodes", "12.8") if _rt.driver_needed(kind, size) > 12040 \
        else ("IF and WHILE nodes", "12.4")
    return _messages(needs, _REFUSED, _SWITCH_SIZE)


def _add_node(kind, size_fixed):
    """An intrinsic ``(stream, handle[, n]) -> (status, reason, node)``
    appending a node of *kind* (*size_fixed* bodies, else ``n``)."""
    messages = _node_messages(kind, size_fixed or 2)
    what = {COND_IF: "add_if_else" if size_fixed == 2 else "add_if",
            COND_WHILE: "add_while", COND_SWITCH: "add_switch"}[kind]
    ret = types.Tuple([types.int32, types.int32, conditional_node_type])

    @_takes_stream
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        guards = Guards(builder, messages)
        if size_fixed:
            size = ir.Constant(_i32, size_fixed)
        else:
            wide = context.cast(builder, args[2], sig.args[2], types.int64)
            guards.check(lambda: builder.or_(
                builder.icmp_signed("<", wide, ir.Constant(_i64, 1)),
                builder.icmp_signed(">", wide, ir.Constant(_i64, _U32_MAX))), _SWITCH_SIZE)
            size = builder.trunc(wide, _i32)
        node = _node_struct(context, builder)
        node.handle = node.bodies = node.graph = ir.Constant(_i8p, None)
        node.kind, node.size = ir.Constant(_i32, kind), size
        slot = cgutils.alloca_once_value(builder, node._getvalue())

        def append():
            status, reason, handle, bodies, graph = BACKEND.runtime(context).emit_add_conditional(
                builder, args[0], handle_value(context, builder, args[1]),
                ir.Constant(_i32, kind), size)
            made = _node_struct(context, builder, builder.load(slot))
            made.handle, made.bodies, made.graph = handle, bodies, graph
            builder.store(made._getvalue(), slot)
            return status, reason
        _check_driver_status(builder, guards, append)
        status = builder.load(guards.status)
        guards.explain(lambda: builder.icmp_signed(
            "==", status, status.type(CUDA_ERROR_INVALID_VALUE)), _REFUSED)
        status, reason, _ = guards.result()
        return context.make_tuple(builder, ret, [status, reason, builder.load(slot)])

    if size_fixed:
        @intrinsic
        def add(typingctx, stream, handle):
            _check_handle(what, handle)
            return ret(_STREAM, handle), codegen
    else:
        @intrinsic
        def add(typingctx, stream, handle, n):
            _check_handle(what, handle)
            _check_integer(what, "n", n)
            return ret(_STREAM, handle, n), codegen
    return add, messages


_add_if, _IF_MESSAGES = _add_node(COND_IF, 1)
_add_if_else, _IF_ELSE_MESSAGES = _add_node(COND_IF, 2)
_add_while, _WHILE_MESSAGES = _add_node(COND_WHILE, 1)
_add_switch, _SWITCH_MESSAGES = _add_node(COND_SWITCH, 0)


#: Why begin_body refused (reasons 1.. in this order).
_BODY_MESSAGES = _BEGIN_MESSAGES[:3] + (
    "index must name one of the node's bodies: 0 for IF and WHILE, 0 (then) or 1 (else) "
    "for IF/ELSE, 0..n-1 for SWITCH",
    "the node is NULL (from a failed add_* status call)",
    "the legacy default stream (0) cannot record a body: use a stream of your own "
    "(cuda.stream())",
    "the stream is already capturing: a body is recorded on a stream of its own (not the "
    "one recording the node's graph); end its previous body first (graphs.end_body)",
    "64 bodies are being recorded in this process already (end one first)",
    "the body was recorded already (a body is recorded once: a second recording's "
    "launches would run alongside the first's, in no order)",
)


@intrinsic
def _begin_body(typingctx, stream, node, index, mode):
    """``(status, reason)``: *stream* records body *index* of *node*."""
    _check_node("begin_body", node)
    _check_integer("begin_body", "index", index)
    _check_integer("begin_body", "mode", mode)
    ret = types.UniTuple(types.int32, 2)

    @_takes_stream
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        guards = Guards(builder, _BODY_MESSAGES)
        stream = builder.ptrtoint(args[0], _i64)
        for value, message in enumerate(_BODY_MESSAGES[:2], 1):  # handles 1 and 2
            guards.check(lambda v=value: builder.icmp_unsigned("==", stream, stream.type(v)),
                         message)
        mode = context.cast(builder, args[3], sig.args[3], types.int64)
        guards.check(lambda: builder.icmp_unsigned("<", mode.type(CAPTURE_RELAXED), mode),
                     _BODY_MESSAGES[2])
        made = _node_struct(context, builder, args[1])
        index = context.cast(builder, args[2], sig.args[2], types.int64)
        guards.check(lambda: builder.icmp_unsigned(">=", index, builder.zext(made.size, _i64)),
                     _BODY_MESSAGES[3])  # unsigned: negatives are out of range too
        guards.check(lambda: cgutils.is_null(builder, made.bodies), _BODY_MESSAGES[4])
        why = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))

        def begin():
            status, reason = BACKEND.runtime(context).emit_begin_body(
                builder, args[0], made.bodies, index, builder.trunc(mode, _i32), made.graph)
            builder.store(reason, why)
            return status
        guards.check_status(begin, "")
        status = builder.load(guards.status)
        guards.explain(lambda: builder.icmp_signed(
            "==", builder.load(why), ir.Constant(_i32, _rt.REASON_BODY_RECORDED)),
            _BODY_MESSAGES[8])
        guards.explain(lambda: cgutils.is_null(builder, args[0]), _BODY_MESSAGES[5])
        guards.explain(lambda: builder.icmp_signed(
            "==", status, status.type(CUDA_ERROR_ILLEGAL_STATE)), _BODY_MESSAGES[6])
        guards.explain(lambda: builder.icmp_signed(
            "==", status, status.type(CUDA_ERROR_OUT_OF_MEMORY)), _BODY_MESSAGES[7])
        status, reason, _ = guards.result()
        return context.make_tuple(builder, ret, [status, reason])
    return ret(_STREAM, node, index, mode), codegen


# -- raising -----------------------------------------------------------------------------

def _fail(operation, messages):
    return _raiser(operation, tuple(enumerate(messages, 1)))


_fail_handle = _fail("conditional_handle", _HANDLE_MESSAGES)
_fail_if = _fail("add_if", _IF_MESSAGES)
_fail_if_else = _fail("add_if_else", _IF_ELSE_MESSAGES)
_fail_while = _fail("add_while", _WHILE_MESSAGES)
_fail_switch = _fail("add_switch", _SWITCH_MESSAGES)
_fail_begin_body = _fail("begin_body", _BODY_MESSAGES)
_fail_end_body = _raiser("end_body", (
    (_graph_rt.END_NOT_CAPTURING, "no body is being recorded on this stream "
                                  "(graphs.begin_body)"),
    (_graph_rt.END_BODY_OPEN, BODY_OPEN),
    (_graph_rt.END_RECORDS_GRAPH, "the stream is recording a graph (graphs.begin_capture), "
                                  "not a body: end it with graphs.end_capture; the "
                                  "recording goes on"),
    (_graph_rt.END_WHILE_EMPTY, WHILE_EMPTY)))


# -- module functions (nopython, and callable from Python) ----------------------------

@_module_function
def conditional_handle_status(stream: Stream, default: int = 0,
                              assign_default: bool = True) -> tuple[int, ConditionalHandle]:
    """``(status, handle)``: a :class:`ConditionalHandle` made in the graph
    *stream* is recording (``cuGraphConditionalHandleCreate``), for the
    stream's context. With *assign_default* (the default) it is set to
    *default* (0..2**32-1) at the start of each launch of the graph;
    without, the driver applies no default (*default* must be 0) and the
    value is what kernels set (0 until one does): set it with a kernel
    before the node."""
    status, reason, handle = _handle_create(_stream_ptr(stream), default, assign_default)
    return status, handle


@_module_function
def conditional_handle(stream: Stream, default: int = 0,
                       assign_default: bool = True) -> ConditionalHandle:
    """:func:`conditional_handle_status`, returning the handle and raising
    :class:`CudaGraphError` on failure (a stream not recording, a driver
    older than CUDA 12.4, *default* out of range, or not 0 without
    *assign_default*)."""
    status, reason, handle = _handle_create(_stream_ptr(stream), default, assign_default)
    if status != 0:
        _fail_handle(status, reason)
    return handle


@_module_function
def add_if_status(stream: Stream, handle: ConditionalHandle) -> tuple[int, ConditionalNode]:
    """``(status, node)``: append an IF node to the graph *stream* records:
    its body (``begin_body(s, node)``) runs once if *handle*'s value is not
    0 when the node is reached. Work recorded on *stream* afterwards runs
    after it."""
    status, reason, node = _add_if(_stream_ptr(stream), handle)
    return status, node


@_module_function
def add_if(stream: Stream, handle: ConditionalHandle) -> ConditionalNode:
    """:func:`add_if_status`, returning the node and raising :class:`CudaGraphError`."""
    status, reason, node = _add_if(_stream_ptr(stream), handle)
    if status != 0:
        _fail_if(status, reason)
    return node


@_module_function
def add_if_else_status(stream: Stream,
                       handle: ConditionalHandle) -> tuple[int, ConditionalNode]:
    """``(status, node)``: an IF node with two bodies: body 0 runs if
    *handle*'s value is not 0, body 1 otherwise (CUDA 12.8+)."""
    status, reason, node = _add_if_else(_stream_ptr(stream), handle)
    return status, node


@_module_function
def add_if_else(stream: Stream, handle: ConditionalHandle) -> ConditionalNode:
    """:func:`add_if_else_status`, returning the node and raising
    :class:`CudaGraphError`."""
    status, reason, node = _add_if_else(_stream_ptr(stream), handle)
    if status != 0:
        _fail_if_else(status, reason)
    return node


@_module_function
def add_while_status(stream: Stream, handle: ConditionalHandle) -> tuple[int, ConditionalNode]:
    """``(status, node)``: append a WHILE node: its body runs again and again
    while *handle*'s value is not 0 (checked before each run, so not at all
    if it is 0 when the node is reached); a kernel of the body sets it to 0
    to end the loop."""
    status, reason, node = _add_while(_stream_ptr(stream), handle)
    return status, node


@_module_function
def add_while(stream: Stream, handle: ConditionalHandle) -> ConditionalNode:
    """:func:`add_while_status`, returning the node and raising
    :class:`CudaGraphError`."""
    status, reason, node = _add_while(_stream_ptr(stream), handle)
    if status != 0:
        _fail_while(status, reason)
    return node


@_module_function
def add_switch_status(stream: Stream, handle: ConditionalHandle,
                      n: int) -> tuple[int, ConditionalNode]:
    """``(status, node)``: a SWITCH node of *n* bodies: body *v* runs once,
    *v* the handle's value when the node is reached (none for *v* >= *n*;
    CUDA 12.8+)."""
    status, reason, node = _add_switch(_stream_ptr(stream), handle, n)
    return status, node


@_module_function
def add_switch(stream: Stream, handle: ConditionalHandle, n: int) -> ConditionalNode:
    """:func:`add_switch_status`, returning the node and raising
    :class:`CudaGraphError`."""
    status, reason, node = _add_switch(_stream_ptr(stream), handle, n)
    if status != 0:
        _fail_switch(status, reason)
    return node


@_module_function
def begin_body_status(stream: Stream, node: ConditionalNode, index: int = 0,
                      mode: int = CAPTURE_THREAD_LOCAL) -> int:
    """Start recording body *index* of conditional *node* on *stream* (not
    the stream recording the node's graph: a second one), as
    ``begin_capture`` records a graph (``cuStreamBeginCaptureToGraph``):
    launches on *stream* are recorded into the body until
    :func:`end_body`. Returns the ``CUresult``."""
    return _begin_body(_stream_ptr(stream), node, index, mode)[0]


@_module_function
def begin_body(stream: Stream, node: ConditionalNode, index: int = 0,
               mode: int = CAPTURE_THREAD_LOCAL) -> None:
    """:func:`begin_body_status`, raising :class:`CudaGraphError`."""
    status, reason = _begin_body(_stream_ptr(stream), node, index, mode)
    if status != 0:
        _fail_begin_body(status, reason)


@_module_function
def end_body_status(stream: Stream) -> int:
    """End the recording of a body on *stream*; returns the ``CUresult``.
    The body belongs to its node: it is released with the node's graph.
    Not ended (the recording goes on): a stream recording a graph, not a
    body (``CUDA_ERROR_ILLEGAL_STATE``), a body with a body of its own
    nodes still being recorded (``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``) or
    a WHILE node whose body is empty (``CUDA_ERROR_INVALID_VALUE``)."""
    return _end_body(_stream_ptr(stream))[0]


@_module_function
def end_body(stream: Stream) -> None:
    """:func:`end_body_status`, raising :class:`CudaGraphError`."""
    status, reason = _end_body(_stream_ptr(stream))
    if status != 0:
        _fail_end_body(status, reason)
