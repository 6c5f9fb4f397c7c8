"""How the package refuses what it cannot do, in one place. At typing:
templates whose refusal's first line (a
:class:`~numba_cuda_launch.errors.NopythonUsageError`) goes before Numba's
``Failed in nopython mode pipeline`` header, and sentences of the package's
for some lines of Numba's own text (installed through
``compat/numba_dispatcher.py``). In compiled code: the checks made before an
operation reaches the driver (launches, occupancy queries, graph updates),
each refusing with a status and a sentence, never a changed value (inlined
IR, a few compares per launch); and raising the package's exceptions, one
factory: a failed operation raises in an ``@njit`` function of its own
(:func:`raiser`), since numba 0.68 mishandles a dynamic exception raised in
a ``@cfunc``'s body or a ``compile_internal`` subroutine but handles one
propagated from a called dispatcher. README.md, "Errors"; docs/reliability.md.
"""

import functools
import re

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.core.typing.templates import AbstractTemplate, infer, infer_global
from numba.extending import intrinsic

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_VALUE, recent_headlines

__all__ = ["register_typer", "explain_lines", "leading_line", "Guards", "block_threads",
           "check_block_threads", "TOO_MANY_THREADS", "LIMITS", "BLOCK_THREADS_MAX", "raiser",
           "emit_raise_if_failed", "call_jitted"]

_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_INT32_MAX = 2**31 - 1
# CUDA's launch limits, the same on every device since compute capability 3.0:
# (x, y, z) maxima and how messages state them.
LIMITS = {
    "griddim": ((2**31 - 1, 65535, 65535), "1..2**31-1 in x and 1..65535 in y and z"),
    "blockdim": ((1024, 1024, 64), "1..1024 in x and y and 1..64 in z"),
    "cluster": ((0xFFFFFFFF,) * 3, "1..2**32-1"),
}
BLOCK_THREADS_MAX = 1024
TOO_MANY_THREADS = "blockdim has more than 2**31-1 threads in all"
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_QUOTED = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*Error: (.*)$")


# -- at typing ----------------------------------------------------------------------

def register_typer(key, typer, refusal, first):
    """Type *key* (``operator.getitem``, say) in CPU code with
    ``typer(context, args, kws)`` when the first argument is of a type class
    in *first*: a signature, None for arguments that are not the package's,
    or *refusal* (a :class:`NopythonUsageError` class) raised with the
    reason. It makes two templates: a global one typing what *typer*
    accepts, and a builtin one (``infer``) raising the refusal. Numba tries
    builtin templates only after every global candidate failed and lets
    their errors through as they are, so the user reads the package's
    sentence rather than one entry in a list of two dozen candidates."""

    class Accepted(AbstractTemplate):
        metadata = {"target": "cpu"}

        def generic(self, args, kws):
            if not args or not isinstance(args[0], first):
                return None  # every other call of *key* in CPU code: one check
            try:
                return typer(self.context, args, kws)
            except refusal:
                return None

    class Refused(AbstractTemplate):
        metadata = {"target": "cpu"}

        def generic(self, args, kws):
            if not args or not isinstance(args[0], first):
                return None
            return typer(self.context, args, kws)

    Refused.key = key
    infer_global(key)(Accepted)
    infer(Refused)


_LINE_RULES = []  # fn(line without colours) -> the sentence to lead with, or None


def explain_lines(rule):
    """Register ``rule(line) -> sentence or None``: a line of Numba's own
    error text (``Unknown attribute 'T' of type DeviceArray(...)``, say)
    for which the package has a better sentence, put first by
    :func:`leading_line`. For refusals that must not be raised from a
    template, where they would hide what other templates do."""
    _LINE_RULES.append(rule)
    return rule


_REJECTED = "Rejected as the implementation raised a specific error:"


def _quoted_errors(plain):
    """The errors Numba quotes in its list of candidates (the line after
    each "Rejected as the implementation raised a specific error:")."""
    out = []
    for i, text in enumerate(plain[:-1]):
        if text == _REJECTED:
            out.append(next((t for t in plain[i + 1:] if t), ""))
    return out


def leading_line(lines):
    """What should lead an error message (*lines*, a list of str):
    ``(index, text)``: *text* (without terminal colours) goes first and line
    *index* is dropped, or kept where *index* is None; None: nothing to do.
    The text is the first line of a :class:`NopythonUsageError` (or
    :class:`NopythonUnsupportedError`) made lately, found in the message:
    as a line of its own, or quoted (``NopythonUsageError: <line>``) in
    Numba's list of candidates unless another candidate accepted the types
    and failed in its body; else the sentence of a rule
    (:func:`explain_lines`) for a line of Numba's."""
    plain = [_COLOUR.sub("", line).strip() for line in lines]
    made = recent_headlines()
    # A candidate that accepted the types and failed in its body (Numba
    # quotes "Failed in nopython mode pipeline") is what the user needs to
    # read: the package's refusal does not lead then.
    quoted = [_QUOTED.match(text) for text in _quoted_errors(plain)]
    others_failed_inside = any(m and m.group(1) not in made and m.group(1).startswith("Failed in ")
                               for m in quoted)
    for i, text in enumerate(plain):
        if text in made:
            return (i, text) if i else None
        if not others_failed_inside:
            m = _QUOTED.match(text)
            if m and m.group(1) in made:
                return None, m.group(1)
    if others_failed_inside:
        return None
    for text in plain:
        for rule in _LINE_RULES:
            sentence = rule(text)
            if sentence:
                return (None, sentence) if plain[0] != sentence else None
    return None


# -- before the driver -------------------------------------------------------------

class Guards:
    """The checks made before an operation reaches the driver, each with
    the message the raising form reports. The first failed check wins: it
    sets the status (``CUDA_ERROR_INVALID_VALUE``, or the status a failed
    query returned) and the reason, and later checks are skipped."""

    def __init__(self, builder, messages=None):
        self.builder = builder
        self.status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
        self.reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
        # reason 0: no message (the driver's own error). Operations with a
        # raiser made in advance give their sentences, in reason order.
        self.fixed = messages is not None
        self.messages = [""] + list(messages or ())

    def _index(self, message):
        """The reason of *message*: its index in :attr:`messages`."""
        if self.fixed:
            return self.messages.index(message)
        self.messages.append(message)
        return len(self.messages) - 1

    def check(self, emit_bad, message, otherwise=None):
        """Run *emit_bad* (emits an ``i1``, true when the operation must be
        refused) unless an earlier check failed. *otherwise*: ``(emit_cond,
        message)``, the sentence given instead when ``emit_cond()`` (emitted
        only once refused) holds."""
        builder = self.builder
        reason = ir.Constant(_i32, self._index(message))
        other = otherwise and (otherwise[0], ir.Constant(_i32, self._index(otherwise[1])))
        ok = builder.icmp_signed("==", builder.load(self.status), ir.Constant(_i32, 0))
        with builder.if_then(ok):
            with builder.if_then(emit_bad(), likely=False):
                builder.store(ir.Constant(_i32, CUDA_ERROR_INVALID_VALUE), self.status)
                if other:  # chosen on the failure path only
                    reason = builder.select(other[0](), other[1], reason)
                builder.store(reason, self.reason)

    def refuse_if(self, bad, message, otherwise=None):
        """Refuse when *bad* (an ``i1`` emitted already) holds, unless an
        earlier check failed; *otherwise*: ``(cond, message)``, the sentence
        given instead when ``cond`` (an ``i1``) holds."""
        builder = self.builder
        reason = ir.Constant(_i32, self._index(message))
        if otherwise:
            reason = builder.select(otherwise[0], ir.Constant(_i32, self._index(otherwise[1])),
                                    reason)
        ok = builder.icmp_signed("==", builder.load(self.status), ir.Constant(_i32, 0))
        with builder.if_then(builder.and_(ok, bad), likely=False):
            builder.store(ir.Constant(_i32, CUDA_ERROR_INVALID_VALUE), self.status)
            builder.store(reason, self.reason)

    def check_code(self, code, messages):
        """Refuse when *code* (an ``i32``) is a key of *messages* (``{code:
        sentence}``) with that sentence, unless an earlier check failed."""
        builder = self.builder
        reason = ir.Constant(_i32, 0)
        refused = cgutils.false_bit
        for value, message in messages.items():
            if self.fixed:
                index = self.messages.index(message)
            else:
                self.messages.append(message)
                index = len(self.messages) - 1
            hit = builder.icmp_signed("==", code, ir.Constant(_i32, value))
            reason = builder.select(hit, ir.Constant(_i32, index), reason)
            refused = builder.or_(refused, hit)
        ok = builder.icmp_signed("==", builder.load(self.status), ir.Constant(_i32, 0))
        with builder.if_then(builder.and_(ok, refused), likely=False):
            builder.store(ir.Constant(_i32, CUDA_ERROR_INVALID_VALUE), self.status)
            builder.store(reason, self.reason)

    def check_status(self, emit_status, message):
        """Run *emit_status* (emits a ``CUresult``, nonzero when the
        operation must be refused with it) unless an earlier check failed."""
        builder = self.builder
        reason = ir.Constant(_i32, self._index(message))
        ok = builder.icmp_signed("==", builder.load(self.status), ir.Constant(_i32, 0))
        with builder.if_then(ok):
            status = emit_status()
            with builder.if_then(builder.icmp_signed("!=", status, status.type(0)),
                                 likely=False):
                builder.store(status, self.status)
                builder.store(reason, self.reason)

    def explain(self, emit_cond, message):
        """Give a failure the driver reported (no reason yet) the sentence
        *message* when *emit_cond* (emits an ``i1``) holds."""
        builder = self.builder
        index = self._index(message)
        unexplained = builder.and_(builder.not_(self.ok()), builder.icmp_signed(
            "==", builder.load(self.reason), ir.Constant(_i32, 0)))
        with builder.if_then(unexplained, likely=False):
            with builder.if_then(emit_cond()):
                builder.store(ir.Constant(_i32, index), self.reason)

    def ok(self):
        """An ``i1``: no check failed so far."""
        return self.builder.icmp_signed("==", self.builder.load(self.status),
                                        ir.Constant(_i32, 0))

    def result(self):
        """``(status, reason, messages)``: the ``CUresult``, the index in
        *messages* of the sentence saying why (0: none) and the sentences."""
        builder = self.builder
        return builder.load(self.status), builder.load(self.reason), tuple(self.messages)


def block_threads(builder, cfg):
    """``(threads, ok)``: threads per block as ``i32`` and whether there are
    at most 2**31-1 (the driver's ``int``). The product saturates after each
    factor, so it cannot wrap: each factor is below 2**32 and the running
    product below 2**31, their product below 2**63."""
    limit = ir.Constant(_i64, _INT32_MAX + 1)
    total = ir.Constant(_i64, 1)
    for d in cfg.dims[3:]:
        total = builder.mul(total, builder.zext(d, _i64))
        total = builder.select(builder.icmp_unsigned(">", total, limit), limit, total)
    return builder.trunc(total, _i32), builder.icmp_unsigned("<", total, limit)


def check_block_threads(builder, guards, cfg):
    """Refuse a block of more than 2**31-1 threads."""
    guards.check(lambda: builder.not_(block_threads(builder, cfg)[1]), TOO_MANY_THREADS)


# -- raising ------------------------------------------------------------------------

def call_jitted(context, builder, dispatcher, argtypes, args):
    """Emit a call of an ``@njit`` *dispatcher* from lowering code (its errors
    propagate to the caller, as for any call of a jitted function)."""
    fnty = context.typing_context.resolve_value_type(dispatcher)
    sig = fnty.get_call_type(context.typing_context, tuple(argtypes), {})
    return context.get_function(fnty, sig)(builder, args)


@functools.lru_cache(maxsize=None)
def raiser(exc_class, default, cases=()):
    """An ``@njit`` ``raise_error(status, reason)`` raising
    ``exc_class(status, *args)``: *args* is the tuple paired with *reason*
    in *cases* (pairs ``(reason, args)``), else *default*. Each tuple holds
    constants; *status* is the run-time ``CUresult``."""

    @intrinsic
    def _raise(typingctx, status, reason):
        def codegen(context, builder, sig, args):
            status_val = context.cast(builder, args[0], sig.args[0], types.int64)
            reason_val = context.cast(builder, args[1], sig.args[1], types.int64)
            branches = [(builder.icmp_signed("==", reason_val, ir.Constant(reason_val.type, r)),
                         extra) for r, extra in cases]
            for taken, extra in branches + [(cgutils.true_bit, default)]:
                with builder.if_then(taken, likely=False):
                    context.call_conv.return_dynamic_user_exc(
                        builder, exc_class, (status_val,) + tuple(extra),
                        (types.int64,) + (None,) * len(extra))
            return context.get_dummy_value()
        return types.none(status, reason), codegen

    def raise_error(status, reason):
        _raise(status, reason)
    return njit(raise_error)


def emit_raise_if_failed(context, builder, raise_error, status, reason):
    """Emit: if *status* (an ``i32`` ``CUresult``) is not 0, call
    *raise_error* (a :func:`raiser`) with it and *reason* (``i32``)."""
    failed = builder.icmp_signed("!=", status, ir.Constant(status.type, 0))
    with cgutils.if_unlikely(builder, failed):
        call_jitted(context, builder, raise_error, (types.int32, types.int32), [status, reason])
