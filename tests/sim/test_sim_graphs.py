"""CUDA graphs from @njit/@cfunc under numba-cuda's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1): a capture records the simulated launches, each
replay runs them on host memory, updates change them, misuse fails with the
GPU's status and message. Results are checked against NumPy on fresh random
inputs with outputs poisoned (NaN) first. Started by tests/test_simulator.py."""

import ctypes
import gc
import threading
import tracemalloc

import numba
import numba.types as nt
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from numba_cuda_launch.launch.backends import simgraph

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
rng = np.random.default_rng()
N = 64


@cuda.jit
def axpb(x, a, b, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + b


@cuda.jit
def double(y, z):
    i = cuda.grid(1)
    if i < z.size:
        z[i] = 2 * y[i]


@cuda.jit
def bump(count):
    if cuda.grid(1) == 0:
        count[0] += 1


@cuda.jit("void(float32[::1], int8)")
def fill_small(y, v):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = v


@cuda.jit
def out_of_bounds(y):
    y[y.size + cuda.grid(1)] = 1  # the simulator raises IndexError


def ptr(a):
    return a.ctypes.data


@pytest.fixture(autouse=True)
def _live_before():
    """What was alive before the test (a test whose compiled code raised
    leaves its executable graph behind, as on a GPU)."""
    global _BEFORE
    _BEFORE = set(simgraph.STATE.live())


def left_alive():
    """Graphs and executable graphs made by this test and not destroyed."""
    return sorted(set(simgraph.STATE.live()) - _BEFORE)


@njit
def view(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


def fresh(n=N):
    return rng.standard_normal(n).astype(np.float32)


def poisoned(n=N):
    return np.full(n, np.nan, np.float32)


@njit
def record_chain(xp, yp, zp, cp, ap, n, stream, b):
    """Capture y = a x + b (a read from memory now: a scalar by value),
    z = 2 y and a replay counter; returns the graph and axpb's node."""
    x, y, z, a = view(xp, n), view(yp, n), view(zp, n), view(ap, 1)
    count = numba.carray(ncl.as_voidptr(cp), (1,), np.int64)
    g = (n + 31) // 32
    graphs.begin_capture(stream)
    axpb[g, 32, stream](x, a[0], b, y)
    node = graphs.last_launch(stream)
    double[g, 32, stream](y, z)
    bump[1, 32, stream](count)
    return graphs.end_capture(stream), node


@njit
def replay(graph, stream, times):
    exe = graph.instantiate()
    for _ in range(times):
        exe.launch(stream)
    return exe


class Chain:
    """Host buffers of record_chain, and its graph."""

    def __init__(self, stream, b=0.5):
        self.x, self.y, self.z = fresh(), poisoned(), poisoned()
        self.count = np.zeros(1, np.int64)
        self.a = np.array([rng.uniform(0.5, 2)], np.float32)
        self.b = np.float32(b)
        self.graph, self.node = record_chain(ptr(self.x), ptr(self.y), ptr(self.z),
                                             ptr(self.count), ptr(self.a), N, stream, self.b)

    def check(self, a, b, x=None):
        x = self.x if x is None else x
        want = a * x.astype(np.float64) + b
        np.testing.assert_allclose(self.y, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(self.z, 2 * want, rtol=1e-5, atol=1e-6)


def test_capture_records_and_replays_run():
    stream = cuda.stream()
    c = Chain(stream)
    # Recorded, not run: the outputs are still poisoned.
    assert np.isnan(c.y).all() and np.isnan(c.z).all() and c.count[0] == 0
    a0 = c.a[0]
    c.a[0] = 100.0  # the scalar was taken when recorded
    exe = replay(c.graph, stream, 3)
    assert c.count[0] == 3
    c.check(a0, c.b)
    # Arrays are recorded by reference: a replay reads the memory as it is now.
    c.x[:] = fresh()
    c.y[:], c.z[:] = np.nan, np.nan
    exe.launch(stream)
    assert c.count[0] == 4
    c.check(a0, c.b)
    assert exe.destroy() == 0 and c.graph.destroy() == 0
    assert left_alive() == []


def test_simulator_streams_are_distinct_handles():
    s1, s2 = cuda.stream(), cuda.stream()

    @njit
    def handles(s1, s2):
        return s1.handle, s2.handle

    h1, h2 = handles(s1, s2)
    assert h1 != h2 and h1 not in (None, 0, 1, 2) and h2 not in (None, 0, 1, 2)


@njit
def capture_on_one_run_on_other(xp, yp, n, s1, s2):
    x, y = view(xp, n), view(yp, n)
    graphs.begin_capture(s1)
    axpb[2, 32, s1](x, np.float32(3), np.float32(0), y)   # recorded
    axpb[2, 32, s2](x, np.float32(1), np.float32(1), y)   # another stream: runs now
    return graphs.end_capture(s1)


def test_only_the_capturing_stream_records():
    x, y = fresh(), poisoned()
    graph = capture_on_one_run_on_other(ptr(x), ptr(y), N, cuda.stream(), cuda.stream())
    np.testing.assert_allclose(y, x + 1, rtol=1e-5, atol=1e-6)
    y[:] = np.nan
    exe = graph.instantiate()
    exe.launch(cuda.stream())  # a replay may use any stream
    np.testing.assert_allclose(y, 3 * x, rtol=1e-5, atol=1e-6)
    assert exe.destroy() == graph.destroy() == 0


# -- update_launch ---------------------------------------------------------------

@njit
def update_and_replay(graph, node, stream, xp, yp, n, a, b, g):
    exe = graph.instantiate()
    exe.update_launch(node, axpb[g, 32], view(xp, n), a, b, view(yp, n))
    exe.launch(stream)
    return exe


def test_update_launch_changes_the_replay():
    stream = cuda.stream()
    c = Chain(stream)
    x2 = fresh()
    a2, b2 = np.float32(rng.uniform(-2, -1)), np.float32(rng.standard_normal())
    exe = update_and_replay(c.graph, c.node, stream, ptr(x2), ptr(c.y), N, a2, b2, 2)
    c.check(a2, b2, x2)  # the new array, scalars; double still reads y
    exe.destroy()
    c.graph.destroy()


def test_update_launch_changes_the_grid():
    stream = cuda.stream()
    c = Chain(stream)
    exe = update_and_replay(c.graph, c.node, stream, ptr(c.x), ptr(c.y), N, 1.0, 0.0, 1)
    # One block of 32 threads: only the first half of y was written.
    np.testing.assert_allclose(c.y[:32], c.x[:32], rtol=1e-5, atol=1e-6)
    assert np.isnan(c.y[32:]).all()
    exe.destroy()
    c.graph.destroy()


def test_update_launch_status_form_returns_0():
    @njit
    def update_status(graph, node, xp, yp, n):
        exe = graph.instantiate()
        status = exe.update_launch_status(node, axpb[2, 32], view(xp, n), np.float32(1),
                                          np.float32(2), view(yp, n))
        return status, exe

    c = Chain(cuda.stream())
    status, exe = update_status(c.graph, c.node, ptr(c.x), ptr(c.y), N)
    assert status == 0
    exe.launch(0x51)
    c.check(1, 2)
    exe.destroy()
    c.graph.destroy()


@njit
def bad_update(graph, node, xp, yp, n, what, g):
    exe = graph.instantiate()
    x, y = view(xp, n), view(yp, n)
    if what == 0:  # a grid computed at run time: 0
        status = exe.update_launch_status(node, axpb[g, 32], x, 1.0, 2.0, y)
        exe.update_launch(node, axpb[g, 32], x, 1.0, 2.0, y)
    else:
        host = np.zeros(n, np.float32)  # allocated in nopython code: host memory
        status = exe.update_launch_status(node, axpb[2, 32], x, 1.0, 2.0, host)
        exe.update_launch(node, axpb[2, 32], x, 1.0, 2.0, host)
    return status


@pytest.mark.parametrize("what, text", [
    (0, "griddim has an item outside 1..2**32-1"),
    (1, "parameter 'y' (argument 4) is an array in host memory"),
])
def test_bad_update_refused_with_the_gpu_message(what, text):
    stream = cuda.stream()
    c = Chain(stream)
    with pytest.raises(ncl.CudaGraphError) as info:
        bad_update(c.graph, c.node, ptr(c.x), ptr(c.y), N, what, 0)
    err = info.value
    assert err.operation == "update_launch" and err.kernel == "axpb"
    assert err.name == "CUDA_ERROR_INVALID_VALUE" and text in str(err)
    # Nothing was changed: a replay runs what was recorded.
    exe = replay(c.graph, stream, 1)
    c.check(c.a[0], c.b)
    exe.destroy()
    c.graph.destroy()


def test_update_refuses_an_integer_out_of_range():
    @njit
    def record_fill(yp, n, s):
        graphs.begin_capture(s)
        fill_small[2, 32, s](view(yp, n), 1)
        node = graphs.last_launch(s)
        return graphs.end_capture(s), node

    @njit
    def update_fill(graph, node, yp, n, v):
        exe = graph.instantiate()
        exe.update_launch(node, fill_small[2, 32], view(yp, n), v)
        return exe

    s, y = cuda.stream(), poisoned()
    graph, node = record_fill(ptr(y), N, s)
    with pytest.raises(ncl.CudaGraphError) as info:
        update_fill(graph, node, ptr(y), N, 300)
    assert "parameter 'v' (argument 2) of type int8 was given a int64 value outside its " \
           "range" in str(info.value)
    exe = update_fill(graph, node, ptr(y), N, -7)
    exe.launch(s)
    assert (y == -7).all()
    exe.destroy()
    graph.destroy()


def test_update_launch_typing_error_names_the_kernel():
    def wrong(graph, node, xp, n):
        exe = graph.instantiate()
        exe.update_launch(node, axpb[2, 32], view(xp, n), 1.0)

    c = Chain(cuda.stream())
    with pytest.raises(TypingError) as info:
        njit(wrong)(c.graph, c.node, ptr(c.x), N)
    assert "kernel 'axpb' takes 4 argument(s)" in str(info.value).splitlines()[0]
    c.graph.destroy()


def test_update_of_a_node_whose_graph_is_gone_refused():
    stream = cuda.stream()
    c, other = Chain(stream), Chain(stream)

    @njit
    def update_status(exe, node, xp, yp, n):
        return exe.update_launch_status(node, axpb[2, 32], view(xp, n), np.float32(1),
                                        np.float32(2), view(yp, n))

    exe = c.graph.instantiate()
    # A node of another graph, then one whose graph was destroyed.
    assert update_status(exe, other.node, ptr(c.x), ptr(c.y), N) == 1
    c.graph.destroy()
    assert update_status(exe, c.node, ptr(c.x), ptr(c.y), N) == 1
    exe.launch(stream)  # still the recorded launch
    c.check(c.a[0], c.b)
    exe.destroy()
    other.graph.destroy()


# -- exe.update(graph) ----------------------------------------------------------------

def test_exec_update_takes_a_recaptured_graph():
    stream = cuda.stream()
    c = Chain(stream, b=1.0)
    exe = c.graph.instantiate()
    g2, _ = record_chain(ptr(c.x), ptr(c.y), ptr(c.z), ptr(c.count), ptr(c.a), N, stream,
                         np.float32(-3.0))
    exe.update(g2)
    assert g2.destroy() == 0  # the executable graph keeps what it took
    exe.launch(stream)
    c.check(c.a[0], -3.0)
    exe.destroy()
    c.graph.destroy()


@njit
def record_other(xp, yp, n, s, shape):
    x, y = view(xp, n), view(yp, n)
    graphs.begin_capture(s)
    if shape == 0:
        axpb[2, 32, s](x, np.float32(1), np.float32(0), y)   # one node fewer
    else:
        double[2, 32, s](x, y)                               # another kernel first
        double[2, 32, s](y, x)
        bump[1, 32, s](numba.carray(ncl.as_voidptr(xp), (1,), np.int64))
    return graphs.end_capture(s)


@pytest.mark.parametrize("shape, text", [(0, "topology differs"),
                                         (1, "launches another function")])
def test_exec_update_refused_says_why(shape, text):
    stream = cuda.stream()
    c = Chain(stream)
    exe = c.graph.instantiate()
    g2 = record_other(ptr(c.x), ptr(c.y), N, stream, shape)
    with pytest.raises(ncl.CudaGraphError) as info:
        exe.update(g2)
    assert info.value.name == "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE" and text in str(info.value)
    exe.launch(stream)  # unchanged
    c.check(c.a[0], c.b)
    for h in (exe, g2, c.graph):
        assert h.destroy() == 0


# -- capture of nothing, misuse ---------------------------------------------------------

def test_capture_of_nothing():
    @njit
    def nothing(s):
        graphs.begin_capture(s)
        status, _ = graphs.last_launch_status(s)
        graph = graphs.end_capture(s)
        exe = graph.instantiate()
        exe.launch(s)
        return status, exe.destroy(), graph.destroy()

    assert nothing(cuda.stream()) == (1, 0, 0)
    with pytest.raises(ncl.CudaGraphError, match="not one launch"):
        njit(lambda s: (graphs.begin_capture(s), graphs.last_launch(s)))(0x51)
    assert graphs.abort_capture(0x51) == 0
    with pytest.raises(ncl.CudaGraphError, match="not capturing"):
        graphs.last_launch(0x51)


def test_replay_after_destroy_refused():
    @njit
    def destroyed_then_launched(graph, s):
        exe = graph.instantiate()
        exe.destroy()
        return exe.launch_status(s), exe.destroy()

    stream = cuda.stream()
    c = Chain(stream)
    launched, destroyed = destroyed_then_launched(c.graph, stream)
    assert (launched, destroyed) == (1, 1)  # CUDA_ERROR_INVALID_VALUE, not a replay
    assert c.count[0] == 0 and np.isnan(c.y).all()
    exe = c.graph.instantiate()
    assert exe.destroy() == 0 and exe.handle == 0 and exe.destroy() == 0
    with pytest.raises(ncl.CudaGraphError) as info:
        exe.launch(stream)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE" and info.value.operation == "launch"
    c.graph.destroy()
    with pytest.raises(ncl.CudaGraphError) as info:
        c.graph.instantiate()
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert c.count[0] == 0 and left_alive() == []


@pytest.mark.parametrize("stream, name, text", [
    (0, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "the legacy default stream (0) cannot be "
                                                 "captured"),
    (1, "CUDA_ERROR_INVALID_VALUE", "CU_STREAM_LEGACY (handle 1)"),
    (2, "CUDA_ERROR_INVALID_VALUE", "CU_STREAM_PER_THREAD (handle 2)"),
])
def test_default_streams_not_captured(stream, name, text):
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(stream)
    assert info.value.name == name and text in str(info.value)


def test_capture_state_errors():
    s = cuda.stream()
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(s, 7)
    assert "mode must be graphs.CAPTURE_GLOBAL (0)" in str(info.value)
    graphs.begin_capture(s)
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(s)
    assert info.value.name == "CUDA_ERROR_ILLEGAL_STATE"
    assert "the stream is already capturing" in str(info.value)
    assert graphs.end_capture(s).destroy() == 0
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.end_capture(s)
    assert info.value.name == "CUDA_ERROR_ILLEGAL_STATE"
    assert "no capture is in progress on this stream" in str(info.value)
    assert graphs.end_capture_status(s)[0] == 401


@njit
def capture_with_legacy_launch(xp, yp, n, s):
    x, y = view(xp, n), view(yp, n)
    graphs.begin_capture(s)
    axpb[2, 32, s](x, np.float32(1), np.float32(0), y)
    launched = axpb[2, 32, 0].launch_status(x, np.float32(1), np.float32(0), y)
    return launched, graphs.end_capture_status(s)[0]


@njit
def capture_with_raising_legacy_launch(xp, yp, n, s):
    x, y = view(xp, n), view(yp, n)
    graphs.begin_capture(s)
    axpb[2, 32](x, np.float32(1), np.float32(0), y)
    return graphs.end_capture(s)


def test_legacy_stream_launch_invalidates_the_capture():
    x, y = fresh(), poisoned()
    s = cuda.stream()
    assert capture_with_legacy_launch(ptr(x), ptr(y), N, s) == (906, 901)
    assert np.isnan(y).all()  # neither launch ran
    with pytest.raises(ncl.CudaLaunchError) as info:
        capture_with_raising_legacy_launch(ptr(x), ptr(y), N, s)
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
    assert "legacy default stream" in str(info.value)
    with pytest.raises(ncl.CudaGraphError, match="INVALIDATED"):
        graphs.end_capture(s)
    assert graphs.abort_capture(s) == 0 and left_alive() == []


def test_abort_capture_drops_the_recording():
    s = cuda.stream()
    with pytest.raises(ncl.CudaLaunchError):
        capture_with_raising_legacy_launch(ptr(fresh()), ptr(poisoned()), N, s)
    assert graphs.abort_capture(s) == 0
    assert graphs.abort_capture(s) == 0  # nothing to end: fine
    assert simgraph.STATE.captures == {}
    graphs.begin_capture(s)  # the stream can capture again
    assert graphs.end_capture(s).destroy() == 0


def test_failing_kernel_in_a_replay():
    @njit
    def record_fault(yp, n, s):
        graphs.begin_capture(s)
        out_of_bounds[1, 4, s](view(yp, n))
        return graphs.end_capture(s)

    s = cuda.stream()
    graph = record_fault(ptr(poisoned()), N, s)
    exe = graph.instantiate()
    assert njit(lambda e, s: e.launch_status(s))(exe, s) == 719  # CUDA_ERROR_LAUNCH_FAILED
    with pytest.raises(ncl.CudaGraphError) as info:
        exe.launch(s)
    assert info.value.name == "CUDA_ERROR_LAUNCH_FAILED"
    exe.destroy()
    graph.destroy()


# -- a graph launched into a capture ---------------------------------------------------------

def test_replay_captured_into_another_graph():
    @njit
    def nest(exe, cp, s):
        graphs.begin_capture(s)
        exe.launch(s)
        status, _ = graphs.last_launch_status(s)
        bump[1, 32, s](numba.carray(ncl.as_voidptr(cp), (1,), np.int64))
        return status, graphs.end_capture(s)

    stream = cuda.stream()
    c = Chain(stream)
    inner = c.graph.instantiate()
    status, outer = nest(inner, ptr(c.count), stream)
    assert status == 1 and c.count[0] == 0 and np.isnan(c.y).all()
    with pytest.raises(ncl.CudaGraphError, match="not a kernel launch"):
        njit(lambda e, s: (graphs.begin_capture(s), e.launch(s), graphs.last_launch(s)))(
            inner, stream)
    graphs.abort_capture(stream)
    exe = replay(outer, stream, 2)
    assert c.count[0] == 4  # the inner graph's bump and the outer one, twice
    c.check(c.a[0], c.b)
    for h in (exe, outer, inner, c.graph):
        assert h.destroy() == 0


# -- threads, C callers ----------------------------------------------------------------------

@njit(nogil=True)
def capture_and_replay(s, xp, yp, n, a, times):
    x, y = view(xp, n), view(yp, n)
    graphs.begin_capture(s)
    axpb[2, 32, s](x, a, np.float32(0), y)
    graph = graphs.end_capture(s)
    exe = graph.instantiate()
    graph.destroy()
    for _ in range(times):
        exe.launch(s)
    return exe.destroy()


def test_captures_from_several_threads():
    xs = [fresh() for _ in range(4)]
    ys = [poisoned() for _ in range(4)]
    capture_and_replay(0x100, ptr(xs[0]), ptr(ys[0]), N, np.float32(1), 1)  # compile
    results = {}

    def work(k):
        for _ in range(5):
            results.setdefault(k, []).append(capture_and_replay(
                0x100 + k, ptr(xs[k]), ptr(ys[k]), N, np.float32(k + 2), 2))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [0] * 5 for k in range(4)}
    for k in range(4):
        np.testing.assert_allclose(ys[k], (k + 2) * xs[k], rtol=1e-5, atol=1e-6)
    assert left_alive() == []


@pytest.mark.parametrize("mode, status", [(graphs.CAPTURE_THREAD_LOCAL, 908),
                                          (graphs.CAPTURE_GLOBAL, 908),
                                          (graphs.CAPTURE_RELAXED, 0)])
def test_end_capture_on_another_thread(mode, status):
    s = cuda.stream()
    graphs.begin_capture(s, mode)
    out = []
    t = threading.Thread(target=lambda: out.append(graphs.end_capture_status(s)))
    t.start()
    t.join()
    assert out[0][0] == status
    graph = out[0][1] if status == 0 else graphs.end_capture(s)
    assert graph.destroy() == 0


@numba.cfunc(nt.int32(nt.voidptr, nt.voidptr, nt.voidptr, nt.int64))
def cfunc_records_and_replays(stream, xp, yp, n):
    x, y = numba.carray(xp, (n,), np.float32), numba.carray(yp, (n,), np.float32)
    status = graphs.begin_capture_status(stream)
    if status != 0:
        return status
    status = axpb[(n + 31) // 32, 32, stream].launch_status(x, np.float32(3.0),
                                                           np.float32(1.0), y)
    ended, graph = graphs.end_capture_status(stream)
    if status != 0 or ended != 0:
        return status or ended
    status, exe = graph.instantiate_status()
    if status == 0:
        status = exe.launch_status(stream)
        exe.destroy()
    graph.destroy()
    return status


def test_cfunc_status_forms():
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64)(cfunc_records_and_replays.address)
    x, y = fresh(), poisoned()
    assert fn(0x51, ptr(x), ptr(y), N) == 0
    np.testing.assert_allclose(y, 3 * x + 1, rtol=1e-5, atol=1e-6)
    assert fn(0, ptr(x), ptr(y), N) == 900  # CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
    assert left_alive() == []


# -- release ------------------------------------------------------------------------

@njit
def cycles(xp, yp, n, s, times, replay_last):
    x, y = view(xp, n), view(yp, n)
    for i in range(times):
        graphs.begin_capture(s)
        axpb[2, 32, s](x, np.float32(i), np.float32(0), y)
        graph = graphs.end_capture(s)
        exe = graph.instantiate()
        if replay_last and i == times - 1:  # (the simulator runs kernels slowly)
            exe.launch(s)
        graph.destroy()
        exe.destroy()


def _records():
    gc.collect()
    return sum(type(o) is simgraph.KernelLaunch for o in gc.get_objects())


def test_destroying_frees_the_records():
    x, y = fresh(), poisoned()
    s = cuda.stream()
    records, nodes = _records(), len(simgraph.STATE.nodes)
    c = Chain(s)
    exe = c.graph.instantiate()
    assert _records() == records + 3 and len(simgraph.STATE.nodes) == nodes + 3
    c.graph.destroy()
    assert _records() == records + 3  # the executable graph keeps its own
    assert len(simgraph.STATE.nodes) == nodes
    exe.destroy()
    del c, exe
    assert _records() == records
    cycles(ptr(x), ptr(y), N, s, 10, False)  # compile
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cycles(ptr(x), ptr(y), N, s, 1000, True)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(y, 999 * x, rtol=1e-5, atol=1e-6)
    assert _records() == records and left_alive() == []
    assert len(simgraph.STATE.nodes) == nodes
    assert grown < 64 * 1024, grown


# -- handles and streams given from Python ---------------------------------------------

@pytest.mark.parametrize("cls", [graphs.Graph, graphs.GraphExec, graphs.KernelNode])
@pytest.mark.parametrize("handle", [-1, 2 ** 64, 1.5, "0x60000010", None, True])
def test_a_handle_that_is_no_driver_handle_is_refused(cls, handle):
    # (before: 2**64 raised OverflowError at the first use, 1.5 became 1,
    # 'x' and None raised int()'s errors)
    with pytest.raises(TypeError) as info:
        cls(handle)
    assert str(info.value) == ("%s(): handle must be a driver handle, an integer between 0 "
                               "and 2**64-1, not %r (%s)"
                               % (cls.__name__, handle, type(handle).__name__))


@pytest.mark.parametrize("fn", ["begin_capture", "begin_capture_status", "end_capture",
                                "end_capture_status", "last_launch", "last_launch_status",
                                "abort_capture"])
@pytest.mark.parametrize("stream, says", [
    (-1, "a stream must be a stream handle between 0 and 2**64-1, not -1"),
    (2 ** 64, "a stream must be a stream handle between 0 and 2**64-1, not "
              "18446744073709551616"),
    (1.5, "a stream must be an integer stream handle, not 1.5"),
])
def test_module_functions_called_from_python_check_the_stream(fn, stream, says):
    # (before: -1 captured handle 2**64-1, 2**64 raised OverflowError,
    # last_launch(2**64) Numba's "non-precise type pyobject")
    with pytest.raises(TypeError) as info:
        getattr(graphs, fn)(stream)
    assert str(info.value) == "graphs.%s(): %s" % (fn, says)


def test_a_stream_handle_above_int64_is_captured_from_python():
    # (before: OverflowError once the function was compiled for int64 handles)
    graphs.begin_capture(0x51)
    assert graphs.abort_capture(0x51) == 0
    top = 2 ** 64 - 1
    graphs.begin_capture(top)
    with pytest.raises(ncl.CudaGraphError, match="not one launch"):
        graphs.last_launch(top)
    graph = graphs.end_capture(top)
    assert graph.destroy() == 0 and left_alive() == []
