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
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    node = graphs.add_if(stream, h)
    graphs.begin_body(body, node)
    add[1, 1, body](x, 1)
    refused = graphs.end_capture_status(body)[0]
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return refused, exe


@njit
def abort_a_body(xp, stream, body):
    """A body recorded, aborted (status returned), recorded again with
    another launch: the executable graph adds 10, not 11."""
    x = view(xp)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    node = graphs.add_if(stream, h)
    graphs.begin_body(body, node)
    add[1, 1, body](x, 1)
    aborted = graphs.abort_capture(body)
    graphs.begin_body(body, node)
    add[1, 1, body](x, 10)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return aborted, exe


@njit
def record_a_body_twice(xp, stream, body):
    """begin_body of a body recorded already: its status."""
    x = view(xp)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    node = graphs.add_if(stream, h)
    graphs.begin_body(body, node)
    add[1, 1, body](x, 1)
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
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return refused, exe
