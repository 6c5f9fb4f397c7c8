"""Several devices in one process, without a GPU: the recording driver plays
two devices (primary contexts, streams belonging to one of them, a CUkernel
launched in its stream's context), and the tests check which device each
launch, per-context load, shared-memory opt-in, occupancy and cluster
query, graph and conditional node went to; two threads of a C library, one
per device, against a recording driver written in C (tests/aot_devices.c).
docs/devices.md says what these model and what only two GPUs show
(tests/test_devices_gpu.py)."""

import os
import re
import shutil
import subprocess
import threading
from collections import Counter

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from numba_cuda_launch import aot, graphs
from numba_cuda_launch.cudadrv.graphdevices import known_devices
from numba_cuda_launch.testing import RecordingDriver

import aot_kernels as K
from support.cold_path import CountingDriver
from support.conditional_kernels import count_down

HERE = os.path.dirname(os.path.abspath(__file__))
KIB = 1024
OPTIN = 227 * KIB  # the fake device's CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
MAX_DYNAMIC = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
INVALID_CONTEXT = 201
S0, S1 = 0x5000, 0x5100  # streams of devices 0 and 1
X0, X1 = 0x7F0000000000, 0x7F1000000000  # an array on each device (never dereferenced)


@cuda.jit
def scale(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


@cuda.jit
def shared_scale(x, a):
    s = cuda.shared.array(0, numba.float32)
    i = cuda.threadIdx.x
    s[i] = x[i]
    x[i] = s[i] * a


@njit
def f32(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


@njit
def on_both(x0, x1, n, s0, s1, sharedmem):
    """The same kernel on each device, each on its own stream, from one call."""
    g = (n + 127) // 128
    shared_scale[g, 128, s0, sharedmem](f32(x0, n), np.float32(2))
    shared_scale[g, 128, s1, sharedmem](f32(x1, n), np.float32(3))


@njit
def on_stream(x, n, stream, a):
    scale[(n + 127) // 128, 128, stream](f32(x, n), np.float32(a))


def data(launch):
    """The data pointer the launch gave its first array (numba-cuda's
    array parameters: meminfo, parent, nitems, itemsize, data, ...)."""
    return int.from_bytes(launch.params[4], "little")


def two_devices(**kw):
    rec = RecordingDriver(compute_capability={0: (9, 0), 1: (9, 0)}, **kw)
    rec.add_stream(S0, 0)
    rec.add_stream(S1, 1)
    return rec


def test_one_call_launches_on_both_devices_through_their_streams():
    with two_devices() as rec:
        on_both(X0, X1, 1000, S0, S1, 0)  # device 0's context stays current
    first, second = rec.launches
    assert (first.device, first.stream, second.device, second.stream) == (0, S0, 1, S1)
    assert first.kernel == second.kernel and first.grid == second.grid == (8, 1, 1)
    assert (data(first), data(second)) == (X0, X1)  # each its own array
    # the code is loaded into each device's context once, at its first use
    assert rec.context_loads == [(rec.primary_context(0), first.kernel),
                                 (rec.primary_context(1), first.kernel)]


def test_switching_the_current_device_as_numba_cuda_users_do():
    # with cuda.gpus[n]: ... makes device n's primary context current; the
    # default stream's work runs there
    with two_devices() as rec:
        for device in (0, 1, 0, 1):
            rec.use_device(device)
            on_stream(X0 if device == 0 else X1, 256, 0, device + 2)
    assert [(l.device, l.stream) for l in rec.launches] == [(0, 0), (1, 0), (0, 0), (1, 0)]
    assert [l.params[-1] for l in rec.launches] == \
        [np.float32(a).tobytes() for a in (2, 3, 2, 3)]
    # a stream of device 1 stays device 1's whichever context is current
    with two_devices() as rec:
        rec.use_device(0)
        on_stream(X1, 256, S1, 1)
        rec.use_device(1)
        on_stream(X0, 256, S0, 1)
    assert [(l.device, l.stream) for l in rec.launches] == [(1, S1), (0, S0)]


def test_the_image_is_loaded_once_and_into_each_context_once():
    @cuda.jit
    def fresh(x):
        x[cuda.grid(1)] = 1

    @njit
    def go(x, s):
        fresh[1, 32, s](f32(x, 32))

    with two_devices() as rec:
        for _ in range(5):
            go(X0, S0)
            go(X1, S1)
    assert len(rec.loads) == 1  # cuLibraryLoadData: one library for the process
    assert Counter(l.device for l in rec.launches) == {0: 5, 1: 5}
    name = rec.launches[0].kernel
    assert rec.context_loads == [(rec.primary_context(0), name),
                                 (rec.primary_context(1), name)]


def test_a_thread_per_device():
    # the recorder's current context is per thread, as the driver's
    out = {}

    def run(device):
        rec.use_device(device)
        for _ in range(20):
            on_stream(X0 + device, 64, 0, device)
        out[device] = True

    with two_devices() as rec:
        threads = [threading.Thread(target=run, args=(d,)) for d in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert out == {0: True, 1: True}
    # every launch went to its thread's device with that thread's array
    assert Counter((l.device, data(l)) for l in rec.launches) == {(0, X0): 20, (1, X0 + 1): 20}


def test_shared_memory_is_raised_once_on_each_launchs_device():
    rec = CountingDriver(compute_capability={0: (9, 0), 1: (9, 0)})
    rec.add_stream(S0, 0)
    rec.add_stream(S1, 1)
    with rec:
        on_both(X0, X1, 128, S0, S1, 100 * KIB)
        cold = rec.cold_queries
        for size in (100 * KIB, 200 * KIB, 4 * KIB, 100 * KIB):
            on_both(X0, X1, 128, S0, S1, size)
        assert rec.cold_queries == cold  # both devices known: no cold path again
    name = rec.launches[0].kernel
    assert rec.kernel_attributes == [(name, MAX_DYNAMIC, OPTIN, 0), (name, MAX_DYNAMIC, OPTIN, 1)]
    assert [l.device for l in rec.launches] == [0, 1] * 5


class _ThreadContextDriver(RecordingDriver):
    """A cuStreamGetCtx answering the current context, whatever the stream:
    what a launch's device taken from the thread would see."""

    def _stream_ctx(self, stream, out):
        return super()._stream_ctx(0, out)


@pytest.mark.parametrize("driver, refused", [(RecordingDriver, False),
                                             (_ThreadContextDriver, True)])
def test_the_opt_in_follows_the_stream_not_the_current_context(driver, refused):
    # Device 0 is current and the launch's stream is device 1's: the limit
    # must be raised on device 1, where the kernel runs. Were the device the
    # current context's, device 0's would be raised and device 1 would refuse
    # the launch, as the driver would (the guard of the first case).
    @cuda.jit
    def one_shared(x):
        s = cuda.shared.array(0, numba.float32)
        s[0] = 1
        x[0] = s[0]

    @njit
    def go(x, stream):
        return one_shared[1, 32, stream, 100 * KIB].launch_status(f32(x, 1))

    rec = driver(compute_capability={0: (9, 0), 1: (9, 0)})
    rec.add_stream(S1, 1)
    with rec:
        status = go(X1, S1)
    name = "one_shared"
    devices = [dev for kernel, _, _, dev in rec.kernel_attributes if name in kernel]
    if refused:
        assert (status, devices, rec.launches) == (1, [0], [])  # CUDA_ERROR_INVALID_VALUE
    else:
        assert (status, devices, [l.device for l in rec.launches]) == (0, [1], [1])


# -- occupancy and clusters: the current context's device --------------------------

def small_sm(block, smem):
    return 1 if 1 <= block <= 1024 else 0


@njit
def occupancy(x, stream):
    cfg = scale[4, 256, stream]
    blocks = cfg.max_active_blocks(f32(x, 1024), np.float32(1))
    grid, block = cfg.max_potential_block_size(f32(x, 1024), np.float32(1))
    clusters = scale[4, 256, stream, 0, 2].max_active_clusters(f32(x, 1024), np.float32(1))
    return blocks, grid, block, clusters


def test_occupancy_and_cluster_queries_answer_for_the_current_device():
    rec = two_devices(occupancy={0: lambda b, s: 8 if b <= 1024 else 0, 1: small_sm})
    rec.multiprocessors = {0: 132, 1: 20}
    with rec:
        rec.use_device(0)
        on_device0 = occupancy(X0, S0)
        rec.use_device(1)
        on_device1 = occupancy(X1, S1)
        # the function queried is the current context's: device 1's answer
        # whatever the configuration's stream is
        mixed = occupancy(X0, S0)
    assert on_device0 == (8, 8 * 132, 1024, 8 * 132 // 2)
    assert on_device1 == mixed == (1, 20, 1024, 20 // 2)
    assert [q.device for q in rec.occupancy_queries] == [0] * 3 + [1] * 6
    # the kernel was loaded into each device's context for the queries
    assert [c for c, _ in rec.functions] == [rec.primary_context(d) for d in [0] * 3 + [1] * 6]


# -- graphs --------------------------------------------------------------------------

@njit
def record_on(x, n, stream, a):
    graphs.begin_capture(stream)
    scale[(n + 127) // 128, 128, stream](f32(x, n), np.float32(a))
    scale[(n + 127) // 128, 128, stream](f32(x, n), np.float32(a + 1))
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe


@njit
def replay(exe, stream):
    return exe.launch_status(stream)


def test_graphs_recorded_and_replayed_per_device():
    with two_devices() as rec:
        rec.use_device(0)
        exe0 = record_on(X0, 256, S0, 2)
        exe1 = record_on(X1, 256, S1, 5)  # device 1's, though device 0 is current
        launched = len(rec.launches)
        assert (replay(exe0, S0), replay(exe1, S1)) == (0, 0)
        # a plain graph on another device's stream runs where it was
        # recorded (the driver's rule); only ordered by that stream
        assert replay(exe0, S1) == 0
        h0, h1 = exe0.handle, exe1.handle
        exe0.destroy(), exe1.destroy()  # fake handles: never the real driver's
    assert launched == 0  # captured, not run
    assert (rec.execs[h0].device, rec.execs[h1].device) == (0, 1)
    assert [g.device for g in rec.graphs.values()] == [0, 1]
    assert [(l.device, l.stream, l.graph) for l in rec.launches] == [
        (0, S0, h0), (0, S0, h0), (1, S1, h1), (1, S1, h1), (0, S1, h0), (0, S1, h0)]
    assert [l.params[-1] for l in rec.launches[2:4]] == [np.float32(5).tobytes(),
                                                         np.float32(6).tobytes()]


@njit
def record_loop(c, stream, body):
    cs = numba.carray(ncl.as_voidptr(c), (2,), np.int32)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream, 1)
    graphs.begin_body(body, graphs.add_while(stream, h))
    count_down[1, 32, body](cs, h)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe, h


@njit
def replay_raising(exe, stream):
    exe.launch(stream)


def test_conditional_nodes_replay_on_their_device_and_are_refused_on_the_other():
    with two_devices() as rec:
        rec.add_stream(0x5180, 1)  # device 1's body stream
        rec.use_device(0)
        exe, h = record_loop(X1, S1, 0x5180)  # recorded on device 1, device 0 current
        assert known_devices()[exe.handle] == 1
        assert replay(exe, S1) == 0
        assert replay(exe, S0) == INVALID_CONTEXT  # refused before the driver
        with pytest.raises(ncl.CudaGraphError) as info:
            replay_raising(exe, S0)
        rec.use_device(1)
        assert replay(exe, 0) == 0  # the default stream of the current context: device 1's
        rec.use_device(0)
        assert replay(exe, 0) == INVALID_CONTEXT
        handle = exe.handle
        exe.destroy()  # forgotten with it
        assert handle not in known_devices()
    # the handle and node belong to device 1's context: the stream's, not the current one
    assert rec.handles[h.handle].context == rec.primary_context(1)
    assert rec.graph_launches == [(handle, S1), (handle, 0)]
    assert (rec.execs[handle].device, [g.device for g in rec.graphs.values()]) == (1, [1, 1])
    text = str(info.value)
    assert "CUDA_ERROR_INVALID_CONTEXT" in text and info.value.operation == "launch"
    assert ("the graph has conditional nodes, which belong to the device it was recorded on, "
            "and the stream is of another device") in text


def test_conditional_graphs_on_each_device():
    with two_devices() as rec:
        rec.add_stream(0x5080, 0)
        rec.add_stream(0x5180, 1)
        exe0, h0 = record_loop(X0, S0, 0x5080)
        exe1, h1 = record_loop(X1, S1, 0x5180)
        assert (replay(exe0, S0), replay(exe1, S1)) == (0, 0)
        assert (replay(exe0, S1), replay(exe1, S0)) == (INVALID_CONTEXT, INVALID_CONTEXT)
        noted = known_devices()
        handles = exe0.handle, exe1.handle
        exe0.destroy(), exe1.destroy()
    assert (noted[handles[0]], noted[handles[1]]) == (0, 1)
    assert [rec.handles[h.handle].context for h in (h0, h1)] == [rec.primary_context(0),
                                                                 rec.primary_context(1)]
    assert rec.graph_launches == [(handles[0], S0), (handles[1], S1)]


# -- a C library from two threads, one per device ------------------------------------

@pytest.fixture(scope="module")
def c_threads(tmp_path_factory):
    if shutil.which(os.environ.get("CC") or "cc") is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("aotdevices")
    lib = aot.build(str(d / "libncldev.so"), {"saxpy_launch": K.saxpy_launch,
                                               "tile_launch": K.tile_launch})
    exe = str(d / "devices")
    subprocess.run(["cc", "-O1", "-pthread", "-DP(x)=ncldev_##x", "-include", lib.header,
                    "-o", exe, os.path.join(HERE, "aot_devices.c"), "-L", str(d), "-lncldev",
                    "-Wl,-rpath," + str(d)], check=True, capture_output=True)

    def run(*args):
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()
    return run


def _lines(out, word):
    return [line.split()[1:] for line in out if line.startswith(word + " ")]


@pytest.mark.parametrize("streams", ["own", "cross"])
def test_c_library_from_a_thread_per_device(c_threads, streams):
    out = c_threads(streams, "stream")
    for thread, *statuses in _lines(out, "statuses"):
        assert statuses == ["0"] * 100, (thread, statuses)
    launches = _lines(out, "launch")
    assert len(launches) == 200
    for thread, kernel, device, current in launches:
        # each runs on its stream's device; the thread's context is current
        other = str(1 - int(thread))
        assert current == thread and device == (thread if streams == "own" else other)
    # the limit raised once per device, for the kernel launched above 48 KiB
    attrs = sorted(_lines(out, "attr"))
    assert [(a[1], a[2], a[3]) for a in attrs] == [("8", str(OPTIN), "0"), ("8", str(OPTIN), "1")]
    assert all("tile" in a[0] for a in attrs)
    # two images, each loaded once for the process (a thread losing the race
    # to publish its handle unloads its copy) and into each context once
    (loads, _, unloads), = [line.split()[1:] for line in out if line.startswith("loads ")]
    assert int(loads) - int(unloads) == 2
    contexts = _lines(out, "context")
    assert len(contexts) == 4 and {d for d, _ in contexts} == {"0", "1"}


def test_c_library_guard_launch_device_taken_from_the_thread(c_threads):
    # the guard of the test above: were a launch's device the thread's (a
    # cuStreamGetCtx answering the current context), the current device's
    # limit would be raised, and a launch on the other device's stream
    # refused there until that device's own thread raised it
    out = c_threads("cross", "current")
    statuses = {thread: rest for thread, *rest in _lines(out, "statuses")}
    assert statuses["0"][1::2] == ["1"] * 50  # thread 0: device 1 not raised yet
    assert statuses["1"] == ["0"] * 100  # device 0 raised by then
    assert statuses["0"][0::2] == ["0"] * 50  # saxpy needs no opt-in


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(device_count=-1), ValueError, "device_count must be between 1 and"),
    (dict(device_count=0), ValueError, "device_count must be between 1 and"),
    (dict(device_count=2.0), TypeError, "device_count must be an integer, not 2.0"),
    (dict(driver_version="13000"), TypeError, "driver_version must be an integer, not '13000'"),
    (dict(driver_version=0), ValueError, "driver_version must be between 1 and"),
    (dict(launch_status=-1), ValueError, "launch_status must be between 0 and"),
    (dict(load_status=True), TypeError, "load_status must be an integer, not True"),
    (dict(has_context=0), TypeError, "has_context must be True or False, not 0"),
    (dict(load_during_capture="no"), TypeError, "load_during_capture must be True or False"),
    (dict(occupancy=5), TypeError, "occupancy must be a function"),
])
def test_recording_driver_arguments_are_checked(kwargs, error, text):
    with pytest.raises(error, match=r"^RecordingDriver\(\): " + re.escape(text)):
        RecordingDriver(**kwargs)


@pytest.mark.parametrize("ordinal, error", [(2, ValueError), (-1, ValueError),
                                            (7, ValueError), (1.0, TypeError)])
def test_use_device_of_a_device_the_fake_does_not_have(ordinal, error):
    rec = RecordingDriver(device_count=2)
    with pytest.raises(error, match=r"^RecordingDriver.use_device: ordinal must be .*"
                                    r"the fake has 2 devices"):
        rec.use_device(ordinal)
