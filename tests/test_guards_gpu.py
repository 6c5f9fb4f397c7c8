"""The graph, occupancy and event guards on a GPU: what the real driver
answers where the recording driver models it (node attributes, captures'
CUDA_ERROR_ILLEGAL_STATE, events never recorded), and that updates the
guards accept replay correctly (random inputs, outputs poisoned first,
compared with NumPy)."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from support.cluster_kernels import cluster_info
from numba_cuda_launch import graphs

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()
INVALID_VALUE = 1


def ptr(devarray):
    return devarray.__cuda_array_interface__["data"][0]


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = a * x[i] + b


@cuda.jit
def grid_axpb(x, a, b):
    i = cuda.grid(1)
    cuda.cg.this_grid().sync()  # grid sync: numba-cuda marks the kernel cooperative
    if i < x.size:
        x[i] = a * x[i] + b


@njit
def view(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


@njit
def record_axpb(xp, n, stream):
    graphs.begin_capture(stream)
    axpb[(n + 127) // 128, 128, stream](view(xp, n), 1.0, 0.0)
    node = graphs.last_launch(stream)
    return graphs.end_capture(stream), node


@njit
def update_and_replay(exe, node, xp, n, stream, a, b, grid_sync):
    if grid_sync:
        status = exe.update_launch_status(node, grid_axpb[(n + 127) // 128, 128], view(xp, n),
                                          a, b)
    else:
        status = exe.update_launch_status(node, axpb[(n + 127) // 128, 128], view(xp, n), a, b)
    if status == 0:
        exe.launch(stream)
    return status


def test_plain_node_refuses_grid_sync_kernel_and_takes_a_plain_one():
    n = 4_096
    x0 = rng.standard_normal(n).astype(np.float32)
    dx = cuda.to_device(x0)
    stream = cuda.stream()
    graph, node = record_axpb(ptr(dx), n, stream)
    exe = graph.instantiate()
    a, b = rng.uniform(0.5, 1.5), rng.standard_normal()
    assert update_and_replay(exe, node, ptr(dx), n, stream, a, b, True) == INVALID_VALUE
    stream.synchronize()
    np.testing.assert_array_equal(dx.copy_to_host(), x0)  # nothing replayed
    assert update_and_replay(exe, node, ptr(dx), n, stream, a, b, False) == 0
    stream.synchronize()
    want = (a * x0.astype(np.float64) + b).astype(np.float32)
    np.testing.assert_allclose(dx.copy_to_host(), want, rtol=2e-6, atol=1e-6)
    exe.destroy()
    graph.destroy()


@njit
def record_grid_axpb(xp, n, stream):
    graphs.begin_capture(stream)
    status = grid_axpb[(n + 127) // 128, 128, stream].launch_status(view(xp, n), 1.0, 0.0)
    found, node = graphs.last_launch_status(stream)
    ended, graph = graphs.end_capture_status(stream)
    return status or found or ended, graph, node


def test_cooperative_node_takes_a_grid_sync_update():
    n = 1_024
    x0 = rng.standard_normal(n).astype(np.float32)
    dx = cuda.to_device(x0)
    stream = cuda.stream()
    status, graph, node = record_grid_axpb(ptr(dx), n, stream)
    # Drivers since CUDA 12.0 capture cooperative launches: a failure here is one
    assert status == 0, "cooperative launch not captured: %s" % ncl.error_name(status)
    exe = graph.instantiate()
    a, b = rng.uniform(0.5, 1.5), rng.standard_normal()
    # The node's cooperative attribute (cuGraphKernelNodeGetAttribute) lets it in.
    assert update_and_replay(exe, node, ptr(dx), n, stream, a, b, True) == 0
    stream.synchronize()
    want = (a * x0.astype(np.float64) + b).astype(np.float32)
    np.testing.assert_allclose(dx.copy_to_host(), want, rtol=2e-6, atol=1e-6)
    exe.destroy()
    graph.destroy()


def _cc():
    return tuple(cuda.get_current_device().compute_capability) if cuda.is_available() else (0, 0)


@njit
def record_clusters(op, blocks, gx, stream):
    out = numba.carray(ncl.as_voidptr(op), (blocks, 3), np.uint32)
    graphs.begin_capture(stream)
    cluster_info[gx, 32, stream, 0, 4](out)
    node = graphs.last_launch(stream)
    return graphs.end_capture(stream), node


@njit
def regrid(exe, node, op, blocks, gx, stream):
    out = numba.carray(ncl.as_voidptr(op), (blocks, 3), np.uint32)
    status = exe.update_launch_status(node, cluster_info[gx, 32], out)
    if status == 0:
        exe.launch(stream)
    return status


@pytest.mark.skipif("not _cc() >= (9, 0)", reason="clusters need sm_90")
def test_update_keeps_the_node_cluster_and_refuses_partial_clusters():
    stream = cuda.stream()
    dout = cuda.to_device(np.full((16, 3), 0xFFFFFFFF, np.uint32))
    graph, node = record_clusters(ptr(dout), 16, 8, stream)
    exe = graph.instantiate()
    assert regrid(exe, node, ptr(dout), 16, 6, stream) == INVALID_VALUE  # 6 blocks, clusters of 4
    assert regrid(exe, node, ptr(dout), 16, 12, stream) == 0
    stream.synchronize()
    got = dout.copy_to_host()[:12]
    bx = np.arange(12)
    np.testing.assert_array_equal(got[:, 0], bx % 4)  # rank in a cluster of 4
    np.testing.assert_array_equal(got[:, 1], np.full(12, 4))
    np.testing.assert_array_equal(got[:, 2], bx // 4)
    np.testing.assert_array_equal(dout.copy_to_host()[12:], 0xFFFFFFFF)
    exe.destroy()
    graph.destroy()


def test_capture_state_errors_are_the_drivers_and_explained():
    stream = cuda.stream()
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.end_capture(stream)
    assert info.value.name == "CUDA_ERROR_ILLEGAL_STATE"
    assert "no capture is in progress on this stream" in str(info.value)
    graphs.begin_capture(stream)
    try:
        with pytest.raises(ncl.CudaGraphError) as info:
            graphs.begin_capture(stream)
        assert info.value.name == "CUDA_ERROR_ILLEGAL_STATE"
        assert "the stream is already capturing" in str(info.value)
    finally:
        assert graphs.abort_capture(stream) == 0


@pytest.mark.parametrize("handle", [1, 2])
def test_default_stream_handles_refused(handle):
    assert graphs.begin_capture_status(handle) == INVALID_VALUE
    stream = cuda.stream()  # captures on a stream of one's own still work
    graphs.begin_capture(stream)
    assert graphs.end_capture(stream).destroy() == 0


@njit
def blocks_status(b):
    return axpb[1, b].max_active_blocks_status(view(0, 1), 1.0, 0.0)


def test_occupancy_block_product_cannot_wrap():
    assert blocks_status((3340214413, 276131137, 20)) == (INVALID_VALUE, 0)
    status, blocks = blocks_status((4, 1, 1))
    assert status == 0 and blocks > 0


@njit
def elapsed_unrecorded_start():
    a = ncl.event()
    b = ncl.event()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def test_elapsed_time_of_an_event_never_recorded_names_it():
    with pytest.raises(ncl.CudaError) as info:
        elapsed_unrecorded_start()
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    assert "the start event was never recorded" in str(info.value)
