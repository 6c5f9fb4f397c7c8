"""Conditional graph nodes and the functions kernels call, on a GPU: loops
stop where the kernels say, with the iteration counts a host-side loop
counts and NumPy's results, on fresh random inputs with outputs poisoned
(NaN) first; IF/ELSE and SWITCH bodies, nested loops, replays after updates,
refusals with the driver's status. Skipped without a GPU."""

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from support import recordings
from support import recording_states as states
from support.conditional_kernels import TPB, clear, count_down, halve, halvings, \
    record_halving, record_nested

pytestmark = pytest.mark.gpu
#: what a test leaves recording is ended, failing it (autouse)
no_recording_left = recordings.no_recording_left
rng = np.random.default_rng()


@cuda.jit
def affine(x, a, b, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + b


@cuda.jit
def set_value(handle, v):
    if cuda.grid(1) == 0:
        graphs.set_conditional(handle, v)


@pytest.mark.parametrize("n", [1, 1000, 100_000])
def test_while_stops_where_the_kernel_says(n):
    x = (rng.standard_normal(n) * 10 ** rng.uniform(0, 4)).astype(np.float32)
    tol = np.float32(rng.uniform(1e-3, 1))
    d, count = cuda.to_device(x), cuda.to_device(np.zeros(1, np.int32))
    stream, body = cuda.stream(), cuda.stream()
    exe = record_halving(d, count, tol, stream, body)
    exe.launch(stream)
    stream.synchronize()
    want, iterations = halvings(x, tol)
    assert count.copy_to_host()[0] == iterations
    np.testing.assert_array_equal(d.copy_to_host(), want)
    exe.destroy()


@njit
def record_branches(x, out, v, cases, stream, body):
    g = (x.size + TPB - 1) // TPB
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 0)
    set_value[1, 1, stream](h, v)  # the value this launch branches on
    node = graphs.add_if_else(stream, h)
    for k in range(2):
        graphs.begin_body(body, node, k)
        affine[g, TPB, body](x, np.float32(k + 2), np.float32(0), out[k])
        graphs.end_body(body)
    h2 = graphs.conditional_handle(stream, 0)
    set_value[1, 1, stream](h2, v)
    sw = graphs.add_switch(stream, h2, cases)
    for k in range(cases):
        graphs.begin_body(body, sw, k)
        affine[g, TPB, body](x, np.float32(1), np.float32(k + 1), out[2 + k])
        graphs.end_body(body)
    return graphs.end_capture(stream)


@njit
def instantiate(graph):
    return graph.instantiate()


@pytest.mark.parametrize("v", [0, 1, 2, 3, 9])
def test_if_else_and_switch(v):
    n, cases = 777, 3
    x = rng.standard_normal(n).astype(np.float32)
    out = cuda.to_device(np.full((2 + cases, n), np.nan, np.float32))
    stream, body = cuda.stream(), cuda.stream()
    graph = record_branches(cuda.to_device(x), out, v, cases, stream, body)
    exe = instantiate(graph)
    exe.launch(stream)
    stream.synchronize()
    got = out.copy_to_host()
    ran = {0 if v else 1} | ({2 + v} if v < cases else set())
    for row in range(2 + cases):
        if row in ran:
            want = (np.float32(row + 2) * x if row < 2 else x + np.float32(row - 1))
            np.testing.assert_array_equal(got[row], want)
        else:
            assert np.isnan(got[row]).all(), row  # a body that did not run
    exe.destroy(), graph.destroy()


def test_nested_while_loops():
    outer, inner = (int(v) for v in rng.integers(2, 50, size=2))
    c = cuda.to_device(np.array([outer, 0, 0, 0], np.int64))
    streams = [cuda.stream() for _ in range(3)]
    exe = record_nested(c, inner, *streams)
    for launch in range(2):  # the outer default is assigned again
        c.copy_to_device(np.array([outer, 0, 0, 0], np.int64))
        exe.launch(streams[0])
        streams[0].synchronize()
        assert c.copy_to_host().tolist() == [0, outer, 0, outer * inner]
    exe.destroy()


@njit
def record_affine_loop(x, out, count, stream, body):
    g = (x.size + TPB - 1) // TPB
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, h)
    graphs.begin_body(body, loop)
    affine[g, TPB, body](x, np.float32(1), np.float32(0), out)
    node = graphs.last_launch(body)
    count_down[1, 1, body](count, h)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    return graph, node


@njit
def replay_updated(graph, node, x, out, a, b, stream):
    exe = graph.instantiate()
    exe.update_launch(node, affine[(x.size + TPB - 1) // TPB, TPB], x, a, b, out)
    exe.launch(stream)
    return exe


def test_replay_after_update_launch_in_a_body():
    n = 5000
    x = rng.standard_normal(n).astype(np.float32)
    dx, out = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, np.float32))
    count = cuda.to_device(np.array([3, 0], np.int64))
    stream, body = cuda.stream(), cuda.stream()
    graph, node = record_affine_loop(dx, out, count, stream, body)
    a, b = np.float32(rng.uniform(1, 2)), np.float32(rng.uniform(-1, 1))
    exe = replay_updated(graph, node, dx, out, a, b, stream)
    stream.synchronize()
    # the GPU may fuse a * x + b (one rounding)
    np.testing.assert_allclose(out.copy_to_host(), a * x + b, rtol=1e-6, atol=1e-7)
    assert count.copy_to_host().tolist() == [0, 3]
    exe.destroy(), graph.destroy()


def test_exec_update_takes_a_graph_of_the_same_shape():
    n = 3000
    x = rng.standard_normal(n).astype(np.float32)
    dx = cuda.to_device(x)
    outs = [cuda.to_device(np.full(n, np.nan, np.float32)) for _ in range(2)]
    count = cuda.to_device(np.array([2, 0], np.int64))
    stream, body = cuda.stream(), cuda.stream()
    g1, _ = record_affine_loop(dx, outs[0], count, stream, body)
    g2, _ = record_affine_loop(dx, outs[1], count, stream, body)
    exe = instantiate(g1)
    exe.update(g2)  # the second graph's arguments, inside the body too
    exe.launch(stream)
    stream.synchronize()
    assert np.isnan(outs[0].copy_to_host()).all()
    np.testing.assert_array_equal(outs[1].copy_to_host(), x)
    exe.destroy(), g1.destroy(), g2.destroy()


SRC = r'''
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int v);
extern "C" __global__ void stop_at(unsigned long long handle, int* count, int limit)
{ if (threadIdx.x == 0 && ++count[0] >= limit) cudaGraphSetConditional(handle, 0); }
'''


def test_foreign_kernel_sets_the_condition():
    from support.nvrtc import nvrtc_ptx

    cc = cuda.get_current_device().compute_capability
    stop_at = ncl.foreign_kernel(nvrtc_ptx(SRC, ("-arch=compute_%d%d" % cc,), "stop_at"),
                                 "stop_at", "void(uint64, CPointer(int32), int32)")

    @njit
    def record(stream, body, cp, limit):
        graphs.begin_capture(stream)
        h = graphs.conditional_handle(stream, 1)
        loop = graphs.add_while(stream, h)
        graphs.begin_body(body, loop)
        stop_at[1, 32, body](h, ncl.as_voidptr(cp), limit)
        graphs.end_body(body)
        graph = graphs.end_capture(stream)
        exe = graph.instantiate()
        graph.destroy()
        return exe

    limit = int(rng.integers(2, 100))
    count = cuda.to_device(np.zeros(1, np.int32))
    stream = cuda.stream()
    exe = record(stream, cuda.stream(), count.device_ctypes_pointer.value, limit)
    exe.launch(stream)
    stream.synchronize()
    assert count.copy_to_host()[0] == limit
    exe.destroy()


def test_python_forms_build_the_same_loop():
    # begin_capture ... end_body from Python; the launch with the handle
    # from an @njit helper
    @njit
    def launch_halve(x, tol, h, count, stream):
        clear[1, 1, stream](h)
        halve[(x.size + TPB - 1) // TPB, TPB, stream](x, tol, h, count)

    x = (rng.standard_normal(2000) * 100).astype(np.float32)
    d, count = cuda.to_device(x), cuda.to_device(np.zeros(1, np.int32))
    tol = np.float32(0.25)
    stream, body = cuda.stream(), cuda.stream()
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, h)
    graphs.begin_body(body, loop)
    launch_halve(d, tol, h, count, body)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    want, iterations = halvings(x, tol)
    assert count.copy_to_host()[0] == iterations
    np.testing.assert_array_equal(d.copy_to_host(), want)
    exe.destroy(), graph.destroy()


@cuda.jit
def dependent(x, out):
    ncl.griddepcontrol_wait()
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + 1
    ncl.griddepcontrol_launch_dependents()


def test_griddepcontrol_kernels_run():
    @njit
    def chain(x, y, stream, times):
        g = (x.size + TPB - 1) // TPB
        for _ in range(times):
            dependent[g, TPB, stream](x, y)
            dependent[g, TPB, stream](y, x)

    x = rng.standard_normal(10_000).astype(np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(np.full(x.size, np.nan, np.float32))
    stream = cuda.stream()
    chain(dx, dy, stream, 10)
    stream.synchronize()
    want = x.copy()
    for _ in range(20):
        want = want + np.float32(1)
    np.testing.assert_array_equal(dx.copy_to_host(), want)


@njit
def launch_status(exe, stream):
    return exe.launch_status(stream)


def test_replay_on_a_stream_of_another_context():
    # Driver 580 runs it (the graph's kernels and handles stay in the
    # context they were made in): checked here with its result.
    from cuda.bindings import driver as d

    x = (rng.standard_normal(1000) * 100).astype(np.float32)
    tol = np.float32(0.5)
    dx, count = cuda.to_device(x), cuda.to_device(np.zeros(1, np.int32))
    stream, body = cuda.stream(), cuda.stream()
    exe = record_halving(dx, count, tol, stream, body)
    err, primary = d.cuCtxGetCurrent()
    err, dev = d.cuCtxGetDevice()
    err, other = d.cuCtxCreate(None, 0, dev)
    assert err == 0, err
    try:
        err, s2 = d.cuStreamCreate(0)
        assert launch_status(exe, int(s2)) == 0
        assert d.cuStreamSynchronize(s2)[0] == 0
        d.cuStreamDestroy(s2)
    finally:
        d.cuCtxSetCurrent(primary)
        d.cuCtxDestroy(other)
    want, iterations = halvings(x, tol)
    assert count.copy_to_host()[0] == iterations
    np.testing.assert_array_equal(dx.copy_to_host(), want)
    exe.destroy()


@njit
def launch_with_handle(stream):
    return set_value[1, 1, stream].launch_status(graphs.ConditionalHandle(0x1234), 0)


def test_a_handle_outside_a_recording_is_refused_before_the_driver():
    # launched, it would fault the context (CUDA_ERROR_ILLEGAL_ADDRESS)
    stream = cuda.stream()
    assert launch_with_handle(stream) == 1  # CUDA_ERROR_INVALID_VALUE
    stream.synchronize()
    assert ncl.synchronize_status() == 0  # the context is fine


@njit
def end_with_body_open(stream, body):
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream)
    graphs.begin_body(body, graphs.add_if(stream, h))
    refused = graphs.end_capture_status(stream)[0]
    graphs.end_body(body)
    return refused, graphs.end_capture(stream)


def test_a_recording_with_a_body_open_does_not_end():
    # the driver crashes the process when such a graph is used (driver 580)
    refused, graph = end_with_body_open(cuda.stream(), cuda.stream())
    assert refused == 904  # CUDA_ERROR_STREAM_CAPTURE_UNJOINED
    exe = instantiate(graph)
    exe.destroy(), graph.destroy()


# -- round 5: recordings in the wrong state, an empty WHILE body, a handle's
# default inside a body (support/recording_states.py; the same on the CPU)

def _int64s():
    x = rng.integers(-1000, 1000, 4).astype(np.int64)
    return x, cuda.to_device(x)


def test_end_body_of_a_graph_and_end_capture_of_a_body_are_refused():
    x, d = _int64s()
    stream, body = cuda.stream(), cuda.stream()
    refused, graph = states.end_body_of_a_graph(d.device_ctypes_pointer.value, stream)
    assert refused == states.ILLEGAL_STATE
    exe = graph.instantiate()
    graph.destroy()
    exe.launch(stream)
    stream.synchronize()
    assert d.copy_to_host()[0] == x[0] + 1  # the recording went on
    exe.destroy()
    refused, exe = states.end_capture_of_a_body(d.device_ctypes_pointer.value, stream, body)
    assert refused == states.ILLEGAL_STATE
    exe.launch(stream)
    stream.synchronize()
    assert d.copy_to_host()[0] == x[0] + 2
    exe.destroy()


def test_abort_of_a_body_empties_it_on_the_driver():
    # cuGraphGetNodes and cuGraphDestroyNode on a body graph of the driver's
    x, d = _int64s()
    stream = cuda.stream()
    aborted, exe = states.abort_a_body(d.device_ctypes_pointer.value, stream, cuda.stream())
    assert aborted == 0
    exe.launch(stream)
    stream.synchronize()
    assert d.copy_to_host()[0] == x[0] + 10  # not 11
    exe.destroy()
    assert states.record_a_body_twice(d.device_ctypes_pointer.value, stream,
                                      cuda.stream()) == states.ILLEGAL_STATE


@pytest.mark.parametrize("nested", [False, True])
def test_a_while_node_with_an_empty_body_is_refused_on_the_driver(nested):
    x, d = _int64s()
    stream = cuda.stream()
    refused, exe = states.empty_while(d.device_ctypes_pointer.value, stream, cuda.stream(),
                                      cuda.stream(), nested)
    assert refused == states.INVALID_VALUE
    exe.launch(stream)
    stream.synchronize()
    assert d.copy_to_host()[0] == x[0] + 1
    exe.destroy()


def test_a_handle_made_in_a_body_takes_its_default_at_each_graph_launch():
    outer = int(rng.integers(2, 6))
    d = cuda.to_device(np.array([outer, 0, 0, 0], np.int64))
    stream = cuda.stream()
    exe = states.default_in_body(d.device_ctypes_pointer.value, stream, cuda.stream(),
                                 cuda.stream())
    exe.launch(stream)
    stream.synchronize()
    got = d.copy_to_host()
    print("DEFAULT-IN-BODY: outer iterations %d, inner body runs %d (1: at each graph "
          "launch, %d: at each body run)" % (outer, got[1], outer))
    assert list(got[:2]) == [0, 1], "the driver applied the default at each body run"
    exe.destroy()
