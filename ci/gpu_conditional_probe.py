"""GPU-machine probe of what the driver does with conditional graph nodes
built by numba_cuda_launch.graphs, for the facts docs/graphs.md states and
the recording driver and the simulator model: each probe prints one line,
``name: result``. Run by ci/gpu_conditional.sh."""

import os
import subprocess
import sys
import time

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

import numba  # noqa: E402
from numba import cuda, njit  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import graphs  # noqa: E402
from numba_cuda_launch.errors import error_name  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
from support.conditional_kernels import count_down, rearm  # noqa: E402


def probe(name):
    def run(fn):
        t0 = time.perf_counter()
        try:
            result = fn()
        except Exception as exc:  # a probe's failure is its answer
            result = "raised %s: %s" % (type(exc).__name__, str(exc)[:400])
            for stream in (B2, B, S):  # innermost first: a failed probe leaves no capture
                graphs.abort_capture(stream)
        print("%s: %s  [%.2fs]" % (name, result, time.perf_counter() - t0), flush=True)
        return fn
    return run


@njit
def i32(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.int32)


@cuda.jit
def bump(c, i, by):
    if cuda.grid(1) == 0:
        c[i] += by


@cuda.jit
def set_to(h, v):
    if cuda.grid(1) == 0:
        graphs.set_conditional(h, v)


@njit
def while_graph(cp, s, b):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, 1)
    loop = graphs.add_while(s, h)
    graphs.begin_body(b, loop)
    count_down[1, 32, b](c, h)
    graphs.end_body(b)
    bump[1, 1, s](c, 2, 1)
    return graphs.end_capture(s)


@njit
def instantiate_status(g):
    return g.instantiate_status()


@njit
def launch_status(exe, s):
    return exe.launch_status(s)


@njit
def update_status(exe, g):
    return exe.update_status(g)


@njit
def run_graph(g, s, times):
    exe = g.instantiate()
    for _ in range(times):
        exe.launch(s)
    ncl.stream_synchronize(s)
    return exe


S, B, B2 = cuda.stream(), cuda.stream(), cuda.stream()
c_dev = cuda.to_device(np.zeros(4, np.int32))
# (under the simulator, for a dry run here: host memory)
CP = c_dev._ary.ctypes.data if cuda.config.ENABLE_CUDASIM else c_dev.device_ctypes_pointer.value


def reset(values):
    c_dev.copy_to_device(np.array(values, np.int32))


@njit
def open_body(s, b, case):
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, 1)
    node = graphs.add_if(s, h)
    graphs.begin_body(b, node)
    st_same = graphs.begin_body_status(s, node)   # the parent's stream
    st_again = graphs.begin_body_status(b, node)  # already recording
    if case == 1:                                   # end the body first
        graphs.end_body(b)
    g = graphs.end_capture(s)                       # case 0: the body still open
    st_inst, exe = g.instantiate_status()
    st_end = graphs.end_body_status(b)
    st_inst2, exe2 = g.instantiate_status()
    return st_same, st_again, st_inst, st_end, st_inst2, g, exe, exe2


def open_body_case(case):
    st_same, st_again, st_inst, st_end, st_inst2, g, exe, exe2 = open_body(S, B, case)
    for e, st in ((exe, st_inst), (exe2, st_inst2)):
        if st == 0:
            e.destroy()
    g.destroy()
    return [error_name(x) for x in (st_same, st_again, st_inst, st_end, st_inst2)]


if "--open-body" in sys.argv:  # a child process: this one may crash the driver
    print("RESULT", open_body_case(int(sys.argv[-1])), flush=True)
    raise SystemExit(0)


@probe("driver")
def _():
    from cuda.bindings import driver as d
    err, v = d.cuDriverGetVersion()
    return "%s %d, device %s cc %s" % (err, v, cuda.get_current_device().name,
                                      cuda.get_current_device().compute_capability)


@probe("while: 5 iterations, then the kernel after the node")
def _():
    reset([5, 0, 0, 0])
    g = while_graph(CP, S, B)
    exe = run_graph(g, S, 1)
    out = c_dev.copy_to_host().tolist()
    exe.destroy(), g.destroy()
    return "c=%s (expect [0, 5, 1, 0])" % out


@njit
def if_graph(cp, s, b, default, assign):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, default, assign)
    node = graphs.add_if(s, h)
    graphs.begin_body(b, node)
    bump[1, 1, b](c, 0, 1)
    set_to[1, 1, b](h, 0)
    graphs.end_body(b)
    return graphs.end_capture(s)


@njit
def if_graph_preset(cp, s, b, default, assign, preset):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, default, assign)
    if preset >= 0:
        set_to[1, 1, s](h, preset)
    node = graphs.add_if(s, h)
    graphs.begin_body(b, node)
    bump[1, 1, b](c, 0, 1)
    graphs.end_body(b)
    return graphs.end_capture(s)


@probe("without assign_default: [default, preset by a kernel] -> instantiate, runs of 2 "
       "launches")
def _():
    out = []
    # (a default of 1 without the flag, measured on driver 580 before
    # conditional_handle refused it: ignored, the value was 0)
    for default, preset in ((0, -1), (0, 1), (0, 0)):
        reset([0, 0, 0, 0])
        g = if_graph_preset(CP, S, B, default, False, preset)
        st, exe = instantiate_status(g)
        runs = None
        if st == 0:
            for _ in range(2):
                exe.launch(S)
            S.synchronize()
            runs = int(c_dev.copy_to_host()[0])
            exe.destroy()
        g.destroy()
        out.append(((default, preset), error_name(st), runs))
    return out


@probe("without assign_default, the IF body clears it: launch 1, 2, second exe")
def _():
    reset([0, 0, 0, 0])
    g = if_graph(CP, S, B, 0, False)
    st, exe = instantiate_status(g)
    if st != 0:
        g.destroy()
        return error_name(st)
    exe.launch(S)
    S.synchronize()
    first = int(c_dev.copy_to_host()[0])
    exe.launch(S)
    S.synchronize()
    second = int(c_dev.copy_to_host()[0])
    exe.destroy(), g.destroy()
    return "after launch 1: %d, launch 2: %d" % (first, second)


@probe("if with assign_default: runs each launch")
def _():
    reset([0, 0, 0, 0])
    g = if_graph(CP, S, B, 1, True)
    exe = run_graph(g, S, 3)
    exe.destroy(), g.destroy()
    return "runs=%d (expect 3)" % c_dev.copy_to_host()[0]


@njit
def if_else_switch(cp, s, b, v, n):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, v)
    node = graphs.add_if_else(s, h)
    graphs.begin_body(b, node, 0)
    bump[1, 1, b](c, 0, 1)
    graphs.end_body(b)
    graphs.begin_body(b, node, 1)
    bump[1, 1, b](c, 1, 1)
    graphs.end_body(b)
    h2 = graphs.conditional_handle(s, v)
    sw = graphs.add_switch(s, h2, n)
    for k in range(n):
        graphs.begin_body(b, sw, k)
        bump[1, 1, b](c, 2, 10 ** k)
        graphs.end_body(b)
    return graphs.end_capture(s)


@probe("if/else and switch")
def _():
    out = []
    for v in (0, 1, 2, 5):
        reset([0, 0, 0, 0])
        g = if_else_switch(CP, S, B, v, 3)
        exe = run_graph(g, S, 1)
        out.append((v, c_dev.copy_to_host()[:3].tolist()))
        exe.destroy(), g.destroy()
    return out


@njit
def nested(cp, s, b, b2, inner):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, 1)
    loop = graphs.add_while(s, h)
    graphs.begin_body(b, loop)
    h_in = graphs.conditional_handle(b, 0)   # made in the body graph
    rearm[1, 1, b](c, h_in, inner)
    inner_loop = graphs.add_while(b, h_in)
    graphs.begin_body(b2, inner_loop)
    count_down[1, 32, b2](c[2:4], h_in)
    graphs.end_body(b2)
    count_down[1, 32, b](c, h)
    graphs.end_body(b)
    return graphs.end_capture(s)


@probe("nested while in while (inner handle made in the body): expect [0, 3, 0, 6]")
def _():
    reset([3, 0, 0, 0])
    g = nested(CP, S, B, B2, 2)
    exe = run_graph(g, S, 1)
    out = c_dev.copy_to_host().tolist()
    exe.destroy(), g.destroy()
    return "c=%s" % out


@njit
def parent_handle_nested(cp, s, b, b2):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, 1)
    h2 = graphs.conditional_handle(s, 1)
    node = graphs.add_if(s, h)
    graphs.begin_body(b, node)
    inner = graphs.add_if(b, h2)           # a handle of the parent graph
    graphs.begin_body(b2, inner)
    bump[1, 1, b2](c, 0, 1)
    graphs.end_body(b2)
    graphs.end_body(b)
    return graphs.end_capture(s)


@probe("handle of the parent graph in a nested node")
def _():
    reset([0, 0, 0, 0])
    g = parent_handle_nested(CP, S, B, B2)
    exe = run_graph(g, S, 1)
    out = c_dev.copy_to_host()[0]
    exe.destroy(), g.destroy()
    return "ran=%d" % out


@njit
def foreign_handle(s, s2):
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, 1)
    graphs.begin_capture(s2)
    status, node = graphs.add_while_status(s2, h)
    g2 = graphs.end_capture(s2)
    g = graphs.end_capture(s)
    return status, g, g2


@probe("handle of graph A in a node of graph B")
def _():
    status, g, g2 = foreign_handle(S, B)
    out = [error_name(status)]
    for graph in (g2, g):
        st, exe = instantiate_status(graph)
        out.append(error_name(st))
        if st == 0:
            exe.destroy()
        graph.destroy()
    return "add: %s, instantiate B: %s, instantiate A: %s" % tuple(out)


@njit
def unused_handle(s):
    graphs.begin_capture(s)
    graphs.conditional_handle(s, 1)
    bump[1, 1, s](i32(0, 4), 0, 0)
    return graphs.end_capture(s)


@probe("a handle no node uses: instantiate")
def _():
    g = unused_handle(S)
    st, exe = instantiate_status(g)
    if st == 0:
        exe.destroy()
    g.destroy()
    return error_name(st)


@probe("open body (child processes): [begin_body on the parent stream, twice, instantiate, "
       "end_body, instantiate]; case 0 ends the graph with its body open")
def _():
    out = []
    for case in (1, 0):
        r = subprocess.run([sys.executable, __file__, "--open-body", str(case)],
                           capture_output=True, text=True, timeout=120)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
        out.append((case, line[0][7:] if line else "exit %d: %s" % (
            r.returncode, (r.stderr.strip().splitlines() or [""])[-1][:200])))
    return out


@njit
def body_update(cp, s, b, n):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, 1)
    loop = graphs.add_while(s, h)
    graphs.begin_body(b, loop)
    bump[1, 1, b](c, 1, 1)
    node = graphs.last_launch(b)
    count_down[1, 32, b](c, h)
    graphs.end_body(b)
    g = graphs.end_capture(s)
    exe = g.instantiate()
    exe.launch(s)
    ncl.stream_synchronize(s)
    status = exe.update_launch_status(node, bump[1, 1], c, 3, 7)
    return g, exe, status


@probe("update_launch of a kernel node in a WHILE body")
def _():
    reset([2, 0, 0, 0])
    g, exe, status = body_update(CP, S, B, 2)
    first = c_dev.copy_to_host().tolist()
    reset([2, 0, 0, 0])
    if status == 0:
        exe.launch(S)
        S.synchronize()
    second = c_dev.copy_to_host().tolist()
    exe.destroy(), g.destroy()
    return "status %s; before %s, after %s (expect c[3]=14, c[1]=2)" % (
        error_name(status), first, second)


@probe("exe.update(graph2) with a WHILE node")
def _():
    reset([3, 0, 0, 0])
    g = while_graph(CP, S, B)
    exe = g.instantiate()
    g2 = while_graph(CP, S, B)
    st = update_status(exe, g2)
    exe.launch(S)
    S.synchronize()
    out = c_dev.copy_to_host().tolist()
    exe.destroy(), g.destroy(), g2.destroy()
    return "%s, c=%s" % (error_name(st), out)


@probe("graph launched with another context current / on its stream")
def _():
    from cuda.bindings import driver as d
    reset([1, 0, 0, 0])
    g = while_graph(CP, S, B)
    exe = g.instantiate()
    err, primary = d.cuCtxGetCurrent()
    err, dev = d.cuCtxGetDevice()
    made = None
    for attempt in (lambda: d.cuCtxCreate(None, 0, dev), lambda: d.cuCtxCreate(0, dev)):
        try:
            err, made = attempt()
            break
        except TypeError:
            continue
    if made is None:
        return "could not make a context"
    err, s2 = d.cuStreamCreate(0)  # in the new context (current after cuCtxCreate)
    st_own = launch_status(exe, int(s2))
    d.cuCtxSynchronize()
    st_other_stream = "skipped"
    d.cuCtxSetCurrent(primary)
    st_other_stream = launch_status(exe, int(s2))
    err_sync = d.cuCtxSynchronize()[0]
    d.cuCtxSetCurrent(made)
    d.cuStreamDestroy(s2)
    d.cuCtxSetCurrent(primary)
    d.cuCtxDestroy(made)
    exe.destroy(), g.destroy()
    return "new context current, its stream: %s; primary current, new context's stream: %s; " \
           "sync %s" % (error_name(st_own), error_name(st_other_stream), err_sync)


@probe("griddepcontrol kernel (direct launch)")
def _():
    @cuda.jit
    def pdl(x):
        ncl.griddepcontrol_wait()
        i = cuda.grid(1)
        if i < x.size:
            x[i] = i
        ncl.griddepcontrol_launch_dependents()

    @njit
    def go(xp, n, s):
        pdl[(n + 127) // 128, 128, s](numba.carray(ncl.as_voidptr(xp), (n,), np.float32))

    x = cuda.device_array(1000, np.float32)
    go(x.device_ctypes_pointer.value, 1000, S)
    S.synchronize()
    return "ok" if (x.copy_to_host() == np.arange(1000)).all() else "wrong"


@probe("driver JIT of PTX calling cudaGraphSetConditional")
def _():
    from cuda.bindings import driver as d
    ker = next(iter(count_down.overloads.values()))
    ptx = ker._codelibrary.get_asm_str(cc=(9, 0)).encode() + b"\0"
    err, mod = d.cuModuleLoadData(ptx)
    if err != 0:
        return str(err)
    err2, fn = d.cuModuleGetFunction(mod, ker.entry_name.encode())
    d.cuModuleUnload(mod)
    return "%s, %s" % (err, err2)


CHILD = r'''
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
import numba
from numba import cuda, njit
import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
@cuda.jit
def k(h):
    graphs.set_conditional(h, 0)
@njit
def go(s, h):
    return k[1, 1, s].launch_status(h)
s = cuda.stream()
print("launch", go(s, graphs.ConditionalHandle(%s)))
print("sync", ncl.stream_synchronize_status(s))
'''


@probe("set_conditional outside a graph (child process): made-up handle / a real one")
def _():
    out = []
    for handle in ("0x1234", "0"):
        r = subprocess.run([sys.executable, "-c", CHILD % handle], capture_output=True,
                           text=True, timeout=120)
        out.append((r.returncode, r.stdout.strip().replace("\n", "; "),
                    r.stderr.strip().splitlines()[-1:] if r.returncode else ""))
    return out


@njit
def fixed_graph(cp, s, n):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    for _ in range(n):
        bump[1, 32, s](c, 1, 1)
        bump[1, 32, s](c, 1, 1)
        bump[1, 32, s](c, 1, 1)
    return graphs.end_capture(s)


@njit
def loop_graph(cp, s, b):
    c = i32(cp, 4)
    graphs.begin_capture(s)
    h = graphs.conditional_handle(s, 1)
    loop = graphs.add_while(s, h)
    graphs.begin_body(b, loop)
    bump[1, 32, b](c, 1, 1)
    bump[1, 32, b](c, 1, 1)
    count_down[1, 32, b](c, h)
    graphs.end_body(b)
    return graphs.end_capture(s)


@probe("timing: 3 tiny kernels x 1000, fixed graph vs WHILE (us per iteration)")
def _():
    out = []
    for name, make in (("fixed", lambda: fixed_graph(CP, S, 1000)),
                       ("while", lambda: loop_graph(CP, S, B))):
        g = make()
        exe = g.instantiate()
        best = 1e9
        for _ in range(5):
            reset([1000, 0, 0, 0])
            S.synchronize()
            t0 = time.perf_counter()
            exe.launch(S)
            S.synchronize()
            best = min(best, time.perf_counter() - t0)
        out.append("%s %.2f" % (name, best / 1000 * 1e6))
        exe.destroy(), g.destroy()
    return ", ".join(out)
