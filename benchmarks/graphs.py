"""Below the driver floor: CUDA graph replay from compiled code against direct
launches, C and PyTorch, on a chain of tiny dependent kernels.

A chain of N launches of one tiny kernel (one block of 32 threads, each
adding 1 to its element in place: every launch reads the previous one's
output), N = 10, 100, 1000, run five ways in this one process, on one
stream:

(a) direct launches from an ``@njit`` loop (``cfg(x, n)``, N per chain);
(b) the chain recorded from ``@njit`` code (``graphs.begin_capture`` ...
    ``end_capture``), replayed from an ``@njit`` loop (``exe.launch``);
(c) C: ``cuLaunchKernel`` in a loop (benchmarks/graph_c.c, built here);
(d) C: the chain captured in C and replayed with ``cuGraphLaunch``;
(e) PyTorch: ``x.add_(1)`` N times captured with ``torch.cuda.graph`` and
    replayed (``g.replay()``), where PyTorch is installed.

Each sample: the stream is idle; an event is recorded; a batch of chains
is issued (host time: the launch cost); an event is recorded and waited
for (GPU-complete time: from the first launch to the last kernel's end).
Batches hold about 500 kernels (at least one chain) so that the host never
waits for the GPU's launch queue. Reported per kernel, medians over
samples. Also: updating one argument of a recorded launch before each
replay (``exe.update_launch``), cluster launches against a C
``cuLaunchKernelEx`` loop with the same attribute, and the handles' memory
over 10^4 capture/instantiate/destroy cycles.

    python benchmarks/graphs.py [--json out.json] [--plot out.png]
"""

import argparse
import ctypes
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, njit  # noqa: E402
from numba.core import types as nt  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import graphs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CHAINS = (10, 100, 1000)
KERNELS_PER_BATCH = 500
SAMPLES = 25
GRID, BLOCK = 1, 32
SIG = nt.void(nt.CPointer(nt.float32), nt.int64)


@cuda.jit(SIG)
def step(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = x[i] + 1


@njit(nogil=True)
def direct_chain(p, n, stream, count, reps):
    x = ncl.as_voidptr(p)
    cfg = step[GRID, BLOCK, stream]
    for _ in range(reps):
        for _ in range(count):
            cfg(x, n)


@njit
def record_chain(p, n, stream, count):
    x = ncl.as_voidptr(p)
    graphs.begin_capture(stream)
    step[GRID, BLOCK, stream](x, n)
    node = graphs.last_launch(stream)
    for _ in range(count - 1):
        step[GRID, BLOCK, stream](x, n)
    graph = graphs.end_capture(stream)
    return graph, graph.instantiate(), node


@njit(nogil=True)
def replay(exe, stream, reps):
    for _ in range(reps):
        exe.launch(stream)


@njit(nogil=True)
def update_and_replay(exe, node, p, q, n, stream, reps):
    # One argument of the first recorded launch changes before every replay
    # (the pointer, between two buffers).
    x, y = ncl.as_voidptr(p), ncl.as_voidptr(q)
    for r in range(reps):
        exe.update_launch(node, step[GRID, BLOCK], x if r % 2 == 0 else y, n)
        exe.launch(stream)


@njit(nogil=True)
def cluster_loop(p, n, stream, cluster, iters):
    x = ncl.as_voidptr(p)
    cfg = step[2 * cluster, BLOCK, stream, 0, cluster]
    for _ in range(iters):
        cfg(x, n)


@njit
def capture_cycles(p, n, stream, cycles):
    x = ncl.as_voidptr(p)
    for _ in range(cycles):
        graphs.begin_capture(stream)
        step[GRID, BLOCK, stream](x, n)
        graph = graphs.end_capture(stream)
        exe = graph.instantiate()
        graph.destroy()
        exe.destroy()


def measure(run_batch, sync, record, elapsed_ms, kernels):
    """Median (host us, GPU-complete us) per kernel of *run_batch()*, which
    issues *kernels* kernels."""
    run_batch()  # warm-up
    sync()
    host, gpu = [], []
    for _ in range(SAMPLES):
        sync()
        start = record()
        t0 = time.perf_counter()
        run_batch()
        t1 = time.perf_counter()
        end = record()
        sync()
        host.append((t1 - t0) / kernels * 1e6)
        gpu.append(elapsed_ms(start, end) * 1e3 / kernels)
    return float(np.median(host)), float(np.median(gpu))


def build_c(tmp):
    for cc in ("cc", "gcc", "clang"):
        if shutil.which(cc):
            out = os.path.join(tmp, "graph_c.so")
            subprocess.run([cc, "-O2", "-shared", "-fPIC", os.path.join(HERE, "graph_c.c"),
                            "-o", out], check=True)
            lib = ctypes.CDLL(out)
            vp, i64, u32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint
            pint = ctypes.POINTER(ctypes.c_int)
            lib.chain_direct.restype = ctypes.c_double
            lib.chain_direct.argtypes = [vp] * 4 + [u32, u32, i64, i64, pint]
            lib.chain_graph_build.restype = ctypes.c_int
            lib.chain_graph_build.argtypes = [vp] * 7 + [u32, u32, i64, vp, vp]
            lib.chain_graph_replay.restype = ctypes.c_double
            lib.chain_graph_replay.argtypes = [vp, vp, vp, i64, pint]
            lib.cluster_loop.restype = ctypes.c_double
            lib.cluster_loop.argtypes = [vp] * 4 + [u32, u32, u32, i64, pint]
            assert lib.launch_config_size() == 56 and lib.launch_attribute_size() == 72
            return lib
    return None


def torch_rows(rows, n):
    """PyTorch CUDA-graph replay of the same chain: x.add_(1) N times."""
    try:
        import torch
        if not torch.cuda.is_available():
            return "torch has no CUDA device"
    except Exception as exc:  # not installed
        return "torch not available: %s" % exc
    x = torch.zeros(n, device="cuda")
    side = torch.cuda.Stream()
    kept = []  # the captured graphs, alive until the end
    for count in CHAINS:
        with torch.cuda.stream(side):  # warm-up off the capture, as PyTorch advises
            x.add_(1)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        kept.append(g)
        with torch.cuda.graph(g):
            for _ in range(count):
                x.add_(1)
        reps = max(1, KERNELS_PER_BATCH // count)

        def batch():
            for _ in range(reps):
                g.replay()

        def record():
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e

        host, gpu = measure(batch, torch.cuda.synchronize, record,
                            lambda a, b: a.elapsed_time(b), reps * count)
        rows.append({"variant": "(e) PyTorch CUDA-graph replay", "N": count,
                     "host_us_per_kernel": host, "gpu_us_per_kernel": gpu})
        print("N=%-5d %-34s host %7.3f us/kernel   GPU-complete %7.3f us/kernel"
              % (count, rows[-1]["variant"], host, gpu), flush=True)
    return None


def run():
    libcuda = ctypes.CDLL("libcuda.so.1")
    addr = {name: ctypes.cast(getattr(libcuda, name), ctypes.c_void_p).value for name in (
        "cuLaunchKernel", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
        "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuLaunchKernelEx")}
    clib = build_c(tempfile.mkdtemp())
    stream = cuda.stream()
    raw = int(stream.handle)
    n = BLOCK
    buf = cuda.to_device(np.zeros(4 * n, np.float32))
    p = buf.__cuda_array_interface__["data"][0]
    q = p + 2 * n * 4
    handle = ncl.kernel_handle(step, SIG.args)
    kh = handle.handle
    values = [ctypes.c_uint64(p), ctypes.c_int64(n)]
    params = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) for v in values])
    status = ctypes.c_int()

    def record():
        e = cuda.event(timing=True)
        e.record(stream)
        return e

    def elapsed(a, b):
        return cuda.event_elapsed_time(a, b)

    rows, keep, update = [], [], {}
    for count in CHAINS:
        reps = max(1, KERNELS_PER_BATCH // count)
        kernels = reps * count

        def add(variant, batch):
            host, gpu = measure(batch, stream.synchronize, record, elapsed, kernels)
            rows.append({"variant": variant, "N": count, "host_us_per_kernel": host,
                         "gpu_us_per_kernel": gpu})
            print("N=%-5d %-34s host %7.3f us/kernel   GPU-complete %7.3f us/kernel"
                  % (count, variant, host, gpu), flush=True)

        add("(a) @njit direct launches", lambda: direct_chain(p, n, raw, count, reps))
        graph, exe, node = record_chain(p, n, raw, count)
        keep.append((graph, exe))
        add("(b) @njit graph replay", lambda: replay(exe, raw, reps))
        if clib is not None:
            def c_direct():
                clib.chain_direct(addr["cuLaunchKernel"], kh, raw, params, GRID, BLOCK,
                                  count, reps, ctypes.byref(status))
                assert status.value == 0
            add("(c) C cuLaunchKernel loop", c_direct)
            cgraph, cexec = ctypes.c_void_p(), ctypes.c_void_p()
            st = clib.chain_graph_build(addr["cuStreamBeginCapture_v2"], addr["cuLaunchKernel"],
                                        addr["cuStreamEndCapture"],
                                        addr["cuGraphInstantiateWithFlags"], kh, raw, params,
                                        GRID, BLOCK, count, ctypes.byref(cgraph),
                                        ctypes.byref(cexec))
            assert st == 0, ncl.error_name(st)

            def c_graph():
                clib.chain_graph_replay(addr["cuGraphLaunch"], cexec, raw, reps,
                                        ctypes.byref(status))
                assert status.value == 0
            add("(d) C cuGraphLaunch", c_graph)
            keep.append((graphs.Graph(cgraph.value), graphs.GraphExec(cexec.value)))
        if count == 100:
            update = {}
            for name, batch in (
                    ("replay", lambda: replay(exe, raw, reps)),
                    ("update one argument + replay",
                     lambda: update_and_replay(exe, node, p, q, n, raw, reps))):
                host, gpu = measure(batch, stream.synchronize, record, elapsed, reps)
                update[name] = {"host_us_per_replay": host, "gpu_us_per_replay": gpu}
                print("N=100   %-34s host %7.3f us/replay" % (name, host), flush=True)
    torch_note = torch_rows(rows, n)
    if torch_note:
        print(torch_note)
    for graph, exe in keep:
        exe.destroy()
        graph.destroy()

    cluster = {}
    dev = cuda.get_current_device()
    if tuple(dev.compute_capability) >= (9, 0):
        iters = 256
        cluster_loop(p, n, raw, 2, 1)
        host, _ = measure(lambda: cluster_loop(p, n, raw, 2, iters), stream.synchronize,
                          record, elapsed, iters)
        cluster["@njit cluster launch (cluster 2)"] = host
        if clib is not None:
            def c_cluster():
                clib.cluster_loop(addr["cuLaunchKernelEx"], kh, raw, params, 4, BLOCK, 2,
                                  iters, ctypes.byref(status))
                assert status.value == 0
            host, _ = measure(c_cluster, stream.synchronize, record, elapsed, iters)
            cluster["C cuLaunchKernelEx loop (cluster 2)"] = host
        print("cluster launches (us/launch):", cluster, flush=True)
    leak = leak_check(p, n, raw, stream)
    print("10^4 capture/instantiate/destroy cycles:", leak, flush=True)
    return rows, update, cluster, leak, torch_note


def leak_check(p, n, raw, stream, cycles=10_000):
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    capture_cycles(p, n, raw, 1000)
    stream.synchronize()
    ctx = cuda.current_context()
    free0, rss0 = ctx.get_memory_info()[0], rss()
    t0 = time.perf_counter()
    capture_cycles(p, n, raw, cycles)
    seconds = time.perf_counter() - t0
    stream.synchronize()
    free1, rss1 = ctx.get_memory_info()[0], rss()
    return {"cycles": cycles, "seconds": seconds, "us_per_cycle": seconds / cycles * 1e6,
            "host RSS change bytes": rss1 - rss0, "device free change bytes": free0 - free1}


def targets(rows, update, cluster):
    at = {(r["variant"][:3], r["N"]): r for r in rows}
    out = []
    a, b = at.get(("(a)", 100)), at.get(("(b)", 100))
    d = at.get(("(d)", 100))
    if a and b:
        ratio = b["host_us_per_kernel"] / a["host_us_per_kernel"]
        out.append(("N=100: graph replay host cost per kernel <= 0.25x direct launch",
                    ratio <= 0.25, ratio))
        ratio = b["gpu_us_per_kernel"] / a["gpu_us_per_kernel"]
        out.append(("N=100: graph GPU-complete time per kernel below direct launch's",
                    ratio < 1.0, ratio))
    if b and d:
        ratio = b["host_us_per_kernel"] / d["host_us_per_kernel"]
        out.append(("N=100: graph replay host cost <= 1.1x C cuGraphLaunch", ratio <= 1.1, ratio))
    if update:
        ratio = (update["update one argument + replay"]["host_us_per_replay"]
                 / update["replay"]["host_us_per_replay"])
        out.append(("N=100: update one argument + replay <= 2x replay", ratio <= 2.0, ratio))
    if len(cluster) == 2:
        ours, c = cluster.values()
        out.append(("cluster launch <= 1.05x C cuLaunchKernelEx", ours / c <= 1.05, ours / c))
    return out


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    variants = []
    for r in rows:
        if r["variant"] not in variants:
            variants.append(r["variant"])
    for ax, key, title in ((axes[0], "host_us_per_kernel", "host time per kernel"),
                           (axes[1], "gpu_us_per_kernel", "GPU-complete time per kernel")):
        for v in variants:
            pts = sorted((r["N"], r[key]) for r in rows if r["variant"] == v)
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=v)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("kernels in the chain (N)")
        ax.set_ylabel("microseconds per kernel (log)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("A chain of N tiny dependent kernels, %s" % cuda.get_current_device().name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    if not cuda.is_available():
        print("no CUDA GPU: nothing to measure")
        return 0
    t0 = time.perf_counter()
    dev = cuda.get_current_device()
    info = {"device": str(dev.name), "python": platform.python_version(),
            "numba": numba.__version__, "numba_cuda_launch": ncl.__version__,
            "driver": ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))}
    try:
        from importlib.metadata import version
        info["numba-cuda"] = version("numba-cuda")
        info["torch"] = version("torch")
    except Exception:
        pass
    print(info)
    rows, update, cluster, leak, torch_note = run()
    checks = targets(rows, update, cluster)
    for name, ok, value in checks:
        print("%s %s (%.3f)" % ("PASS" if ok else "FAIL", name, value))
    info["seconds"] = time.perf_counter() - t0
    print("took %.1f s" % info["seconds"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "chain": rows, "update": update, "cluster": cluster,
                       "leak": leak, "torch": torch_note, "targets": checks}, f, indent=1)
    if args.plot:
        try:
            plot(rows, args.plot)
        except ImportError as exc:
            print("no plot: %s" % exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
