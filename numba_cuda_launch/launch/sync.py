"""Waiting for the GPU from nopython code and Python: ``synchronize()``,
``stream_synchronize(s)``, ``stream_query(s)``, a passed-in stream's methods,
each with a ``*_status`` form; and the helpers the Python forms of events and
graphs share. See docs/events.md.
"""

import functools

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic, overload, overload_method

from numba_cuda_launch.errors import (CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CudaError,
                                      NopythonUsageError)
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.caching import record_driver_calls
from numba_cuda_launch.launch.launchconfig import (BAD_STREAM, CONFIG_PROBLEMS, is_stream_type,
                                                   negative_stream, stream_value)
from numba_cuda_launch.launch.refusals import raiser
from numba_cuda_launch.launch.stream import CUDAStream, Stream, python_stream

_i32 = ir.IntType(32)

#: The reason (of a ``(status, reason)`` pair) of an operation refused
#: before the driver because its stream is a negative integer (sign-extended
#: it would name another handle), with the launches' sentence for it.
STREAM_REFUSED = -1
NEGATIVE_STREAM = CONFIG_PROBLEMS[BAD_STREAM]


@functools.lru_cache(maxsize=None)
def jitted_call(fn, method=False):
    """An ``@njit`` function calling *fn* (a function with a nopython
    overload), or with *method* the method named *fn* of its first argument:
    how the Python forms run the nopython ones."""
    if method:
        def call_method(obj, *args):
            return getattr(obj, fn)(*args)
        return njit(call_method)

    def call(*args):
        return fn(*args)
    return njit(call)


def check_status(status, operation, detail=""):
    """Raise ``CudaError(status, operation, detail)`` unless *status* is 0.
    The Python forms raise here, not in compiled code, which would keep the
    references it held (numba#1549): an event passed in would never be
    released."""
    status = int(status)
    if status != 0:
        raise CudaError(status, operation, detail)


def query_result(status, operation):
    """True when completed, False while pending, else raise."""
    if status == CUDA_ERROR_NOT_READY:
        return False
    check_status(status, operation)
    return True


def check_stream(where, ty):
    """Refuse at typing anything that is not a stream."""
    if not isinstance(ty, types.Type) or isinstance(ty, types.Omitted) or is_stream_type(ty):
        return  # left out (the default value itself, or Omitted) or a stream
    raise NopythonUsageError(
        "%s: the stream must be a numba-cuda Stream, a CUstream (voidptr or integer, "
        "0 for the default stream) or None; got %s" % (where, ty))


def emit_stream(context, builder, ty, val):
    """The raw ``CUstream`` (``i8*``) of a stream argument, omitted or not."""
    if isinstance(ty, types.Omitted):
        return ir.Constant(ir.IntType(8).as_pointer(), None)
    return stream_value(context, builder, ty, val)


def emit_unless_refused(context, builder, ret, refused, emit):
    """``emit()``, a value of Numba type *ret* (a ``CUresult``, or a tuple
    ``(status, reason, ...)``), unless *refused* (an ``i1``: the stream is a
    negative integer) holds; then ``CUDA_ERROR_INVALID_VALUE`` with reason
    :data:`STREAM_REFUSED` (the other items NULL), and what *emit* emits (a
    driver call) does not run."""
    status = context.get_constant(types.int32, CUDA_ERROR_INVALID_VALUE)
    instead = status if not isinstance(ret, types.BaseTuple) else context.make_tuple(
        builder, ret, [status, context.get_constant(types.int32, STREAM_REFUSED)]
        + [context.get_constant_null(ty) for ty in ret.types[2:]])
    out = cgutils.alloca_once_value(builder, instead)
    with builder.if_then(builder.not_(refused), likely=True):
        builder.store(emit(), out)
    return builder.load(out)


_STATUS_REASON = types.UniTuple(types.int32, 2)


def emit_on_stream(context, builder, ty, val, emit):
    """``(status, reason)``: ``emit(raw CUstream)``'s ``CUresult`` for the
    stream argument *val* of type *ty* (omitted or not) and reason 0; for a
    negative integer stream, as :func:`emit_unless_refused` refuses it."""
    negative = cgutils.false_bit if isinstance(ty, types.Omitted) else \
        negative_stream(builder, ty, val)
    pair = emit_unless_refused(context, builder, _STATUS_REASON, negative, lambda: (
        context.make_tuple(builder, _STATUS_REASON, [
            emit(emit_stream(context, builder, ty, val)), ir.Constant(_i32, 0)])))
    return cgutils.unpack_tuple(builder, pair)


# -- what compiled code calls ------------------------------------------------

def status_intrinsic(emit, *values):
    """An intrinsic ``f(*x) -> CUresult``: the backend's runtime emitter
    named *emit* (``emit(builder, *v)``), each ``v`` read from its ``x`` by
    its *values* function ``(context, builder, type, x)``."""
    @intrinsic
    def call(typingctx, *xs):
        def codegen(context, builder, sig, args):
            record_driver_calls(context)
            vs = [value(context, builder, ty, x) for value, ty, x
                  in zip(values, xs, cgutils.unpack_tuple(builder, args[0]))]
            return getattr(BACKEND.runtime(context), emit)(builder, *vs)
        return types.int32(types.StarArgTuple.from_types(xs)), codegen
    return call


def stream_intrinsic(emit):
    """An intrinsic ``f(stream) -> (CUresult, reason)``: the backend's
    runtime emitter named *emit* (``emit(builder, raw CUstream)``), as
    :func:`emit_on_stream` calls it."""
    @intrinsic
    def call(typingctx, stream):
        def codegen(context, builder, sig, args):
            record_driver_calls(context)
            runtime = BACKEND.runtime(context)
            return context.make_tuple(builder, sig.return_type, emit_on_stream(
                context, builder, sig.args[0], args[0],
                lambda raw: getattr(runtime, emit)(builder, raw)))
        return _STATUS_REASON(stream), codegen
    return call


_context_synchronize = status_intrinsic("emit_context_synchronize")
_stream_synchronize = stream_intrinsic("emit_stream_synchronize")
_stream_query = stream_intrinsic("emit_stream_query")


# -- the public functions ----------------------------------------------------

def synchronize() -> None:
    """Wait until all work of this thread's CUDA context (device 0's primary
    context if it has none) has completed (``cuCtxSynchronize``). Raises
    :class:`~numba_cuda_launch.CudaError` on failure."""
    check_status(synchronize_status(), "cuCtxSynchronize")


def synchronize_status() -> int:
    """:func:`synchronize`, returning the ``CUresult`` instead of raising."""
    return jitted_call(synchronize_status)()


def stream_synchronize(stream: Stream = 0) -> None:
    """Wait until all work queued on *stream* has completed
    (``cuStreamSynchronize``). Raises :class:`~numba_cuda_launch.CudaError`
    on failure."""
    check_status(stream_synchronize_status(stream), "cuStreamSynchronize")


def stream_synchronize_status(stream: Stream = 0) -> int:
    """:func:`stream_synchronize`, returning the ``CUresult``."""
    return jitted_call(stream_synchronize_status)(python_stream(stream))


def stream_query(stream: Stream = 0) -> bool:
    """True when all work queued on *stream* has completed, False while some
    is pending (``cuStreamQuery``). Raises
    :class:`~numba_cuda_launch.CudaError` on any other result."""
    return query_result(stream_query_status(stream), "cuStreamQuery")


def stream_query_status(stream: Stream = 0) -> int:
    """``cuStreamQuery``'s ``CUresult``: 0 when all work on *stream* has
    completed, ``CUDA_ERROR_NOT_READY`` (600) while some is pending."""
    return jitted_call(stream_query_status)(python_stream(stream))


@functools.lru_cache(maxsize=None)
def status_check(operation, query=False):
    """An ``@njit`` ``check(status, reason=0)`` raising ``CudaError(status,
    operation)`` unless *status* is 0 (saying why for reason
    :data:`STREAM_REFUSED`); with *query*, one letting
    ``CUDA_ERROR_NOT_READY`` through too and answering True for 0, False for it."""
    raise_error = raiser(CudaError, (operation,),
                         ((STREAM_REFUSED, (operation, NEGATIVE_STREAM)),))
    if query:
        def check(status, reason=0):
            if status != 0 and status != CUDA_ERROR_NOT_READY:
                raise_error(status, reason)
            return status == 0
    else:
        def check(status, reason=0):
            if status != 0:
                raise_error(status, reason)
    return njit(check)


@overload(synchronize, target="cpu")
def _ov_synchronize():
    check = status_check("cuCtxSynchronize")
    return lambda: check(_context_synchronize())


@overload(synchronize_status, target="cpu")
def _ov_synchronize_status():
    return lambda: _context_synchronize()


def _overload_stream_forms(plain, status_form, intrinsic_fn, operation, query=False):
    """Overload *plain* (raising; with *query*, answering True/False) and
    *status_form* (the ``CUresult``), both ``f(stream=0)``."""
    check = status_check(operation, query)

    @overload(plain, target="cpu")
    def _plain(stream=0):
        check_stream("numba_cuda_launch.%s()" % plain.__name__, stream)

        def impl(stream=0):
            status, reason = intrinsic_fn(stream)
            return check(status, reason)
        return impl

    @overload(status_form, target="cpu")
    def _status(stream=0):
        check_stream("numba_cuda_launch.%s()" % status_form.__name__, stream)
        return lambda stream=0: intrinsic_fn(stream)[0]


_overload_stream_forms(stream_synchronize, stream_synchronize_status, _stream_synchronize,
                       "cuStreamSynchronize")
_overload_stream_forms(stream_query, stream_query_status, _stream_query, "cuStreamQuery",
                       query=True)


def _stream_method(fn):
    """The overload of a Stream method calling module function *fn*."""
    return lambda stream: (lambda stream: fn(stream))


# The same as methods of a Stream passed in.
for _fn in (stream_synchronize, stream_synchronize_status, stream_query, stream_query_status):
    overload_method(CUDAStream, _fn.__name__[len("stream_"):], target="cpu")(_stream_method(_fn))
