"""Conditional graph nodes under numba-cuda's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1): a WHILE body runs until a kernel sets its
condition to 0 (at most NUMBA_CUDA_LAUNCH_SIM_WHILE_LIMIT times, then the
launch fails saying so), IF runs once or not, IF/ELSE and SWITCH pick
their body, nested loops, updates inside bodies. Results are checked
against NumPy on fresh random inputs with outputs poisoned first.
Started by tests/test_simulator.py."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from numba_cuda_launch.launch.backends import simgraph
from support import recording_states as states
from support.conditional_kernels import halvings, record_nested
from support.kernels import dependent_step as step, dependent_steps

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
rng = np.random.default_rng()
N = 16


@njit
def f32(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


@njit
def i64(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.int64)


@cuda.jit
def halve(x, count, tol, handle):
    """x /= 2; the condition is 0 once every |x| is at most tol."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] / np.float32(2)
    cuda.syncthreads()
    if i == 0:
        count[0] += 1
        big = False
        for k in range(x.size):
            if abs(x[k]) > tol:
                big = True
        graphs.set_conditional(handle, big)


@cuda.jit
def add(x, v):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += v


@cuda.jit
def set_value(handle, v):
    if cuda.grid(1) == 0:
        graphs.set_conditional(handle, v)


@njit
def record_halving(xp, cp, n, tol, stream, body):
    x, count = f32(xp, n), i64(cp, 1)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, h)
    graphs.begin_body(body, loop)
    halve[1, n, body](x, count, tol, h)
    graphs.end_body(body)
    add[1, n, stream](x, np.float32(1))  # after the loop
    return graphs.end_capture(stream).instantiate()


def test_while_runs_until_a_kernel_sets_zero():
    stream, body = cuda.stream(), cuda.stream()
    for _ in range(2):  # two graphs of fresh inputs
        x = (rng.standard_normal(N) * 100).astype(np.float32)
        work, count = x.copy(), np.zeros(1, np.int64)
        tol = np.float32(rng.uniform(0.01, 1))
        exe = record_halving(work.ctypes.data, count.ctypes.data, N, tol, stream, body)
        exe.launch(stream)
        want, iterations = halvings(x, tol)
        assert count[0] == iterations
        np.testing.assert_array_equal(work, want + np.float32(1))  # the add after the loop
        # the default is assigned again at each launch: the loop runs again
        again, more = halvings(work, tol)
        exe.launch(stream)
        assert count[0] == iterations + more
        np.testing.assert_array_equal(work, again + np.float32(1))
        assert exe.destroy() == 0


@njit
def record_branches(xp, n, stream, body, default, cases):
    x = f32(xp, n)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, default)
    node = graphs.add_if(stream, h)
    graphs.begin_body(body, node)
    add[1, n, body](x, np.float32(1))
    graphs.end_body(body)
    node = graphs.add_if_else(stream, h)
    for k in range(2):
        graphs.begin_body(body, node, k)
        add[1, n, body](x, np.float32(10 * (k + 1)))
        graphs.end_body(body)
    sw = graphs.add_switch(stream, h, cases)
    for k in range(cases):
        graphs.begin_body(body, sw, k)
        add[1, n, body](x, np.float32(100 * (k + 1)))
        graphs.end_body(body)
    return graphs.end_capture(stream).instantiate()


@pytest.mark.parametrize("value", [0, 1, 2, 3, 7])
def test_if_if_else_and_switch_pick_their_body(value):
    x = rng.standard_normal(N).astype(np.float32)
    work = x.copy()
    exe = record_branches(work.ctypes.data, N, cuda.stream(), cuda.stream(), value, 3)
    exe.launch(cuda.stream())
    want = x.copy()
    for added in ((1 if value else 0), (10 if value else 20),
                  (100 * (value + 1) if value < 3 else 0)):
        if added:  # one kernel each, in order
            want += np.float32(added)
    np.testing.assert_array_equal(work, want)
    exe.destroy()


@njit
def record_set_then_if(xp, n, stream, body, v):
    x = f32(xp, n)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 0)
    set_value[1, 1, stream](h, v)  # a kernel before the node decides
    node = graphs.add_switch(stream, h, 2)
    for k in range(2):
        graphs.begin_body(body, node, k)
        add[1, n, body](x, np.float32(k + 1))
        graphs.end_body(body)
    return graphs.end_capture(stream).instantiate()


@pytest.mark.parametrize("v, added", [(0, 1), (1, 2), (-1, 0), (2**40, 0)])
def test_a_kernel_before_the_node_sets_it(v, added):
    # values outside 0..2**32-1 are 2**32-1: no SWITCH case
    x = rng.standard_normal(N).astype(np.float32)
    work = x.copy()
    exe = record_set_then_if(work.ctypes.data, N, cuda.stream(), cuda.stream(), v)
    exe.launch(cuda.stream())
    np.testing.assert_array_equal(work, x + np.float32(added) if added else x)
    exe.destroy()


@njit
def record_nested_at(cp, stream, b1, b2, inner):
    return record_nested(i64(cp, 4), inner, stream, b1, b2)


def test_nested_while_loops():
    outer, inner = rng.integers(2, 6, size=2)
    c = np.array([outer, 0, 0, 0], np.int64)
    exe = record_nested_at(c.ctypes.data, cuda.stream(), cuda.stream(), cuda.stream(), inner)
    exe.launch(cuda.stream())
    assert c.tolist() == [0, outer, 0, outer * inner]
    exe.destroy()


@cuda.jit
def tick(c):
    if cuda.grid(1) == 0:
        c[1] += 1


@njit
def record_forever(cp, stream, body):
    c = i64(cp, 2)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, h)
    graphs.begin_body(body, loop)
    tick[1, 1, body](c)  # never sets h
    graphs.end_body(body)
    return graphs.end_capture(stream).instantiate()


def test_while_limit_raises(monkeypatch):
    monkeypatch.setenv(simgraph.WHILE_LIMIT_VARIABLE, "25")
    c = np.zeros(2, np.int64)
    exe = record_forever(c.ctypes.data, cuda.stream(), cuda.stream())
    with pytest.raises(ncl.CudaGraphError) as info:
        exe.launch(cuda.stream())
    assert info.value.name == "CUDA_ERROR_LAUNCH_TIMEOUT"
    assert "NUMBA_CUDA_LAUNCH_SIM_WHILE_LIMIT" in str(info.value)
    assert c[1] == 25  # the body ran exactly the limit
    monkeypatch.setenv(simgraph.WHILE_LIMIT_VARIABLE, "0")
    with pytest.raises(ValueError, match="positive integer"):
        exe.launch(cuda.stream())
    exe.destroy()


@njit
def direct_set(stream):
    # the handle as a plain 64-bit integer: no launch check knows it is one
    return set_value[1, 1, stream].launch_status(np.uint64(0x5000001), 1)


def test_set_conditional_outside_its_graph_fails_the_kernel(capfd):
    assert direct_set(cuda.stream()) == 719  # CUDA_ERROR_LAUNCH_FAILED
    assert "is not being replayed" in capfd.readouterr().err


@njit
def handle_outside(stream):
    set_value[1, 1, stream](graphs.ConditionalHandle(0x5000001), 1)


def test_a_handle_outside_a_recording_is_refused_before_the_kernel_runs():
    # as the recording driver (and a GPU launch) refuses it: the kernel
    # would fault the context on a GPU
    message = (r"launch of CUDA kernel 'set_value' failed: CUDA_ERROR_INVALID_VALUE \(1\): "
               r"parameter 'handle' \(argument 1\) is a ConditionalHandle, and the "
               r"launch's stream records no graph")
    with pytest.raises(ncl.CudaLaunchError, match=message):
        handle_outside(cuda.stream())
    with pytest.raises(ncl.CudaLaunchError, match=message):  # from Python too
        set_value[1, 1, cuda.stream()](graphs.ConditionalHandle(0x5000001), 1)


@njit
def update_inside(xp, n, stream, body, times):
    x = f32(xp, n)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    node = graphs.add_if(stream, h)
    graphs.begin_body(body, node)
    add[1, n, body](x, np.float32(0))
    launch = graphs.last_launch(body)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    for k in range(times):
        exe.update_launch(launch, add[1, n], x, np.float32(k + 1))
        exe.launch(stream)
    exe.destroy()
    return graph.destroy()


def test_update_launch_inside_a_body():
    x = rng.standard_normal(N).astype(np.float32)
    work = x.copy()
    assert update_inside(work.ctypes.data, N, cuda.stream(), cuda.stream(), 3) == 0
    want = x.copy()
    for k in range(3):  # each replay runs the updated launch: + k + 1
        want += np.float32(k + 1)
    np.testing.assert_array_equal(work, want)


@njit
def record_open_body(stream, body):
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream)
    graphs.begin_body(body, graphs.add_if(stream, h))
    return graphs.end_capture_status(stream)[0], graphs.abort_capture(stream)


def test_a_recording_with_a_body_open_does_not_end():
    stream, body = cuda.stream(), cuda.stream()
    assert record_open_body(stream, body) == (904, 904)  # CUDA_ERROR_STREAM_CAPTURE_UNJOINED
    graphs.end_body(body)
    graphs.end_capture(stream).destroy()


def test_one_executable_graph_at_a_time():
    stream, body = cuda.stream(), cuda.stream()
    work, count = np.ones(N, np.float32), np.zeros(1, np.int64)
    exe = record_halving(work.ctypes.data, count.ctypes.data, N, np.float32(0.5), stream, body)
    graph = graphs.Graph(simgraph.STATE.exec_record(exe.handle).graph)
    with pytest.raises(ncl.CudaGraphError, match="one executable graph at a time"):
        graph.instantiate()
    exe.destroy()


# -- dependent launches: the simulator runs launches in order, so a dependent
# launch is a plain one (griddepcontrol does nothing) -------------------------

@njit
def dependent_chain(ap, bp, n, times, stream):
    a, b = f32(ap, n), f32(bp, n)
    status = 0
    for k in range(times):
        src, dst = (a, b) if k % 2 == 0 else (b, a)
        status |= step[1, n, stream].dependent().launch_status(src, dst)
    return status


@njit
def record_dependent_chain(ap, bp, n, times, stream):
    graphs.begin_capture(stream)
    status = dependent_chain(ap, bp, n, times, stream)
    return status, graphs.end_capture(stream).instantiate()


@pytest.mark.parametrize("graph", [False, True])
def test_dependent_launches_run_in_order(graph):
    a = rng.standard_normal(N).astype(np.float32)
    b = np.full(N, np.nan, np.float32)
    want = dependent_steps(a, 6)
    stream = cuda.stream()
    if graph:
        status, exe = record_dependent_chain(a.ctypes.data, b.ctypes.data, N, 6, stream)
        np.testing.assert_array_equal(b, np.nan)  # recorded, not run
        exe.launch(stream)
    else:
        status = dependent_chain(a.ctypes.data, b.ctypes.data, N, 6, stream)
    stream.synchronize()
    assert status == 0
    np.testing.assert_array_equal(a, want)


# -- a recording ended, aborted or begun in the wrong state (support/recording_states.py)

def _start():
    x = rng.integers(-1000, 1000, 4).astype(np.int64)
    return x, x.copy()


def test_end_body_of_a_graph_is_refused_and_the_recording_goes_on():
    x, before = _start()
    stream = cuda.stream()
    refused, graph = states.end_body_of_a_graph(x.ctypes.data, stream)
    assert refused == states.ILLEGAL_STATE
    exe = graph.instantiate()
    exe.launch(stream)  # the launch was recorded, not dropped
    assert x[0] == before[0] + 1
    exe.destroy(), graph.destroy()


def test_end_capture_of_a_body_is_refused_and_the_body_goes_on():
    x, before = _start()
    refused, exe = states.end_capture_of_a_body(x.ctypes.data, cuda.stream(), cuda.stream())
    assert refused == states.ILLEGAL_STATE
    assert x[0] == before[0]  # recorded, not run
    exe.launch(cuda.stream())
    assert x[0] == before[0] + 1
    exe.destroy()


def test_abort_of_a_body_drops_its_launches():
    x, before = _start()
    aborted, exe = states.abort_a_body(x.ctypes.data, cuda.stream(), cuda.stream())
    assert aborted == 0
    exe.launch(cuda.stream())
    assert x[0] == before[0] + 10  # not 11: the aborted launch is gone
    exe.destroy()


def test_a_body_is_recorded_once():
    x, before = _start()
    assert states.record_a_body_twice(x.ctypes.data, cuda.stream(), cuda.stream()) == \
        states.ILLEGAL_STATE
    assert x[0] == before[0]


@pytest.mark.parametrize("nested", [False, True])
def test_a_while_node_with_an_empty_body_does_not_end_its_recording(nested):
    x, before = _start()
    refused, exe = states.empty_while(x.ctypes.data, cuda.stream(), cuda.stream(),
                                      cuda.stream(), nested)
    assert refused == states.INVALID_VALUE
    exe.launch(cuda.stream())
    assert x[0] == before[0] + 1  # the body recorded after the refusal ran once
    exe.destroy()


def test_python_launches_on_recording_streams_are_recorded():
    # numba-cuda's own kernel[g, b, stream](...) from Python, as a GPU records it
    x = (rng.standard_normal(N) * 100).astype(np.float32)
    work, count = x.copy(), np.zeros(1, np.int64)
    tol = np.float32(rng.uniform(0.01, 1))
    stream, body = cuda.stream(), cuda.stream()
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, h)
    graphs.begin_body(body, loop)
    halve[1, N, body](work, count, tol, h)
    graphs.end_body(body)
    add[1, N, stream](work, np.float32(1))
    graph = graphs.end_capture(stream)
    np.testing.assert_array_equal(work, x)  # recorded, not run
    assert count[0] == 0
    exe = graph.instantiate()
    graph.destroy()
    exe.launch(stream)
    want, iterations = halvings(x, tol)
    assert count[0] == iterations
    np.testing.assert_array_equal(work, want + np.float32(1))
    exe.destroy()


def test_a_python_launch_on_the_legacy_stream_while_recording_is_refused():
    x = np.zeros(N, np.float32)
    stream = cuda.stream()
    graphs.begin_capture(stream)
    with pytest.raises(ncl.CudaLaunchError) as info:
        add[1, N](x, np.float32(1))  # stream 0, the legacy default stream
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
    assert (x == 0).all()
    graphs.abort_capture(stream)


@njit
def far_switch_case(xp, stream, body, value):
    x = f32(xp, N)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, value)
    node = graphs.add_switch(stream, h, 2**32 - 1)  # a valid size: the largest
    graphs.begin_body(body, node, 2**32 - 2)
    add[1, N, body](x, np.float32(5))
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe


@pytest.mark.parametrize("value, added", [(2**32 - 2, 5), (7, 0)])
def test_switch_bodies_are_made_as_they_are_recorded(value, added):
    # 2**32-1 bodies made at once took gigabytes in seconds
    x = rng.standard_normal(N).astype(np.float32)
    work = x.copy()
    exe = far_switch_case(work.ctypes.data, cuda.stream(), cuda.stream(), value)
    exe.launch(cuda.stream())
    np.testing.assert_array_equal(work, x + np.float32(added))
    exe.destroy()


def test_a_handle_made_in_a_body_takes_its_default_at_each_graph_launch():
    # CU_GRAPH_COND_ASSIGN_DEFAULT: "the default value is applied at the start
    # of each graph launch" (not at each run of the body it was made in)
    outer = int(rng.integers(2, 6))
    x = np.array([outer, 0, 0, 0], np.int64)
    exe = states.default_in_body(x.ctypes.data, cuda.stream(), cuda.stream(), cuda.stream())
    exe.launch(cuda.stream())
    assert list(x[:2]) == [0, 1]
    x[0] = outer
    exe.launch(cuda.stream())  # the next launch assigns it again
    assert list(x[:2]) == [0, 2]
    exe.destroy()
