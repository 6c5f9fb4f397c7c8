"""Graph, occupancy and stream guards against the recording fake driver (no
GPU): each case refused before the driver is asked, or explained after it
answered, with a message naming what was given and what to do
(docs/reliability.md, "Graphs, occupancy and streams")."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from numba_cuda_launch.testing import RecordingDriver

INVALID_VALUE, NO_DEVICE, ILLEGAL_STATE = 1, 100, 401


@cuda.jit("void(float32[::1], float32)")
def scale(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


@cuda.jit("void(float32[::1], float32)")
def grid_scale(x, a):
    cuda.cg.this_grid().sync()  # grid sync: numba-cuda marks the kernel cooperative
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


@njit
def view(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


# -- graph node updates ----------------------------------------------------------------

@njit
def record_plain(stream):
    graphs.begin_capture(stream)
    scale[4, 32, stream](view(0x1000, 128), 2.0)
    node = graphs.last_launch(stream)
    return graphs.end_capture(stream), node


@njit
def record_grid_sync(stream):
    graphs.begin_capture(stream)
    grid_scale[4, 32, stream](view(0x1000, 128), 2.0)
    node = graphs.last_launch(stream)
    return graphs.end_capture(stream), node


@njit
def record_clustered(stream):
    graphs.begin_capture(stream)
    scale[8, 32, stream, 0, 4](view(0x1000, 256), 2.0)
    node = graphs.last_launch(stream)
    return graphs.end_capture(stream), node


@njit
def put_grid_sync(graph, node):
    exe = graph.instantiate()
    status = exe.update_launch_status(node, grid_scale[4, 32], view(0x2000, 128), 3.0)
    exe.destroy()
    return status


@njit
def put_grid_sync_raising(graph, node):
    exe = graph.instantiate()
    exe.update_launch(node, grid_scale[4, 32], view(0x2000, 128), 3.0)


@njit
def regrid(graph, node, g, c):
    exe = graph.instantiate()
    if c:
        status = exe.update_launch_status(node, scale[g, 32, 0, 0, c], view(0x2000, 256), 3.0)
    else:
        status = exe.update_launch_status(node, scale[g, 32], view(0x2000, 256), 3.0)
    exe.destroy()
    return status


@njit
def regrid_raising(graph, node, g):
    exe = graph.instantiate()
    exe.update_launch(node, scale[g, 32], view(0x2000, 256), 3.0)


def test_grid_sync_kernel_refused_in_a_plain_node(fake_driver):
    graph, node = record_plain(0x51)
    assert put_grid_sync(graph, node) == INVALID_VALUE
    with pytest.raises(ncl.CudaGraphError) as info:
        put_grid_sync_raising(graph, node)
    text = str(info.value)
    assert text.startswith("CUDA graph operation update_launch of kernel 'grid_scale' failed: "
                           "CUDA_ERROR_INVALID_VALUE (1): ")
    assert "synchronises its grid" in text and "recorded from a plain launch" in text
    assert fake_driver.node_updates == []


def test_grid_sync_kernel_accepted_in_a_cooperative_node(fake_driver):
    graph, node = record_grid_sync(0x51)
    assert put_grid_sync(graph, node) == 0
    (_, _, launch), = fake_driver.node_updates
    assert launch.cooperative and launch.grid == (4, 1, 1)


def test_update_grid_must_be_whole_clusters_of_the_node(fake_driver):
    graph, node = record_clustered(0x51)
    assert regrid(graph, node, 6, 0) == INVALID_VALUE  # 6 blocks, clusters of 4
    with pytest.raises(ncl.CudaGraphError) as info:
        regrid_raising(graph, node, 6)
    assert "griddim is not a multiple of the cluster dimensions the node was recorded " \
           "with" in str(info.value)
    assert fake_driver.node_updates == []
    assert regrid(graph, node, 12, 0) == 0  # whole clusters: updated
    assert [u[2].grid for u in fake_driver.node_updates] == [(12, 1, 1)]


def test_update_cannot_change_the_node_cluster(fake_driver):
    graph, node = record_clustered(0x51)
    assert regrid(graph, node, 8, 2) == INVALID_VALUE
    assert regrid(graph, node, 8, 4) == 0  # the node's own cluster, given again
    assert len(fake_driver.node_updates) == 1


def test_plain_node_takes_a_plain_update(fake_driver):
    graph, node = record_plain(0x51)
    assert regrid(graph, node, 6, 0) == 0
    assert [u[2].grid for u in fake_driver.node_updates] == [(6, 1, 1)]


# -- begin_capture / end_capture ---------------------------------------------------------

@pytest.mark.parametrize("handle,named", [(1, "CU_STREAM_LEGACY (handle 1)"),
                                         (2, "CU_STREAM_PER_THREAD (handle 2)")])
def test_default_stream_handles_not_captured(fake_driver, handle, named):
    assert graphs.begin_capture_status(handle) == INVALID_VALUE
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(handle)
    assert named in str(info.value) and "capture on a stream of your own" in str(info.value)
    assert fake_driver._graph_state.captures == {}  # the driver was never asked


@pytest.mark.parametrize("mode", [3, -1, 2**32])
def test_capture_mode_outside_the_enum_refused(fake_driver, mode):
    assert graphs.begin_capture_status(0x51, mode) == INVALID_VALUE
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(0x51, mode)
    assert "mode must be graphs.CAPTURE_GLOBAL (0), graphs.CAPTURE_THREAD_LOCAL (1) or " \
           "graphs.CAPTURE_RELAXED (2)" in str(info.value)
    assert fake_driver._graph_state.captures == {}


def test_begin_capture_on_a_capturing_stream_says_so(fake_driver):
    graphs.begin_capture(0x51)
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(0x51)
    assert info.value.name == "CUDA_ERROR_ILLEGAL_STATE"
    assert "the stream is already capturing" in str(info.value)
    assert graphs.abort_capture(0x51) == 0


def test_end_capture_without_capture_says_so(fake_driver):
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.end_capture(0x51)
    assert info.value.name == "CUDA_ERROR_ILLEGAL_STATE"
    assert "no capture is in progress on this stream" in str(info.value)


# -- occupancy ---------------------------------------------------------------------------

@njit
def blocks_status(b):
    return scale[1, b].max_active_blocks_status(view(0x1000, 64), 1.0)


@njit
def blocks(b):
    return scale[1, b].max_active_blocks(view(0x1000, 64), 1.0)


def test_block_of_2_pow_64_plus_4_threads_refused(fake_driver):
    block = (3340214413, 276131137, 20)
    assert 3340214413 * 276131137 * 20 == 2**64 + 4
    assert blocks_status(block) == (INVALID_VALUE, 0)
    with pytest.raises(ncl.CudaLaunchError) as info:
        blocks(block)
    assert "blockdim has more than 2**31-1 threads in all" in str(info.value)
    assert fake_driver.occupancy_queries == []  # never asked about 4-thread blocks


def test_negative_block_reported_as_out_of_range(fake_driver):
    with pytest.raises(ncl.CudaLaunchError) as info:
        blocks((-1, 1, 1))
    assert "blockdim has an item outside 1..2**32-1" in str(info.value)
    assert "2**31-1 threads" not in str(info.value)


def test_max_active_clusters_without_cluster_item_says_to_add_it(fake_driver):
    @njit
    def no_cluster():
        return scale[8, 32].max_active_clusters(view(0x1000, 64), 1.0)

    with pytest.raises(ncl.CudaLaunchError) as info:
        no_cluster()
    assert info.value.what == "max_active_clusters"
    assert "no cluster item" in str(info.value)
    assert "kernel[griddim, blockdim, stream, sharedmem, cluster]" in str(info.value)


# -- Python-form streams -----------------------------------------------------------------

class _Stream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@pytest.mark.parametrize("stream", [-1, _Stream(-1)], ids=["integer", "stream object"])
def test_negative_stream_handle_refused_with_one_message(fake_driver, stream):
    with pytest.raises(TypeError, match=r"stream handle between 0 and 2\*\*64-1, not -1"):
        ncl.stream_synchronize(stream)
    assert [c for c in fake_driver.calls if c[0] == "cuStreamSynchronize"] == []


def test_largest_stream_handle_still_accepted(fake_driver):
    ncl.stream_synchronize(2**64 - 1)
    assert ("cuStreamSynchronize", 2**64 - 1) in fake_driver.calls


# -- events ------------------------------------------------------------------------------

@njit
def elapsed(record_start, record_end):
    a = ncl.event()
    b = ncl.event()
    if record_start:
        a.record()
    if record_end:
        b.record()
    return a.elapsed_time(b)


@pytest.mark.parametrize("start,end,which", [(False, True, "start"), (True, False, "end"),
                                             (False, False, "start")])
def test_elapsed_time_names_the_event_never_recorded(fake_driver, start, end, which):
    with pytest.raises(ncl.CudaError) as info:
        elapsed(start, end)
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    assert "the %s event was never recorded" % which in str(info.value)


def test_elapsed_time_from_python_names_the_event(fake_driver):
    a, b = ncl.event(), ncl.event()
    b.record()
    with pytest.raises(ncl.CudaError) as info:
        a.elapsed_time(b)
    assert "the start event was never recorded" in str(info.value)
    a.record()
    assert a.elapsed_time(b) == np.float32(fake_driver.elapsed_ms)


def test_elapsed_time_names_an_event_without_timing(fake_driver):
    @njit
    def untimed():
        a = ncl.event()
        b = ncl.event(timing=False)
        a.record()
        b.record()
        return a.elapsed_time(b)

    with pytest.raises(ncl.CudaError) as info:
        untimed()
    assert "the end event was made with timing=False" in str(info.value)


# -- pointers and handles ----------------------------------------------------------------

@njit
def launch_view_status(p):
    return scale[1, 32].launch_status(view(p, 32), 1.0)


@njit
def launch_view(p):
    scale[1, 32](view(p, 32), 1.0)


def test_checked_mode_names_a_carray_view_as_a_view():
    # No recording driver: the driver table as this process bound it (no
    # driver here: it knows no address; on a GPU machine 0x1000 is unknown).
    ncl.check_pointers(True)
    try:
        assert launch_view_status(0x1000) == INVALID_VALUE
        with pytest.raises(ncl.CudaLaunchError) as info:
            launch_view(0x1000)
    finally:
        ncl.check_pointers(False)
    text = str(info.value)
    assert "parameter 'x' (argument 1) is an array view (carray/farray of a pointer" in text
    assert "NumPy array" not in text


@cuda.jit("void(float32[::1], float32)")
def never_loaded(x, a):  # its own image: no other test has loaded it
    x[0] = a * 7.0 + 0.5


def test_kernel_handle_without_a_driver_says_so():
    handle = ncl.kernel_handle(never_loaded, "void(float32[::1], float32)")
    with RecordingDriver(load_status=NO_DEVICE):
        with pytest.raises(ncl.CudaLaunchError) as info:
            handle.handle
    text = str(info.value)
    assert text.startswith("loading the image of CUDA kernel 'never_loaded' failed: "
                           "CUDA_ERROR_NO_DEVICE (100): ")
    assert "no CUDA driver or GPU is available" in text and ".image and .params" in text
    assert "launch" not in text
    assert handle.image and [p.name for p in handle.params][-1] == "a"
