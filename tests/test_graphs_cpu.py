"""CUDA graphs, cluster launches and occupancy queries from compiled code,
against the recording fake driver (no GPU).

The fake plays the driver's part: a capture records launches into a graph,
a replay appends the graph's launches (with their current parameters) to
``launches``, updates change them. Expected parameter bytes are built here
from the values passed (addresses, ``struct.pack``), never read back from
the code under test."""

import ctypes
import os
import shutil
import struct
import subprocess
import threading

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from numba_cuda_launch.kernels.numba_cuda import SOURCE as numba_cuda_source
from numba_cuda_launch.launch import launchconfig
from numba_cuda_launch.testing import RecordingDriver


@cuda.jit("void(float32[::1], float32)")
def scale(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


@cuda.jit("void(float32[::1], float32[::1])")
def shift(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i] + 1


SCALE_TYPES = (nt.float32[::1], nt.float32)


def params_of(kernel, argtypes):
    """{parameter name: index} of a kernel's flattened parameters."""
    return {p.name: i for i, p in enumerate(ncl.kernel_handle(kernel, argtypes).params)}


def f32(v):
    return struct.pack("<f", v)


def u64(v):
    return int(v).to_bytes(8, "little")


@njit
def view(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


@njit
def record_two(xp, yp, n, stream, a):
    x, y = view(xp, n), view(yp, n)
    graphs.begin_capture(stream)
    scale[(n + 31) // 32, 32, stream](x, a)
    node = graphs.last_launch(stream)
    shift[(n + 31) // 32, 32, stream](x, y)
    graph = graphs.end_capture(stream)
    return graph, node


@njit
def instantiate_and_replay(graph, stream, times):
    exe = graph.instantiate()
    for _ in range(times):
        exe.launch(stream)
    return exe


def test_capture_records_and_replay_runs(fake_driver):
    graph, node = record_two(0x1000, 0x2000, 100, 0x51, 2.5)
    assert isinstance(graph, graphs.Graph) and isinstance(node, graphs.KernelNode)
    assert fake_driver.launches == []  # captured, not run
    recorded = fake_driver.graphs[graph.handle]
    assert recorded.mode == graphs.CAPTURE_THREAD_LOCAL
    assert [l.kernel for l in recorded.launches] == [
        scale.overloads[SCALE_TYPES].entry_name,
        shift.overloads[(nt.float32[::1],) * 2].entry_name]
    assert recorded.nodes[0] == node.handle
    idx = params_of(scale, SCALE_TYPES)
    first = recorded.launches[0]
    assert first.params[idx["x.data"]] == u64(0x1000) and first.params[idx["a"]] == f32(2.5)
    assert first.grid == (4, 1, 1) and first.stream == 0x51

    exe = instantiate_and_replay(graph, 0x77, 3)
    assert isinstance(exe, graphs.GraphExec) and exe.handle in fake_driver.execs
    assert fake_driver.graph_launches == [(exe.handle, 0x77)] * 3
    assert len(fake_driver.launches) == 6
    assert all(l.graph == exe.handle and l.stream == 0x77 for l in fake_driver.launches)
    assert [l.params for l in fake_driver.launches[:2]] == [l.params for l in recorded.launches]
    assert exe.destroy() == 0 and graph.destroy() == 0
    assert fake_driver.live_graphs() == []
    assert exe.handle == 0 and exe.destroy() == 0  # again from Python: nothing to do


@njit
def replay_with_new_arguments(graph, node, stream, xp, n, factors):
    exe = graph.instantiate()
    x = view(xp, n)
    for i in range(factors.size):
        exe.update_launch(node, scale[(n + 63) // 64, 64, 0, 16], x, factors[i])
        exe.launch(stream)
    exe.destroy()


def test_update_launch_changes_one_recorded_launch(fake_driver):
    graph, node = record_two(0x1000, 0x2000, 100, 0x51, 2.5)
    replay_with_new_arguments(graph, node, 0x52, 0x9000, 200, np.array([3.0, -1.5]))
    idx = params_of(scale, SCALE_TYPES)
    updated = [l for l in fake_driver.launches if l.kernel == graph_kernel(scale)]
    untouched = [l for l in fake_driver.launches if l.kernel == graph_kernel(shift)]
    assert [l.params[idx["a"]] for l in updated] == [f32(3.0), f32(-1.5)]
    assert all(l.params[idx["x.data"]] == u64(0x9000) for l in updated)
    assert all(l.params[idx["x.shape[0]"]] == u64(200) for l in updated)
    assert all(l.grid == (4, 1, 1) and l.block == (64, 1, 1) and l.sharedmem == 16
               for l in updated)
    # The other recorded launch keeps what was captured.
    shift_idx = params_of(shift, (nt.float32[::1],) * 2)
    assert all(l.params[shift_idx["y.data"]] == u64(0x2000) and l.grid == (4, 1, 1)
               for l in untouched)
    assert len(fake_driver.node_updates) == 2
    graph.destroy()


def graph_kernel(dispatcher):
    (kernel,) = dispatcher.overloads.values()
    return kernel.entry_name


@njit
def update_from_recapture(stream, a, b):
    g1, _ = record_two(0x1000, 0x2000, 64, stream, a)
    exe = g1.instantiate()
    g2, _ = record_two(0x3000, 0x4000, 64, stream, b)
    exe.update(g2)
    exe.launch(stream)
    g1.destroy()
    g2.destroy()
    return exe.destroy()


def test_exec_update_takes_a_recaptured_graph(fake_driver):
    assert update_from_recapture(0x51, 2.0, 4.0) == 0
    idx = params_of(scale, SCALE_TYPES)
    first = fake_driver.launches[0]
    assert first.params[idx["a"]] == f32(4.0) and first.params[idx["x.data"]] == u64(0x3000)
    assert fake_driver.live_graphs() == []


@njit
def update_with_other_topology(stream):
    x = view(0x1000, 64)
    graphs.begin_capture(stream)
    scale[2, 32, stream](x, 1.0)
    g1 = graphs.end_capture(stream)
    exe = g1.instantiate()
    g2, _ = record_two(0x1000, 0x2000, 64, stream, 1.0)
    status = exe.update_status(g2)
    exe.update(g2)
    return status


def test_exec_update_refused_says_why(fake_driver):
    with pytest.raises(ncl.CudaGraphError) as info:
        update_with_other_topology(0x51)
    assert info.value.name == "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"
    assert info.value.operation == "update" and "topology" in str(info.value)
    assert isinstance(info.value, ncl.CudaLaunchError)


# -- status forms and failures reported --------------------------------------------

@njit
def statuses_on(stream):
    begin = graphs.begin_capture_status(stream)
    end, graph = graphs.end_capture_status(stream)
    return begin, end, graph


def test_status_forms(fake_driver):
    begin, end, graph = statuses_on(0)
    assert begin == 900 and end == 401 and graph.handle == 0  # legacy stream; not capturing
    begin, end, graph = statuses_on(0x51)
    assert begin == 0 and end == 0 and graph.handle in fake_driver.graphs


def test_legacy_stream_capture_refused_with_reason(fake_driver):
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(0)
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    assert "legacy default stream (0) cannot be captured" in str(info.value)


@njit
def last_launch_without_launch(stream, begin):
    if begin:
        graphs.begin_capture(stream)
    return graphs.last_launch(stream)


def test_last_launch_says_why_there_is_none(fake_driver):
    with pytest.raises(ncl.CudaGraphError, match="not capturing"):
        last_launch_without_launch(0x51, False)
    with pytest.raises(ncl.CudaGraphError, match="not one launch"):
        last_launch_without_launch(0x51, True)
    assert graphs.abort_capture(0x51) == 0
    assert graphs.abort_capture(0x51) == 0  # nothing to end: fine


@njit
def capture_with_legacy_launch(stream):
    x = view(0x1000, 64)
    graphs.begin_capture(stream)
    scale[2, 32, stream](x, 1.0)
    return scale[2, 32, 0].launch_status(x, 1.0), graphs.end_capture_status(stream)[0]


@njit
def capture_with_raising_legacy_launch(stream):
    x = view(0x1000, 64)
    graphs.begin_capture(stream)
    scale[2, 32, 0](x, 1.0)
    return graphs.end_capture(stream)


def test_uncapturable_launch_reported(fake_driver):
    launched, ended = capture_with_legacy_launch(0x51)
    assert (launched, ended) == (906, 901)  # implicit legacy sync; capture invalidated
    with pytest.raises(ncl.CudaLaunchError) as info:
        capture_with_raising_legacy_launch(0x51)
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
    assert "legacy default stream" in str(info.value)
    # The exception left the stream capturing (invalidated): end it from Python.
    with pytest.raises(ncl.CudaGraphError, match="INVALIDATED"):
        graphs.end_capture(0x51)
    assert graphs.abort_capture(0x51) == 0 and fake_driver.live_graphs() == []


def test_abort_capture_after_failure(fake_driver):
    with pytest.raises(ncl.CudaLaunchError):
        capture_with_raising_legacy_launch(0x53)
    assert graphs.abort_capture(0x53) == 0
    assert statuses_on(0x53)[0] == 0  # the stream can capture again


def test_image_load_during_capture_on_old_drivers():
    # Drivers before CUDA 12.3 refuse to load an image during a capture; a
    # fresh function loads its image on its first launch.
    def body(stream, preload):
        x = view(0x1000, 64)
        if preload:
            scale[2, 32].preload(x, 1.0)
        graphs.begin_capture(stream)
        scale[2, 32, stream](x, 1.0)
        return graphs.end_capture(stream)

    with RecordingDriver(load_during_capture=False) as rec:
        with pytest.raises(ncl.CudaLaunchError) as info:
            njit(body)(0x51, False)
        assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
        assert "cfg.preload" in str(info.value)
        assert graphs.abort_capture(0x51) == 0
        graph = njit(body)(0x51, True)  # loaded before the capture: fine
        assert len(rec.graphs[graph.handle].launches) == 1
        graph.destroy()


def test_end_capture_on_another_thread_refused(fake_driver):
    graphs.begin_capture(0x51)
    out = []
    t = threading.Thread(target=lambda: out.append(graphs.end_capture_status(0x51)[0]))
    t.start()
    t.join()
    assert out == [908]
    assert graphs.end_capture(0x51).destroy() == 0


# -- several threads, release -------------------------------------------------------

@njit(nogil=True)
def capture_and_replay(stream, xp, a, times):
    x = view(xp, 64)
    graphs.begin_capture(stream)
    scale[2, 32, stream](x, a)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    for _ in range(times):
        exe.launch(stream)
    return exe.destroy()


def test_captures_from_several_threads(fake_driver):
    capture_and_replay(0x100, 0x1000, 1.0, 1)  # compile first
    fake_driver.launches.clear()
    results = {}

    def work(k):
        for _ in range(20):
            results.setdefault(k, []).append(
                capture_and_replay(0x100 + k, 0x1000 * (k + 1), float(k), 2))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(v == [0] * 20 for v in results.values()) and len(results) == 4
    idx = params_of(scale, SCALE_TYPES)
    for launch in fake_driver.launches:
        k = launch.stream - 0x100
        assert launch.params[idx["x.data"]] == u64(0x1000 * (k + 1))
        assert launch.params[idx["a"]] == f32(float(k))
    assert len(fake_driver.launches) == 4 * 20 * 2
    assert fake_driver.live_graphs() == []


@njit
def cycles(stream, n):
    x = view(0x1000, 64)
    for i in range(n):
        graphs.begin_capture(stream)
        scale[2, 32, stream](x, 1.0)
        graph = graphs.end_capture(stream)
        exe = graph.instantiate()
        graph.destroy()
        exe.destroy()


def test_every_handle_released(fake_driver):
    cycles(0x51, 1000)
    assert len(fake_driver.graphs) == 1000 and len(fake_driver.execs) == 1000
    assert fake_driver.live_graphs() == []


# -- from Python, from a cfunc --------------------------------------------------------

def test_python_objects_call_compiled_code(fake_driver):
    graph, node = record_two(0x1000, 0x2000, 64, 0x51, 2.0)
    exe = graph.instantiate()
    exe.launch(0x61)
    g2, _ = record_two(0x1000, 0x2000, 64, 0x51, 5.0)
    exe.update(g2)
    exe.launch(0x61)
    idx = params_of(scale, SCALE_TYPES)
    assert [l.params[idx["a"]] for l in fake_driver.launches if l.kernel == graph_kernel(scale)] \
        == [f32(2.0), f32(5.0)]
    assert {exe.destroy(), graph.destroy(), g2.destroy()} == {0}
    assert graph.handle == 0 and "none" in repr(graph)
    with pytest.raises(ncl.CudaGraphError):
        graph.instantiate()  # destroyed: a NULL handle, refused by the driver


@numba.cfunc(nt.int32(nt.voidptr, nt.voidptr, nt.int64))
def cfunc_records_and_replays(stream, xp, n):
    x = numba.carray(xp, (n,), np.float32)
    status = graphs.begin_capture_status(stream)
    if status != 0:
        return status
    status = scale[(n + 31) // 32, 32, stream].launch_status(x, np.float32(3.0))
    ended, graph = graphs.end_capture_status(stream)
    if status != 0 or ended != 0:
        return status or ended
    status, exe = graph.instantiate_status()
    if status == 0:
        status = exe.launch_status(stream)
        exe.destroy()
    graph.destroy()
    return status


def test_cfunc_status_forms(fake_driver):
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64)(cfunc_records_and_replays.address)
    assert fn(0x51, 0x1000, 64) == 0
    assert len(fake_driver.launches) == 1 and fake_driver.launches[0].graph
    assert fn(0, 0x1000, 64) == 900
    assert fake_driver.live_graphs() == []


# -- typing errors -----------------------------------------------------------------

def compile_error(fn, *args):
    with pytest.raises(TypingError) as info:
        njit(fn)(*args)
    return str(info.value)


def test_typing_errors():
    def bad_stream(s):
        graphs.begin_capture(s)
    assert "the stream must be a raw CUstream" in compile_error(bad_stream, 1.5)

    def bad_node(p):
        graph, node = record_two(p, p, 64, 1, 1.0)
        exe = graph.instantiate()
        exe.update_launch(graph, scale[1, 32], view(p, 64), 1.0)
    msg = compile_error(bad_node, 0x1000)
    assert "node must be a KernelNode" in msg

    def bad_args(p):
        graph, node = record_two(p, p, 64, 1, 1.0)
        exe = graph.instantiate()
        exe.update_launch(node, scale[1, 32], view(p, 64), 1.0, 2.0)
    assert "kernel 'scale' takes 2 argument(s)" in compile_error(bad_args, 0x1000)

    def bad_update(p):
        graph, node = record_two(p, p, 64, 1, 1.0)
        graph.instantiate().update(node)
    assert "expected a Graph" in compile_error(bad_update, 0x1000)


def test_update_launch_refuses_out_of_range_values(fake_driver):
    @njit
    def update(graph, node, g):
        exe = graph.instantiate()
        status = exe.update_launch_status(node, scale[g, 32], view(0x1000, 64), 1.0)
        exe.update_launch(node, scale[g, 32], view(0x1000, 64), 1.0)
        return status

    graph, node = record_two(0x1000, 0x2000, 64, 0x51, 2.0)
    with pytest.raises(ncl.CudaGraphError) as info:
        update(graph, node, 0)
    assert info.value.operation == "update_launch" and info.value.kernel == "scale"
    assert "griddim has an item outside" in str(info.value)
    assert fake_driver.node_updates == []


# -- clusters -------------------------------------------------------------------------

@njit
def cluster_forms(xp, stream, c):
    x = view(xp, 64)
    scale[8, 32, stream, 0, 2](x, 1.0)
    scale[(4, 2), 32, stream, 0, (2, 2)](x, 1.0)
    scale[(4, 2, 2), (32, 1, 1), stream, 64, (1, 1, 2)](x, 1.0)
    scale[8, 32, stream, 0, c](x, 1.0)
    scale[8, 32, stream](x, 1.0)


def test_cluster_launches(fake_driver):
    cluster_forms(0x1000, 0x51, 4)
    got = [(l.grid, l.cluster, l.sharedmem) for l in fake_driver.launches]
    assert got == [((8, 1, 1), (2, 1, 1), 0), ((4, 2, 1), (2, 2, 1), 0),
                   ((4, 2, 2), (1, 1, 2), 64), ((8, 1, 1), (4, 1, 1), 0),
                   ((8, 1, 1), None, 0)]
    assert all(l.stream == 0x51 and not l.cooperative for l in fake_driver.launches)


@cuda.jit
def coop_kernel(x):
    cuda.cg.this_grid().sync()  # grid sync: numba-cuda marks the kernel cooperative


def test_cooperative_cluster_launch_uses_attributes(fake_driver):
    @njit
    def launch(p):
        x = view(p, 64)
        coop_kernel[4, 32, 0, 0, 2](x)
        coop_kernel[4, 32](x)

    launch(0x1000)
    assert coop_kernel.overloads[(nt.float32[::1],)].cooperative  # numba-cuda's own mark
    assert [(l.cooperative, l.cluster) for l in fake_driver.launches] == [
        (True, (2, 1, 1)), (True, None)]


@njit
def cluster_status(g, c):
    return scale[g, 32, 0, 0, c].launch_status(view(0x1000, 64), 1.0)


@njit
def cluster_raising(g, c):
    scale[g, 32, 0, 0, c](view(0x1000, 64), 1.0)


def test_cluster_run_time_checks(fake_driver):
    assert cluster_status(6, 4) == 1 and cluster_status(8, 0) == 1
    assert cluster_status(8, 2**32) == 1
    assert fake_driver.launches == []
    with pytest.raises(ncl.CudaLaunchError, match="not a multiple of the cluster"):
        cluster_raising(6, 4)
    with pytest.raises(ncl.CudaLaunchError, match="cluster has an item outside"):
        cluster_raising(8, -1)
    assert cluster_status(8, 4) == 0
    assert fake_driver.launches[0].cluster == (4, 1, 1)


@pytest.mark.parametrize("config, what", [
    ("[6, 32, 0, 0, 4]", "griddim must be a multiple of the cluster dimensions"),
    ("[(4, 3), 32, 0, 0, (2, 2)]", "along y the grid has 3 blocks and the cluster 2"),
    ("[8, 32, 0, 0, 0]", "cluster must be 1..2**32-1, got 0 in x"),
    ("[8, 32, 0, 0, 1.5]", "cluster must be an integer or a tuple of 1 to 3 integers"),
    ("[8, 32, 0, 0, (1, 1, 1, 1)]", "cluster must be an integer or a tuple"),
])
def test_cluster_typing_errors(config, what):
    ns = {"scale": scale, "view": view}
    exec("def f(p):\n    scale%s(view(p, 64), 1.0)\n" % config, ns)
    msg = compile_error(ns["f"], 0x1000)
    assert "kernel 'scale'" in msg and what in msg


def test_cluster_needs_hopper(monkeypatch):
    # the architecture typing checks clusters against (the device's, or the
    # configured one): an Ampere one here
    monkeypatch.setattr(launchconfig, "target_compute_capability", lambda: (8, 0))

    def f(p):
        scale[8, 32, 0, 0, 2](view(p, 64), 1.0)
    msg = compile_error(f, 0x1000)
    assert "thread-block clusters need compute capability 9.0 or newer" in msg
    assert "8.0" in msg


# -- occupancy ------------------------------------------------------------------------

def fake_occupancy(block, smem):
    return 1000 + block // 8 + smem  # distinctive answers


@njit
def occupancy_queries(xp, bx, by, smem):
    x = view(xp, 64)
    cfg = scale[1, (bx, by), 0, smem]
    blocks = cfg.max_active_blocks(x, 1.0)
    status, blocks2 = cfg.max_active_blocks_status(x, 1.0)
    grid, block = cfg.max_potential_block_size(x, 1.0)
    clusters = scale[8, bx, 0, smem, 2].max_active_clusters(x, 1.0)
    return blocks, status, blocks2, grid, block, clusters


def test_occupancy_queries():
    with RecordingDriver(occupancy=fake_occupancy) as rec:
        got = occupancy_queries(0x1000, 64, 2, 100)
    blocks, status, blocks2, grid, block, clusters = got
    assert blocks == blocks2 == 1000 + 128 // 8 + 100 and status == 0
    # The potential block size: the best of the fake's model over 32..1024.
    best = max(range(32, 1025, 32), key=lambda b: (b * fake_occupancy(b, 100), b))
    assert (grid, block) == (fake_occupancy(best, 100) * rec.multiprocessors, best)
    assert clusters == fake_occupancy(64, 100) * rec.multiprocessors // 2
    kinds = [(q.kind, q.block_size, q.sharedmem, q.cluster) for q in rec.occupancy_queries]
    assert kinds == [("max_active_blocks", 128, 100, None), ("max_active_blocks", 128, 100, None),
                     ("max_potential_block_size", 0, 100, None),
                     ("max_active_clusters", 64, 100, (2, 1, 1))]
    name = graph_kernel(scale)
    assert all(q.kernel == name for q in rec.occupancy_queries)
    assert rec.launches == []


def test_occupancy_failures_reported(fake_driver):
    @njit
    def too_many_threads(bx, by):
        return scale[1, (bx, by)].max_active_blocks_status(view(0x1000, 64), 1.0)

    @njit
    def no_cluster():
        scale[8, 32].max_active_clusters(view(0x1000, 64), 1.0)

    assert too_many_threads(65536, 65536)[0] == 1
    assert too_many_threads(256, 1) == (0, 8)  # the default model: 2048 // 256
    with pytest.raises(ncl.CudaLaunchError) as info:
        no_cluster()
    assert info.value.name == "CUDA_ERROR_INVALID_CLUSTER_SIZE"
    assert str(info.value).startswith("max_active_clusters of CUDA kernel 'scale' failed")
    assert info.value.what == "max_active_clusters"


def test_occupancy_refusal_names_the_query_not_a_launch(fake_driver):
    @njit
    def negative_block(b):
        return scale[1, b].max_active_blocks(view(0x1000, 64), 1.0)

    with pytest.raises(ncl.CudaLaunchError) as info:
        negative_block(-1)
    assert str(info.value).startswith("max_active_blocks of CUDA kernel 'scale' failed: "
                                      "CUDA_ERROR_INVALID_VALUE (1): ")


# -- layouts and the driver table -----------------------------------------------------

def _cuda_header():
    try:
        import nvidia.cu13
        base = list(nvidia.cu13.__path__)[0]
    except Exception:
        base = None
    for inc in ([os.path.join(base, "include")] if base else []) + ["/usr/local/cuda/include"]:
        if os.path.exists(os.path.join(inc, "cuda.h")):
            return inc
    return None


@pytest.mark.slow
def test_struct_layouts_match_cuda_h(tmp_path):
    inc, cc = _cuda_header(), shutil.which("cc") or shutil.which("gcc")
    if inc is None or cc is None:
        pytest.skip("needs cuda.h and a C compiler")
    src = tmp_path / "layout.c"
    src.write_text(r'''
#include <cuda.h>
#include <stdio.h>
#include <stddef.h>
int main(void) {
  printf("%zu %zu %zu %zu\n", sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, hStream),
         offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs));
  printf("%zu %zu\n", sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value));
  printf("%zu %zu %zu %zu\n", sizeof(CUDA_KERNEL_NODE_PARAMS_v2),
         offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kernelParams),
         offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kern), offsetof(CUDA_KERNEL_NODE_PARAMS_v2, ctx));
  printf("%zu %zu\n", sizeof(CUgraphExecUpdateResultInfo),
         offsetof(CUgraphExecUpdateResultInfo, errorNode));
  printf("%d %d %d\n", CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
         CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  return 0;
}''')
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", inc, str(src), "-o", str(exe)], check=True)
    c = [list(map(int, line.split())) for line in
         subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()]
    from numba.core.registry import cpu_target
    from numba_cuda_launch.cudadrv import graph as rt_graph, launch as launchex
    td = cpu_target.target_context.target_data

    def layout(ty, *fields):
        return [ty.get_abi_size(td)] + [ty.get_element_offset(td, f) for f in fields]
    assert layout(launchex.launch_config_type(), 7, 8, 9) == c[0]
    assert layout(launchex.launch_attribute_type(), 2) == c[1]
    assert layout(rt_graph.kernel_node_params_type(), 8, 10, 11) == c[2]
    assert layout(rt_graph._UPDATE_INFO, 1) == c[3]
    assert [launchex.ATTRIBUTE_CLUSTER_DIMENSION, launchex.ATTRIBUTE_COOPERATIVE,
            graphs.CAPTURE_THREAD_LOCAL] == c[4]
    from numba_cuda_launch.cudadrv import recording
    assert [ctypes.sizeof(recording._LaunchConfigC), ctypes.sizeof(recording._LaunchAttributeC),
            ctypes.sizeof(recording._KernelNodeParamsC),
            ctypes.sizeof(recording._UpdateInfoC)] == [c[0][0], c[1][0], c[2][0], c[3][0]]


def test_driver_without_newer_entry_points_still_launches():
    from numba_cuda_launch.cudadrv import driver

    class OldDriver:
        def __getattr__(self, name):
            if name in driver.OPTIONAL:
                raise AttributeError(name)
            return ctypes.cast(ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0), ctypes.c_void_p)

    lib = OldDriver()
    stub = driver._symbol(lib, "cuGraphLaunch")
    assert ctypes.CFUNCTYPE(ctypes.c_int)(stub)() == driver.CUDA_ERROR_NOT_FOUND
    assert "cuLaunchKernel" not in driver.OPTIONAL and "cuGraphLaunch" in driver.OPTIONAL

    class NoLaunch:
        def __getattr__(self, name):
            raise AttributeError(name)
    with pytest.raises(AttributeError):
        driver._symbol(NoLaunch(), "cuLaunchKernel")


# -- kernels linking CUDA C (cluster registers, griddepcontrol) -------------------------

def test_linked_cuda_c_kernels_compile_without_gpu(fake_driver):
    from support.cluster_kernels import cluster_info, dependent_copy

    @njit
    def launch(p, q):
        out = numba.carray(ncl.as_voidptr(p), (16, 3), np.uint32)
        cluster_info[(4, 2, 2), 32, 0x51, 0, (2, 1, 1)](out)
        x, y = view(p, 64), view(q, 64)
        dependent_copy[2, 32, 0x51](x, y)

    launch(0x1000, 0x2000)
    assert [(l.grid, l.cluster) for l in fake_driver.launches] == [
        ((4, 2, 2), (2, 1, 1)), ((2, 1, 1), None)]
    for kernel in (cluster_info, dependent_copy):
        (overload,) = kernel.overloads.values()
        assert numba_cuda_source.launch_problems(kernel, overload) == []
        # The linked functions are in the image (not left unresolved).
        image = ncl.kernel_handle(kernel, tuple(kernel.overloads)[0]).image
        assert image[:4] == b"\x7fELF"


def test_module_functions_from_python_read_the_stream_as_python_forms_do(fake_driver):
    # (the same check under the simulator: tests/sim/test_sim_graphs.py)
    with pytest.raises(TypeError, match=r"^graphs.begin_capture_status\(\): a stream must be "
                                        r"a stream handle between 0 and 2\*\*64-1, not -1$"):
        graphs.begin_capture_status(-1)
    assert graphs.begin_capture_status(2 ** 64 - 1) == 0
    assert graphs.abort_capture(2 ** 64 - 1) == 0
    with pytest.raises(TypeError, match=r"^KernelNode\(\): handle must be a driver handle"):
        graphs.KernelNode(2 ** 64)


# -- a negative integer stream ------------------------------------------------

# Signed, below 0: no CUstream handle. Each is refused before the driver,
# which would get it sign-extended: -1 as 0xff...ff, a handle that the
# tests below make a capturing stream to show that nothing reached it.
NEGATIVE_STREAMS = [-1, np.int64(-1), np.int32(-2), np.int8(-1)]


def wrapped(s):
    """The handle a negative *s* becomes sign-extended."""
    return np.uint64(int(s) % 2 ** 64)


def compiled(source, stream):
    """``f`` of *source*, its stream ``S`` the argument ``s``, or the constant -1."""
    ns = {"graphs": graphs, "scale": scale, "view": view}
    exec(source.replace("S", "s" if stream is None else stream), ns)
    return njit(ns["f"])


NEGATIVE_STATUSES = """
def f(s, w, exe):
    begin = graphs.begin_capture_status(S)
    graphs.begin_capture(w)
    scale[2, 32, w](view(0x1000, 64), 2.0)
    refused = (graphs.last_launch_status(S)[0], graphs.end_capture_status(S)[0],
               graphs.abort_capture(S), exe.launch_status(S))
    return begin, refused, graphs.end_capture(w)
"""
NEGATIVE_RAISING = """
def f(which, s, exe):
    if which == 0:
        graphs.begin_capture(S)
    elif which == 1:
        graphs.end_capture(S)
    elif which == 2:
        graphs.last_launch(S)
    else:
        exe.launch(S)
"""


@pytest.mark.parametrize("s", NEGATIVE_STREAMS + ["constant"])
def test_a_negative_stream_is_refused_before_the_driver(fake_driver, s):
    constant = "-1" if s == "constant" else None
    w = wrapped(-1 if constant else s)
    recorded = record_two(0x1000, 0x2000, 64, 0x51, 1.0)[0]
    exe = recorded.instantiate()
    statuses, raising = compiled(NEGATIVE_STATUSES, constant), compiled(NEGATIVE_RAISING, constant)
    begin, refused, graph = statuses(-1 if constant else s, w, exe)
    assert begin == 1 and refused == (1, 1, 1, 1)  # CUDA_ERROR_INVALID_VALUE
    # w's capture went on: not begun again, its launch not taken, not ended
    # or aborted; the graph was not launched
    assert len(fake_driver.graphs[graph.handle].launches) == 1
    assert fake_driver.graph_launches == []
    for which, operation in enumerate(["begin_capture", "end_capture", "last_launch", "launch"]):
        with pytest.raises(ncl.CudaGraphError) as info:
            raising(which, -1 if constant else s, exe)
        assert (info.value.name, info.value.operation) == ("CUDA_ERROR_INVALID_VALUE", operation)
        assert "stream is a negative integer" in info.value.detail
    assert graphs.end_capture_status(w)[0] == 401  # no capture began: CUDA_ERROR_ILLEGAL_STATE
    assert fake_driver.graph_launches == []
    assert exe.destroy() == 0 and graph.destroy() == 0 and recorded.destroy() == 0
    assert fake_driver.live_graphs() == []
