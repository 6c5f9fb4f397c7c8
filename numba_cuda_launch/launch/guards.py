"""The checks compiled code makes before a launch configuration reaches the
driver, for launches, occupancy queries and graph updates: a failed one
refuses with a status and a sentence, never a changed value; inlined IR (a
few compares per launch). See docs/reliability.md.
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_VALUE
from numba_cuda_launch.launch.launchconfig import CONFIG_PROBLEMS, cluster_dims, launch_dims
from numba_cuda_launch.cudadrv.graph import emit_kernel_node_attribute
from numba_cuda_launch.cudadrv.launchex import ATTRIBUTE_CLUSTER_DIMENSION, ATTRIBUTE_COOPERATIVE

__all__ = ["Guards", "check_config", "block_threads", "check_block_threads",
           "check_node_update", "TOO_MANY_THREADS"]

_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_INT32_MAX = 2**31 - 1
TOO_MANY_THREADS = "blockdim has more than 2**31-1 threads in all"


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
        if self.fixed:
            return self.messages.index(message)
        self.messages.append(message)
        return len(self.messages) - 1

    def _refuse_if(self, bad, status, message, otherwise=None):
        builder = self.builder
        reason = ir.Constant(_i32, self._index(message))
        other = otherwise and (otherwise[0], ir.Constant(_i32, self._index(otherwise[1])))
        with builder.if_then(bad, likely=False):
            builder.store(status, self.status)
            if other:  # chosen on the failure path only
                reason = builder.select(other[0](), other[1], reason)
            builder.store(reason, self.reason)

    def check(self, emit_bad, message, otherwise=None):
        """Run *emit_bad* (emits an ``i1``, true when the operation must be
        refused) unless an earlier check failed. *otherwise*: ``(emit_cond,
        message)``, the sentence given instead when ``emit_cond()`` (emitted
        only once refused) holds."""
        with self.builder.if_then(self.ok()):
            self._refuse_if(emit_bad(), ir.Constant(_i32, CUDA_ERROR_INVALID_VALUE), message,
                            otherwise)

    def check_status(self, emit_status, message):
        """Run *emit_status* (emits a ``CUresult``, nonzero when the
        operation must be refused with it) unless an earlier check failed."""
        builder = self.builder
        with builder.if_then(self.ok()):
            status = emit_status()
            self._refuse_if(builder.icmp_signed("!=", status, status.type(0)), status, message)

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


def check_config(builder, guards, cfg):
    """Refuse a configuration with an item out of the driver's range (found
    when it was made: its ``problem`` field)."""
    for problem, text in CONFIG_PROBLEMS.items():
        guards.check(lambda p=problem: builder.icmp_signed(
            "==", cfg.problem, ir.Constant(_i32, p)), text)


def block_threads(builder, cfg):
    """``(threads, ok)``: threads per block as ``i32`` and whether there are
    at most 2**31-1 (the driver's ``int``). The product saturates after each
    factor, so it cannot wrap: each factor is below 2**32 and the running
    product below 2**31, their product below 2**63."""
    limit = ir.Constant(_i64, _INT32_MAX + 1)
    total = ir.Constant(_i64, 1)
    for d in launch_dims(builder, cfg)[3:]:
        total = builder.mul(total, builder.zext(d, _i64))
        total = builder.select(builder.icmp_unsigned(">", total, limit), limit, total)
    return builder.trunc(total, _i32), builder.icmp_unsigned("<", total, limit)


def check_block_threads(builder, guards, cfg):
    """Refuse a block of more than 2**31-1 threads."""
    guards.check(lambda: builder.not_(block_threads(builder, cfg)[1]), TOO_MANY_THREADS)


def _node_attribute(builder, guards, node, attr, count, what):
    """Ask the driver for attribute *attr* of kernel node *node*; returns
    slots holding the *count* values (zero when the query failed)."""
    slots = [cgutils.alloca_once_value(builder, ir.Constant(_i32, 0)) for _ in range(count)]

    def query():
        status, values = emit_kernel_node_attribute(builder, node, attr, count)
        for slot, v in zip(slots, values):
            builder.store(v, slot)
        return status
    guards.check_status(query, "cuGraphKernelNodeGetAttribute could not read the node's %s"
                        % what)
    return [builder.load(s) for s in slots]


def check_node_update(builder, guards, cfg, node, cooperative):
    """Refuse an update of kernel node *node* that its replay would not
    launch as a launch of *cfg* would: a grid-sync (*cooperative*) kernel
    in a node recorded from a plain launch, a cluster other than the node's
    (an update cannot change it), a grid that is not made of whole clusters
    of the node's cluster."""
    if cooperative:
        coop, = _node_attribute(builder, guards, node, ATTRIBUTE_COOPERATIVE, 1,
                                "cooperative attribute")
        guards.check(lambda: builder.icmp_unsigned("==", coop, ir.Constant(_i32, 0)),
                     "the kernel synchronises its grid (a cooperative launch), but the node "
                     "was recorded from a plain launch and its replay would not be "
                     "cooperative: record the node with this kernel (or another "
                     "grid-sync kernel)")
    # A node without a cluster reads as (0, 0, 0): a cluster of 1, none.
    recorded = [builder.select(builder.icmp_unsigned("==", c, c.type(0)), c.type(1), c)
                for c in _node_attribute(builder, guards, node, ATTRIBUTE_CLUSTER_DIMENSION, 3,
                                         "cluster dimensions")]
    has_cluster, cluster = cluster_dims(builder, cfg)
    guards.check(lambda: builder.and_(has_cluster, _any(builder, "!=", cluster, recorded)),
                 "the cluster differs from the one the node was recorded with; an update "
                 "cannot change a node's cluster (record the launch with this cluster)")
    grid = launch_dims(builder, cfg)[:3]
    guards.check(lambda: _any(builder, "!=", [builder.urem(g, c) for g, c in zip(grid, recorded)],
                              [g.type(0) for g in grid]),
                 "griddim is not a multiple of the cluster dimensions the node was recorded "
                 "with in every direction (the grid is made of whole clusters)")


def _any(builder, op, lhs, rhs):
    """An ``i1``: some pair of *lhs* and *rhs* compares *op* (unsigned)."""
    out = cgutils.false_bit
    for a, b in zip(lhs, rhs):
        out = builder.or_(out, builder.icmp_unsigned(op, a, b))
    return out
