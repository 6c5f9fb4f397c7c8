"""Kernels and recorders shared by the conditional-node tests on a GPU and
under the simulator (and ci/gpu_conditional_probe.py, tests/test_devices_gpu.py):
a counter that stops its WHILE loop, one that re-arms an inner loop, a
WHILE loop nested in another, a WHILE loop halving an array until no
element is above a tolerance, and NumPy's count of that loop."""

import numpy as np
from numba import cuda, njit

from numba_cuda_launch import graphs

TPB = 128


@cuda.jit
def count_down(c, handle):
    """c[0] -= 1, c[1] += 1; the loop stops when c[0] reaches 0."""
    if cuda.grid(1) == 0:
        c[0] -= 1
        c[1] += 1
        if c[0] <= 0:
            graphs.set_conditional(handle, 0)


@cuda.jit
def rearm(c, handle, n):
    """c[2] = n and the loop of *handle* goes round (again)."""
    if cuda.grid(1) == 0:
        c[2] = n
        graphs.set_conditional(handle, 1)


@njit
def record_nested(c, inner, stream, b1, b2):
    """The executable graph of a WHILE loop of c[0] iterations, each running
    an inner WHILE loop of *inner* iterations (its handle made in the outer
    body): afterwards c == [0, outer, 0, outer * inner]."""
    graphs.begin_capture(stream)
    outer = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, outer)
    graphs.begin_body(b1, loop)
    h = graphs.conditional_handle(b1, 0)
    rearm[1, 1, b1](c, h, inner)
    inner_loop = graphs.add_while(b1, h)
    graphs.begin_body(b2, inner_loop)
    count_down[1, 1, b2](c[2:], h)
    graphs.end_body(b2)
    count_down[1, 1, b1](c, outer)
    graphs.end_body(b1)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe


def halvings(x, tol):
    """NumPy's result and iteration count of a loop that halves *x* until
    no element is above *tol* in magnitude (float32 arithmetic)."""
    x, n = x.copy(), 0
    while True:
        x = x / np.float32(2)
        n += 1
        if not (np.abs(x) > tol).any():
            return x, n


@cuda.jit
def clear(handle):
    if cuda.grid(1) == 0:
        graphs.set_conditional(handle, 0)  # stop, unless a point says otherwise


@cuda.jit
def halve(x, tol, handle, count):
    i = cuda.grid(1)
    if i == 0:
        count[0] += 1
    if i < x.size:
        x[i] = x[i] / np.float32(2)
        if abs(x[i]) > tol:
            graphs.set_conditional(handle, 1)


@njit
def record_halving(x, count, tol, stream, body):
    g = (x.size + TPB - 1) // TPB
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, h)
    graphs.begin_body(body, loop)
    clear[1, 1, body](h)
    halve[g, TPB, body](x, tol, h, count)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe
