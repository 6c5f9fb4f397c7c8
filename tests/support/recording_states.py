"""Recordings ended, aborted or begun in the wrong state, shared by the
recording driver's tests (tests/test_conditional_cpu.py), the simulator's
(tests/sim/test_sim_conditional.py) and the GPU's
(tests/test_conditional_gpu.py): each returns what the package answered
and leaves nothing recording when it succeeds. ``x`` is an int64 array of
4 given by its address (device memory on a GPU); ``add`` adds to its
first item."""

import numba
import numpy as np
from numba import cuda, njit

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs

ILLEGAL_STATE, INVALID_VALUE = 401, 1


@njit
def view(xp):
    return numba.carray(ncl.as_voidptr(xp), (4,), np.int64)


@cuda.jit
def add(x, v):
    if cuda.grid(1) == 0:
        x[0] += v


@njit
def if_body_begun(x, stream, body):
    """A recording on *stream* of an IF node (handle default 1) whose body,
    begun on *body*, holds one add of 1: the node."""
    graphs.begin_capture(stream)
    node = graphs.add_if(stream, graphs.conditional_handle(stream, 1))
    graphs.begin_body(body, node)
    add[1, 1, body](x, 1)
    return node


@njit
def executable(stream):
    """End the recording on *stream*: its executable graph (the graph destroyed)."""
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe


@njit
def end_body_of_a_graph(xp, stream):
    """end_body on a stream recording a graph: its status, then the graph
    (the recording went on: the launch is in it)."""
    x = view(xp)
    graphs.begin_capture(stream)
    add[1, 1, stream](x, 1)
    refused = graphs.end_body_status(stream)
    return refused, graphs.end_capture(stream)


@njit
def end_capture_of_a_body(xp, stream, body):
    """end_capture on a stream recording a body: ``(status, executable
    graph)``; the body was ended with end_body after the refusal: the
    graph adds 1 (its IF body runs once)."""
    x = view(xp)
    node = if_body_begun(x, stream, body)
    refused = graphs.end_capture_status(body)[0]
    graphs.end_body(body)
    exe = executable(stream)
    return refused, exe


@njit
def abort_a_body(xp, stream, body):
    """A body recorded, aborted (status returned), recorded again with
    another launch: the executable graph adds 10, not 11."""
    x = view(xp)
    node = if_body_begun(x, stream, body)
    aborted = graphs.abort_capture(body)
    graphs.begin_body(body, node)
    add[1, 1, body](x, 10)
    graphs.end_body(body)
    exe = executable(stream)
    return aborted, exe


@njit
def record_a_body_twice(xp, stream, body):
    """begin_body of a body recorded already: its status."""
    x = view(xp)
    node = if_body_begun(x, stream, body)
    graphs.end_body(body)
    again = graphs.begin_body_status(body, node)
    graphs.abort_capture(stream)
    return again


@cuda.jit
def add_and_stop(x, v, handle):
    if cuda.grid(1) == 0:
        x[0] += v
        graphs.set_conditional(handle, 0)


@njit
def empty_while(xp, stream, body, inner, nested):
    """A WHILE node whose body is empty (*nested*: inside an IF body, whose
    body stream *inner* records):
    the refused end's status; then the body is recorded (one add of 1 that
    stops the loop), the recording ends and its executable graph is
    returned."""
    x = view(xp)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    if nested:
        outer = graphs.add_if(stream, h)
        graphs.begin_body(inner, outer)
        h2 = graphs.conditional_handle(inner, 1)
        loop = graphs.add_while(inner, h2)
        refused = graphs.end_body_status(inner)
        graphs.begin_body(body, loop)
        add_and_stop[1, 1, body](x, 1, h2)
        graphs.end_body(body)
        graphs.end_body(inner)
    else:
        loop = graphs.add_while(stream, h)
        refused = graphs.end_capture_status(stream)[0]
        graphs.begin_body(body, loop)
        add_and_stop[1, 1, body](x, 1, h)
        graphs.end_body(body)
    exe = executable(stream)
    return refused, exe


@cuda.jit
def count_and_stop(x, handle):
    """x[1] += 1 and the loop of *handle* stops."""
    if cuda.grid(1) == 0:
        x[1] += 1
        graphs.set_conditional(handle, 0)


@cuda.jit
def count_down_outer(x, handle):
    """x[0] -= 1; the loop of *handle* stops when it reaches 0."""
    if cuda.grid(1) == 0:
        x[0] -= 1
        if x[0] <= 0:
            graphs.set_conditional(handle, 0)


@njit
def default_in_body(xp, stream, b1, b2):
    """A WHILE loop of x[0] iterations whose body makes a handle of default
    1 (assign_default) for an inner WHILE loop that runs once and stops:
    after one launch x[1] is 1 if the default is applied at the start of
    each graph launch (CUDA's documentation of CU_GRAPH_COND_ASSIGN_DEFAULT),
    x[0] at the start of each run of the body."""
    x = view(xp)
    graphs.begin_capture(stream)
    outer = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, outer)
    graphs.begin_body(b1, loop)
    inner = graphs.conditional_handle(b1, 1)
    inner_loop = graphs.add_while(b1, inner)
    graphs.begin_body(b2, inner_loop)
    count_and_stop[1, 1, b2](x, inner)
    graphs.end_body(b2)
    count_down_outer[1, 1, b1](x, outer)
    graphs.end_body(b1)
    exe = executable(stream)
    return exe
