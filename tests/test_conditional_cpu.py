"""Conditional graph nodes and the functions kernels call, without a GPU:
the recording driver records the handles, nodes, bodies and their launches
the compiled code asks for; refusals carry the driver's status and a
sentence; kernels calling ``set_conditional`` and ``griddepcontrol`` compile
to the PTX CUDA C's do. Expected bytes are built here from the values
passed, never read back from the code under test."""

import struct

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
from numba_cuda_launch.cudadrv.bodies import open_bodies, pending_whiles
from numba_cuda_launch.testing import RecordingDriver
from support import HAVE_GPU
from support import recording_states as states

COND_IF, COND_WHILE, COND_SWITCH = 0, 1, 2  # the driver's CUgraphConditionalNodeType


@cuda.jit
def step(x, handle, limit):
    if cuda.grid(1) == 0:
        x[0] += 1
        if x[0] >= limit:
            graphs.set_conditional(handle, 0)


@cuda.jit
def bump(x, by):
    if cuda.grid(1) == 0:
        x[0] += by


@njit
def i32(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.int32)


def u64(v):
    return struct.pack("<Q", v)


def params(kernel, argtypes):
    """{flattened parameter name: index} of a kernel."""
    return {p.name: i for i, p in enumerate(ncl.kernel_handle(kernel, argtypes).params)}


STEP_TYPES = (nt.int32[::1], graphs.conditional_handle_type, nt.int64)


@njit
def record_while(xp, stream, body, default, assign, limit):
    x = i32(xp, 4)
    graphs.begin_capture(stream)
    handle = graphs.conditional_handle(stream, default, assign)
    loop = graphs.add_while(stream, handle)
    graphs.begin_body(body, loop)
    step[1, 32, body](x, handle, limit)
    node = graphs.last_launch(body)
    graphs.end_body(body)
    bump[1, 1, stream](x, 1)
    return graphs.end_capture(stream), handle, loop, node


def test_while_node_is_recorded_with_its_handle_and_body(fake_driver):
    graph, handle, loop, node = record_while(0x1000, 0x51, 0x52, 7, True, 10)
    assert isinstance(handle, graphs.ConditionalHandle)
    assert isinstance(loop, graphs.ConditionalNode) and loop.kind == graphs.COND_WHILE
    assert loop.size == 1 and loop.bodies != 0
    record = fake_driver.handles[handle.handle]
    assert (record.graph, record.default, record.assign_default) == (graph.handle, 7, True)
    recorded = fake_driver.graphs[graph.handle]
    # the node, then the launch recorded on the parent stream after it
    assert recorded.nodes[0] == loop.handle
    cond = recorded.launches[0]
    assert (cond.kind, cond.handle, cond.size) == (COND_WHILE, handle.handle, 1)
    body = fake_driver.graphs[cond.bodies[0]]
    assert body.body_of == loop.handle and body.nodes == [node.handle]
    (launch,) = body.launches
    idx = params(step, STEP_TYPES)
    # the handle is one 8-byte parameter holding the driver's value
    assert launch.params[idx["handle"]] == u64(handle.handle)
    assert launch.params[idx["limit"]] == u64(10) and launch.stream == 0x52
    assert recorded.launches[1].stream == 0x51
    assert graph.destroy() == 0 and fake_driver.live_graphs() == []


def test_handle_without_assign_default(fake_driver):
    graph, handle, _, _ = record_while(0x1000, 0x51, 0x52, 0, False, 10)
    assert fake_driver.handles[handle.handle].assign_default is False
    graph.destroy()


@njit
def record_if_else_and_switch(xp, stream, body, n):
    x = i32(xp, 4)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream)
    node = graphs.add_if_else(stream, h)
    for k in range(2):
        graphs.begin_body(body, node, k)
        bump[1, 1, body](x, k + 1)
        graphs.end_body(body)
    h2 = graphs.conditional_handle(stream, 2)
    sw = graphs.add_switch(stream, h2, n)
    for k in range(n):
        graphs.begin_body(body, sw, k)
        for _ in range(k + 1):  # body k holds k + 1 launches
            bump[1, 1, body](x, 10 * k)
        graphs.end_body(body)
    return graphs.end_capture(stream), node, sw


def test_if_else_and_switch_bodies(fake_driver):
    graph, node, sw = record_if_else_and_switch(0x1000, 0x51, 0x52, 3)
    assert (node.kind, node.size, sw.kind, sw.size) == (COND_IF, 2, COND_SWITCH, 3)
    recorded = fake_driver.graphs[graph.handle]
    if_node, switch = recorded.launches
    assert [len(fake_driver.graphs[b].launches) for b in switch.bodies] == [1, 2, 3]
    idx = params(bump, (nt.int32[::1], nt.int64))
    by = [[l.params[idx["by"]] for l in fake_driver.graphs[b].launches] for b in if_node.bodies]
    assert by == [[u64(1)], [u64(2)]]
    assert fake_driver.handles[switch.handle].default == 2
    graph.destroy()


@njit
def record_nested(xp, stream, b1, b2):
    x = i32(xp, 4)
    graphs.begin_capture(stream)
    outer = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, outer)
    graphs.begin_body(b1, loop)
    inner = graphs.conditional_handle(b1, 1)  # made in the body
    branch = graphs.add_if(b1, inner)
    graphs.begin_body(b2, branch)
    step[1, 32, b2](x, outer, 5)
    graphs.end_body(b2)
    graphs.end_body(b1)
    return graphs.end_capture(stream), inner, branch


def test_nested_conditionals(fake_driver):
    graph, inner, branch = record_nested(0x1000, 0x51, 0x52, 0x53)
    (loop,) = fake_driver.graphs[graph.handle].launches
    body = fake_driver.graphs[loop.bodies[0]]
    assert fake_driver.handles[inner.handle].graph == body.handle
    (nested,) = body.launches
    assert nested.kind == COND_IF and nested.handle == inner.handle
    assert len(fake_driver.graphs[nested.bodies[0]].launches) == 1
    exe = graph.instantiate()
    # the executable graph knows both handles, with their defaults
    assert fake_driver.execs[exe.handle].values == {loop.handle: 1, inner.handle: 1}
    exe.destroy()
    assert graph.destroy() == 0 and fake_driver.live_graphs() == []


@njit
def replay_after_update(graph, node, stream, xp, times):
    exe = graph.instantiate()
    x = i32(xp, 4)
    for k in range(times):
        exe.update_launch(node, step[2, 64], x, graphs.ConditionalHandle(0), 100 + k)
        exe.launch(stream)
    return exe


def test_update_launch_inside_a_body(fake_driver):
    graph, handle, loop, node = record_while(0x1000, 0x51, 0x52, 1, True, 10)
    exe = replay_after_update(graph, node, 0x51, 0x2000, 2)
    assert len(fake_driver.node_updates) == 2
    (body_node,) = fake_driver.execs[exe.handle].launches[loop.handle].bodies[0].items()
    assert body_node[0] == node.handle
    idx = params(step, STEP_TYPES)
    launch = body_node[1]
    assert launch.params[idx["x.data"]] == u64(0x2000) and launch.params[idx["limit"]] == u64(101)
    assert launch.grid == (2, 1, 1) and launch.block == (64, 1, 1)
    # the recorded graph's own launch is unchanged
    (recorded,) = fake_driver.graphs[fake_driver.graphs[graph.handle].launches[0].bodies[0]].launches
    assert recorded.params[idx["x.data"]] == u64(0x1000)
    exe.destroy(), graph.destroy()


@njit
def update_from(graph, other):
    exe = graph.instantiate()
    status = exe.update_status(other)
    exe.destroy()
    return status


def test_exec_update_compares_bodies(fake_driver):
    g1, *_ = record_while(0x1000, 0x51, 0x52, 1, True, 10)
    g2, *_ = record_while(0x3000, 0x51, 0x52, 1, True, 20)
    g3, _, _ = record_if_else_and_switch(0x1000, 0x51, 0x52, 2)
    assert update_from(g1, g2) == 0
    assert update_from(g1, g3) == ncl.CudaGraphError(910).code  # another topology
    assert fake_driver.exec_updates[-1][2] == 910
    for g in (g1, g2, g3):
        g.destroy()


def test_replay_records_the_graphs_own_launches(fake_driver):
    graph, *_ = record_while(0x1000, 0x51, 0x52, 1, True, 10)
    exe = graph.instantiate()
    exe.launch(0x77)
    # no kernel runs here, so no condition is known: only the launch
    # recorded on the parent stream is replayed
    assert fake_driver.graph_launches == [(exe.handle, 0x77)]
    assert [l.kernel for l in fake_driver.launches] == [
        ncl.kernel_handle(bump, (nt.int32[::1], nt.int64)).entry_name]
    exe.destroy(), graph.destroy()


# -- refusals ------------------------------------------------------------------------

@njit
def handle_on(stream, default):
    return graphs.conditional_handle(stream, default)


@njit
def node_on(stream, kind, n):
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream)
    if kind == 0:
        node = graphs.add_if(stream, h)
    elif kind == 1:
        node = graphs.add_while(stream, h)
    elif kind == 2:
        node = graphs.add_if_else(stream, h)
    else:
        node = graphs.add_switch(stream, h, n)
    return node


def test_not_recording(fake_driver):
    with pytest.raises(ncl.CudaGraphError) as info:
        handle_on(0x51, 0)
    assert info.value.name == "CUDA_ERROR_ILLEGAL_STATE"
    assert "not recording a graph" in str(info.value) and "begin_capture" in str(info.value)


@pytest.mark.parametrize("default", [-1, 2**32])
def test_default_out_of_range(fake_driver, default):
    graphs.begin_capture(0x51)
    with pytest.raises(ncl.CudaGraphError) as info:
        handle_on(0x51, default)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE" and "2**32-1" in str(info.value)
    assert handle_on(0x51, 2**32 - 1).handle  # the largest is taken
    graphs.abort_capture(0x51)


@pytest.mark.parametrize("version, kind, needs", [
    (12030, 1, "12.4"), (12040, 2, "12.8"), (12070, 3, "12.8")])
def test_old_driver_refused_naming_the_version(version, kind, needs):
    with RecordingDriver(driver_version=version):
        with pytest.raises(ncl.CudaGraphError) as info:
            node_on(0x51, kind, 2)
        graphs.abort_capture(0x51)
    assert info.value.name == "CUDA_ERROR_NOT_SUPPORTED"
    assert "version %s or later" % needs in str(info.value)
    with RecordingDriver(driver_version=int(needs.replace(".", "0")) * 10) as rec:
        node = node_on(0x51, kind, 2)  # the version named is enough
        assert node.handle and node.size == (2 if kind > 1 else 1)
        assert graphs.abort_capture(0x51) == 0
        assert rec.live_graphs() == []


def test_switch_needs_a_body(fake_driver):
    with pytest.raises(ncl.CudaGraphError, match="1 to 2"):
        node_on(0x51, 3, 0)
    graphs.abort_capture(0x51)


@njit
def foreign_handle(s1, s2):
    graphs.begin_capture(s1)
    h = graphs.conditional_handle(s1)
    graphs.begin_capture(s2)
    status, node = graphs.add_while_status(s2, h)
    graphs.add_while(s2, h)


def test_handle_of_another_graph_refused(fake_driver):
    with pytest.raises(ncl.CudaGraphError) as info:
        foreign_handle(0x51, 0x52)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert "must have been made" in str(info.value)
    graphs.abort_capture(0x51), graphs.abort_capture(0x52)


@njit
def begin_body_misuse(stream, body, case):
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream)
    node = graphs.add_if(stream, h)
    if case == 0:
        graphs.begin_body(stream, node)     # the stream recording the graph
    elif case == 1:
        graphs.begin_body(body, node, 1)    # IF has one body
    elif case == 2:
        graphs.begin_body(body, node, -1)
    elif case == 3:
        graphs.begin_body(body, node)
        graphs.begin_body(body, node)       # already recording
    elif case == 4:
        graphs.begin_body(2, node)          # CU_STREAM_PER_THREAD
    else:
        status, none = graphs.add_if_else_status(stream, graphs.ConditionalHandle(12345))
        graphs.begin_body(body, none)       # a failed call's NULL node


@pytest.mark.parametrize("case, name, text", [
    (0, "CUDA_ERROR_ILLEGAL_STATE", "already capturing"),
    (1, "CUDA_ERROR_INVALID_VALUE", "index must name one of the node's bodies"),
    (2, "CUDA_ERROR_INVALID_VALUE", "index must name one of the node's bodies"),
    (3, "CUDA_ERROR_ILLEGAL_STATE", "already capturing"),
    (4, "CUDA_ERROR_INVALID_VALUE", "CU_STREAM_PER_THREAD"),
    (5, "CUDA_ERROR_INVALID_VALUE", "the node is NULL"),
])
def test_begin_body_misuse(fake_driver, case, name, text):
    with pytest.raises(ncl.CudaGraphError) as info:
        begin_body_misuse(0x51, 0x52, case)
    assert info.value.name == name and text in str(info.value)
    assert info.value.operation == "begin_body"
    graphs.abort_capture(0x52), graphs.abort_capture(0x51)


def test_end_body_without_one(fake_driver):
    with pytest.raises(ncl.CudaGraphError, match="no body is being recorded"):
        graphs.end_body(0x52)
    assert graphs.end_body_status(0x52) == 401  # CUDA_ERROR_ILLEGAL_STATE


@njit
def open_body(stream, body, inner):
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream)
    node = graphs.add_while(stream, h)
    graphs.begin_body(body, node)
    bump[1, 1, body](i32(0x1000, 4), 1)
    if inner:  # a node in the body, its body open on another stream
        h2 = graphs.conditional_handle(body)
        graphs.begin_body(inner, graphs.add_if(body, h2))
    return graphs.end_capture_status(stream)[0]


@njit
def unused_handle(stream):
    graphs.begin_capture(stream)
    graphs.conditional_handle(stream)
    return graphs.end_capture(stream)


def test_a_recording_does_not_end_while_a_body_is_recorded(fake_driver):
    # The driver crashes the process when such a graph is used: refused.
    assert open_body(0x51, 0x52, 0) == 904  # CUDA_ERROR_STREAM_CAPTURE_UNJOINED
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.end_capture(0x51)
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"
    assert "still being recorded on another stream" in str(info.value)
    assert graphs.abort_capture(0x51) == 904  # nor aborted: abort the body first
    graphs.end_body(0x52)
    graphs.end_capture(0x51).destroy()  # then it ends
    assert open_bodies() == []


def test_nested_bodies_end_innermost_first(fake_driver):
    assert open_body(0x51, 0x52, 0x53) == 904
    with pytest.raises(ncl.CudaGraphError, match="still being recorded") as info:
        graphs.end_body(0x52)  # its node's body on 0x53 is open
    assert info.value.operation == "end_body"
    assert graphs.abort_capture(0x53) == 0  # the innermost can be aborted
    graphs.end_body(0x52)
    assert graphs.abort_capture(0x51) == 0
    assert open_bodies() == []


def test_instantiate_refusals(fake_driver):
    graph = unused_handle(0x51)
    with pytest.raises(ncl.CudaGraphError, match="it has a conditional handle .* that no conditional node uses"):
        graph.instantiate()
    graph.destroy()
    graph, *_ = record_while(0x1000, 0x51, 0x52, 1, True, 10)
    exe = graph.instantiate()
    # one executable graph at a time (the driver says CUDA_ERROR_NOT_SUPPORTED)
    with pytest.raises(ncl.CudaGraphError) as info:
        graph.instantiate()
    assert info.value.name == "CUDA_ERROR_NOT_SUPPORTED"
    assert "one executable graph at a time" in str(info.value)
    exe.destroy()
    graph.instantiate().destroy()  # once the first is destroyed
    graph.destroy()


@njit
def handle_status(stream, default):
    graphs.begin_capture(stream)
    return graphs.conditional_handle_status(stream, default, False)[0]


def test_default_without_assign_default_refused(fake_driver):
    assert handle_status(0x51, 1) == 1  # CUDA_ERROR_INVALID_VALUE
    graphs.abort_capture(0x51)
    graphs.begin_capture(0x51)
    with pytest.raises(ncl.CudaGraphError, match="applies no default"):
        graphs.conditional_handle(0x51, 3, False)
    graphs.abort_capture(0x51)
    assert handle_status(0x51, 0) == 0
    graphs.abort_capture(0x51)


@njit
def launch_with_handle(xp, stream):
    return step[1, 32, stream].launch_status(i32(xp, 4), graphs.ConditionalHandle(0x50), 3)


@njit
def raising_launch_with_handle(xp, stream):
    step[1, 32, stream](i32(xp, 4), graphs.ConditionalHandle(0x50), 3)


def test_a_handle_outside_a_recording_is_refused(fake_driver):
    # set outside its graph's launch, a handle faults the context
    # (CUDA_ERROR_ILLEGAL_ADDRESS on driver 580): refused before the driver
    assert launch_with_handle(0x1000, 0x51) == 1
    assert fake_driver.launches == []
    with pytest.raises(ncl.CudaLaunchError, match="records no graph"):
        raising_launch_with_handle(0x1000, 0x51)
    graphs.begin_capture(0x51)
    assert launch_with_handle(0x1000, 0x51) == 0  # recorded
    graphs.end_capture(0x51).destroy()


def test_a_body_goes_with_its_graph(fake_driver):
    graph, _, loop, _ = record_while(0x1000, 0x51, 0x52, 1, True, 10)
    (cond,) = [n for n in fake_driver.graphs[graph.handle].launches
               if isinstance(n, ncl.testing.ConditionalNode)]
    body = graphs.Graph(cond.bodies[0])
    assert body.destroy() == 1  # CUDA_ERROR_INVALID_VALUE: the node owns it
    assert graph.destroy() == 0 and fake_driver.graphs[cond.bodies[0]].destroyed


# -- typing ------------------------------------------------------------------------------

def test_typing_errors():
    with pytest.raises(TypingError, match="handle must be a ConditionalHandle"):
        njit(lambda s: graphs.add_while(s, 5))(0x51)
    with pytest.raises(TypingError, match="node must be a ConditionalNode"):
        njit(lambda s: graphs.begin_body(s, 3))(0x51)
    with pytest.raises(TypingError, match="default must be an integer"):
        njit(lambda s: graphs.conditional_handle(s, 1.5))(0x51)
    with pytest.raises(TypingError, match="n must be an integer"):
        njit(lambda s, h: graphs.add_switch(s, h, 2.0))(0x51, graphs.ConditionalHandle(1))
    for fn in (lambda: graphs.set_conditional(graphs.ConditionalHandle(1), 0),
               lambda: ncl.griddepcontrol_wait(), lambda: ncl.griddepcontrol_launch_dependents()):
        with pytest.raises(TypingError, match="called in CUDA kernels"):
            njit(fn)()
        with pytest.raises(TypingError, match="called in CUDA kernels"):
            fn()  # from Python too


def test_python_objects():
    h = graphs.ConditionalHandle(2**64 - 1)
    assert h == graphs.ConditionalHandle(2**64 - 1) and hash(h) == hash(graphs.ConditionalHandle(2**64 - 1))
    for bad in (-1, 2**64, 1.0, True, "1"):
        with pytest.raises(TypeError, match="ConditionalHandle"):
            graphs.ConditionalHandle(bad)
    node = graphs.ConditionalNode(0x70, 0x80, 0x60, graphs.COND_SWITCH, 3)
    assert repr(node) == "<ConditionalNode SWITCH[3] 0x70>"
    with pytest.raises(TypeError, match="kind must be an integer between 0 and 2"):
        graphs.ConditionalNode(0x70, 0x80, 0x60, 3, 1)


def test_python_forms(fake_driver):
    graphs.begin_capture(0x51)
    h = graphs.conditional_handle(0x51, 3)
    node = graphs.add_if_else(0x51, h)
    assert isinstance(node, graphs.ConditionalNode) and node.size == 2
    graphs.begin_body(0x52, node, 1)
    graphs.end_body(0x52)
    assert graphs.add_switch_status(0x51, h, 4)[0] == 0
    with pytest.raises(TypeError, match="add_while"):
        graphs.add_while("stream", h)
    graphs.end_capture(0x51).destroy()


# -- the handle as a kernel argument -----------------------------------------------------

@cuda.jit("void(uint64, int32[::1])")
def takes_u64(handle, x):
    graphs.set_conditional(handle, x[0])  # the 64-bit integer form


@njit
def pass_handle(xp, stream, body):
    x = i32(xp, 4)
    graphs.begin_capture(stream)
    h = graphs.conditional_handle(stream)
    node = graphs.add_if(stream, h)
    graphs.begin_body(body, node)
    takes_u64[1, 1, body](h, x)  # converted to the uint64 parameter
    graphs.end_body(body)
    return graphs.end_capture(stream), h


def test_handle_converts_to_a_64_bit_parameter(fake_driver):
    graph, h = pass_handle(0x1000, 0x51, 0x52)
    (cond,) = fake_driver.graphs[graph.handle].launches
    (launch,) = fake_driver.graphs[cond.bodies[0]].launches
    assert launch.params[0] == u64(h.handle)
    graph.destroy()
    with pytest.raises(TypingError, match="expected int32"):
        njit(lambda h: cuda.jit("void(int32)")(lambda v: None)[1, 1](h))(h)


def test_foreign_kernel_takes_the_handle(fake_driver):
    from support.nvrtc import nvrtc_ptx

    src = r'''
    extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int v);
    extern "C" __global__ void stop_at(unsigned long long handle, int* count, int limit)
    { if (threadIdx.x == 0 && ++count[0] >= limit) cudaGraphSetConditional(handle, 0); }
    '''
    stop_at = ncl.foreign_kernel(nvrtc_ptx(src, ("-arch=compute_90",), "stop_at"), "stop_at",
                                 "void(uint64, CPointer(int32), int32)")

    @njit
    def record(stream, body, cp):
        graphs.begin_capture(stream)
        h = graphs.conditional_handle(stream, 1)
        loop = graphs.add_while(stream, h)
        graphs.begin_body(body, loop)
        stop_at[1, 32, body](h, ncl.as_voidptr(cp), 5)
        graphs.end_body(body)
        return graphs.end_capture(stream), h

    graph, h = record(0x51, 0x52, 0x1000)
    (cond,) = fake_driver.graphs[graph.handle].launches
    (launch,) = fake_driver.graphs[cond.bodies[0]].launches
    assert launch.params == [u64(h.handle), u64(0x1000), struct.pack("<i", 5)]
    graph.destroy()


# -- kernels: what the PTX holds ---------------------------------------------------------

def ptx_of(fn, sig, cc=(9, 0)):
    return cuda.compile_ptx(fn, sig, cc=cc)[0]


def test_set_conditional_is_the_device_runtime_builtin():
    def kernel(h, flag, n):
        if flag[0]:
            graphs.set_conditional(h, n)

    ptx = ptx_of(kernel, (graphs.conditional_handle_type, nt.boolean[::1], nt.int64))
    assert ".extern .func cudaGraphSetConditional" in ptx
    assert "call.uni \ncudaGraphSetConditional" in ptx.replace("\t", "") or \
        "cudaGraphSetConditional," in ptx
    # one 64-bit parameter for the handle, first
    assert ptx.split(".param .u64", 1)[1].split("\n")[0].strip().endswith("param_0,")


def test_griddepcontrol_ptx_and_refusal_below_sm_90():
    def kernel(x):
        ncl.griddepcontrol_wait()
        x[0] = 1
        ncl.griddepcontrol_launch_dependents()

    ptx = ptx_of(kernel, (nt.int32[::1],))
    assert "griddepcontrol.wait;" in ptx and "griddepcontrol.launch_dependents;" in ptx
    assert ptx.index("griddepcontrol.wait;") < ptx.index("st.global")  # not moved after the store
    with pytest.raises(TypingError) as info:
        ptx_of(kernel, (nt.int32[::1],), cc=(8, 0))
    assert "needs compute capability 9.0 or later" in str(info.value)
    assert "built for 8.0" in str(info.value)


@pytest.mark.parametrize("ty, value, stored", [
    (nt.boolean, True, 1), (nt.uint8, 200, 200), (nt.int8, -1, 2**32 - 1),
    (nt.int16, 5, 5), (nt.int32, -7, 2**32 - 1), (nt.uint32, 2**32 - 1, 2**32 - 1),
    (nt.int64, 2**40, 2**32 - 1), (nt.int64, -5, 2**32 - 1), (nt.int64, 123, 123),
    (nt.uint64, 2**63, 2**32 - 1), (nt.uint64, 2**32, 2**32 - 1)])
def test_the_value_a_kernel_stores(ty, value, stored):
    # set_conditional's conversion, run on the CPU: saturated, never wrapped
    from numba.extending import intrinsic

    from numba_cuda_launch.kernels.numba_cuda import _as_condition

    @intrinsic
    def as_condition(typingctx, v):
        return nt.uint32(v), lambda context, builder, sig, args: _as_condition(
            builder, args[0], sig.args[0])

    convert = njit(nt.uint32(ty))(lambda v: as_condition(v))
    assert convert(value) == stored


def test_set_conditional_typing_in_kernels():
    with pytest.raises(TypingError, match="value must be an integer or a boolean"):
        ptx_of(lambda h: graphs.set_conditional(h, 1.5), (graphs.conditional_handle_type,))
    with pytest.raises(TypingError, match="handle must be a ConditionalHandle"):
        ptx_of(lambda h: graphs.set_conditional(h, 1), (nt.int32,))
    with pytest.raises(TypingError, match="takes no arguments"):
        ptx_of(lambda x: ncl.griddepcontrol_wait(x), (nt.int32,))


@pytest.mark.skipif(HAVE_GPU, reason="compiles for configured architectures (no GPU)")
def test_images_for_several_architectures():
    before = ncl.get_compute_capabilities() or ncl.get_compute_capability()

    @cuda.jit
    def sets(h):
        graphs.set_conditional(h, 0)

    @cuda.jit
    def waits(x):
        ncl.griddepcontrol_wait()

    try:
        ncl.set_compute_capability([(8, 0), (9, 0)])
        # the builtin is the driver's: the PTX of the lowest architecture keeps it
        handle = ncl.kernel_handle(sets, (graphs.conditional_handle_type,))
        assert handle.image[:4] == b"\x50\xed\x55\xba"  # a fatbin
        with pytest.raises(ncl.KernelTypingError, match="needs compute capability 9.0"):
            ncl.kernel_handle(waits, (nt.int32[::1],))
    finally:
        ncl.set_compute_capability(before)


@pytest.mark.parametrize("flag", ["False", 0, 1, None, 0.0])
def test_assign_default_must_be_a_boolean(fake_driver, flag):
    # "False" is true and 0.0 false by their truth value: neither is read so
    with pytest.raises(TypeError, match=r"^graphs.conditional_handle\(\): assign_default "
                                        r"must be True or False, not "):
        graphs.conditional_handle(0x51, 0, flag)
    with pytest.raises(TypingError, match=r"^graphs.conditional_handle: assign_default must "
                                          r"be a boolean \(True or False\), got "):
        njit(lambda s, f: graphs.conditional_handle_status(s, 0, f))(0x51, flag)
    assert fake_driver.handles == {}


# -- a recording ended, aborted or begun in the wrong state (support/recording_states.py)

def test_end_body_of_a_graph_is_refused_and_the_recording_goes_on(fake_driver):
    refused, graph = states.end_body_of_a_graph(0x1000, 0x51)
    assert refused == states.ILLEGAL_STATE
    (launch,) = fake_driver.graphs[graph.handle].launches  # recorded before the refusal
    assert "add" in launch.kernel
    graph.destroy()
    graphs.begin_capture(0x51)
    with pytest.raises(ncl.CudaGraphError, match=r"end_body failed: CUDA_ERROR_ILLEGAL_STATE "
                       r"\(401\): the stream is recording a graph \(graphs.begin_capture\), "
                       r"not a body: end it with graphs.end_capture"):
        graphs.end_body(0x51)
    graphs.end_capture(0x51).destroy()
    assert fake_driver.live_graphs() == [] and open_bodies() == []


def test_end_capture_of_a_body_is_refused_and_the_body_goes_on(fake_driver):
    refused, exe = states.end_capture_of_a_body(0x1000, 0x51, 0x52)
    assert refused == states.ILLEGAL_STATE
    cond = fake_driver.graphs[fake_driver.execs[exe.handle].graph].launches[0]
    assert len(fake_driver.graphs[cond.bodies[0]].launches) == 1
    exe.destroy()
    with pytest.raises(ncl.CudaGraphError, match=r"the stream is recording a body of a "
                                                 r"conditional node \(graphs.begin_body\)"):
        open_body(0x51, 0x52, 0)
        graphs.end_capture(0x52)
    graphs.end_body(0x52)
    graphs.abort_capture(0x51)
    assert open_bodies() == []


def test_abort_of_a_body_drops_its_launches(fake_driver):
    aborted, exe = states.abort_a_body(0x1000, 0x51, 0x52)
    assert aborted == 0
    cond = fake_driver.graphs[fake_driver.execs[exe.handle].graph].launches[0]
    (launch,) = fake_driver.graphs[cond.bodies[0]].launches  # the second recording only
    assert launch.params[-1] == struct.pack("<q", 10)  # v, after the array's parameters
    exe.destroy()
    assert open_bodies() == []


def test_a_body_is_recorded_once(fake_driver):
    assert states.record_a_body_twice(0x1000, 0x51, 0x52) == states.ILLEGAL_STATE
    assert open_bodies() == []
    with pytest.raises(ncl.CudaGraphError, match="the body was recorded already"):
        njit(lambda s, b: graphs.begin_body(b, node_on_with_body(s, b)))(0x51, 0x52)
    graphs.abort_capture(0x51)


@njit
def node_on_with_body(stream, body):
    graphs.begin_capture(stream)
    node = graphs.add_if(stream, graphs.conditional_handle(stream))
    graphs.begin_body(body, node)
    states.add[1, 1, body](i32(0x1000, 4), 1)
    graphs.end_body(body)
    return node


@pytest.mark.parametrize("nested", [False, True])
def test_a_while_node_with_an_empty_body_does_not_end_its_recording(fake_driver, nested):
    refused, exe = states.empty_while(0x1000, 0x51, 0x52, 0x53, nested)
    assert refused == states.INVALID_VALUE
    exe.destroy()
    assert open_bodies() == [] and pending_whiles() == []
    njit(lambda s: graphs.add_while(s, graphs.conditional_handle(s, 1)))(
        graphs.begin_capture(0x51) or 0x51)
    with pytest.raises(ncl.CudaGraphError, match=r"end_capture failed: CUDA_ERROR_INVALID_"
                       r"VALUE \(1\): a WHILE node of this recording \(graphs.add_while\) has "
                       r"an empty body"):
        graphs.end_capture(0x51)
    assert graphs.abort_capture(0x51) == 0 and pending_whiles() == []


def test_a_switch_of_more_bodies_than_the_fake_holds_is_out_of_memory(fake_driver):
    # the recording driver hands out the driver's array of body graphs,
    # made at once: 2**16 bodies at most (the simulator makes them lazily)
    node_on(0x51, 3, 2**16)
    graphs.abort_capture(0x51)
    with pytest.raises(ncl.CudaGraphError) as info:
        node_on(0x51, 3, 2**32 - 1)
    assert info.value.name == "CUDA_ERROR_OUT_OF_MEMORY"
    graphs.abort_capture(0x51)


def test_set_conditional_takes_its_keywords_in_kernels():
    def stop(h, v):
        graphs.set_conditional(handle=h, value=v)
    ptx = ptx_of(stop, (graphs.conditional_handle_type, nt.int32))
    assert "call.uni" in ptx and "cudaGraphSetConditional" in ptx


def test_a_refusal_in_a_kernel_leads_the_compile_error(fake_driver):
    @cuda.jit
    def half(h):
        graphs.set_conditional(h, 1.5)

    with pytest.raises(TypingError) as info:
        njit(lambda s, h: half[1, 1, s](h))(0x51, graphs.ConditionalHandle(1))
    assert str(info.value).splitlines()[0] == (
        "compiling kernel 'half' for (h: ConditionalHandle) failed: set_conditional(handle, "
        "value): value must be an integer or a boolean (the condition's unsigned int); got "
        "float64")


def test_instantiate_of_a_destroyed_graph_says_so(fake_driver):
    graphs.begin_capture(0x51)
    graph = graphs.end_capture(0x51)
    handle = graph.handle
    graph.destroy()
    with pytest.raises(ncl.CudaGraphError, match=r"the graph is NULL: destroyed from Python"):
        graph.instantiate()
    with pytest.raises(ncl.CudaGraphError, match=r"the driver refused the graph: it was "
                                                 r"destroyed \(graph.destroy\(\)\)"):
        graphs.Graph(handle).instantiate()


# -- a negative integer stream ------------------------------------------------

# Signed, below 0: no CUstream handle. Each is refused before the driver,
# which would get it sign-extended (-1 as 0xff...ff): the tests make that
# handle a stream recording a graph, or a body, to show nothing reached it.
NEGATIVE_STREAMS = [-1, np.int64(-1), np.int32(-2), np.int8(-1)]

NEGATIVE_STATUSES = """
def f(s, w, g):
    graphs.begin_capture(w)
    h = graphs.conditional_handle(w)
    made = (graphs.conditional_handle_status(S)[0], graphs.add_if_status(S, h)[0],
            graphs.add_if_else_status(S, h)[0], graphs.add_while_status(S, h)[0],
            graphs.add_switch_status(S, h, 2)[0])
    first = graphs.end_capture(w)
    graphs.begin_capture(g)
    node = graphs.add_if(g, graphs.conditional_handle(g))
    begun = graphs.begin_body_status(S, node)
    graphs.begin_body(w, node)
    ended = graphs.end_body_status(S)
    graphs.end_body(w)  # the body w records was not ended
    return made, begun, ended, first, graphs.end_capture(g), h, node
"""
NEGATIVE_RAISING = """
def f(which, s, h, node):
    if which == 0:
        graphs.conditional_handle(S)
    elif which == 1:
        graphs.add_if(S, h)
    elif which == 2:
        graphs.add_if_else(S, h)
    elif which == 3:
        graphs.add_while(S, h)
    elif which == 4:
        graphs.add_switch(S, h, 2)
    elif which == 5:
        graphs.begin_body(S, node)
    else:
        graphs.end_body(S)
"""
OPERATIONS = ["conditional_handle", "add_if", "add_if_else", "add_while", "add_switch",
              "begin_body", "end_body"]


def compiled(source, stream):
    """``f`` of *source*, its stream ``S`` the argument ``s``, or the constant -1."""
    ns = {"graphs": graphs}
    exec(source.replace("S", "s" if stream is None else stream), ns)
    return njit(ns["f"])


@pytest.mark.parametrize("s", NEGATIVE_STREAMS + ["constant"])
def test_a_negative_stream_is_refused_before_the_driver(fake_driver, s):
    constant = "-1" if s == "constant" else None
    s = -1 if constant else s
    w = np.uint64(int(s) % 2 ** 64)  # s sign-extended
    statuses = compiled(NEGATIVE_STATUSES, constant)
    made, begun, ended, first, second, h, node = statuses(s, w, 0x51)
    assert made == (1,) * 5 and begun == 1 and ended == 1  # CUDA_ERROR_INVALID_VALUE
    # w's graph got no node and one handle (its own); the body w recorded
    # was begun and ended by the calls given w, as its node's only body
    assert fake_driver.graphs[first.handle].nodes == [] and len(fake_driver.handles) == 2
    (if_node,) = fake_driver.graphs[second.handle].launches
    assert fake_driver.graphs[if_node.bodies[0]].body_of == node.handle
    raising = compiled(NEGATIVE_RAISING, constant)
    for which, operation in enumerate(OPERATIONS):
        with pytest.raises(ncl.CudaGraphError) as info:
            raising(which, s, h, node)
        assert (info.value.name, info.value.operation) == ("CUDA_ERROR_INVALID_VALUE", operation)
        assert "stream is a negative integer" in info.value.detail
    assert graphs.end_body_status(w) == 401 and graphs.end_capture_status(w)[0] == 401
    assert first.destroy() == 0 and second.destroy() == 0 and fake_driver.live_graphs() == []
    assert open_bodies() == []
