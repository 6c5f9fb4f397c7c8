"""Reliability measurements on a GPU: concurrency at scale and leaks.

    python benchmarks/reliability.py [--json out.json] [--cycles 1000]

* 8 threads launching from a nogil @njit function at once, 10^5 launches
  each, on separate streams and on one stream; results checked exactly.
* 16 threads doing the very first launch of a fresh kernel at once.
* host RSS and free device memory over 10^6 launches;
* over N cycles of compiling a new @cfunc that launches a new kernel and
  dropping both: host RSS and device memory per cycle (images stay loaded
  for the process: the growth is the bound of that policy).
"""

import argparse
import gc
import json
import os
import threading
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba.core import types as nt  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def device_used():
    free, total = cuda.current_context().get_memory_info()
    return total - free


@cuda.jit
def count(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0


@numba.njit(nogil=True)
def hammer(p, n, repeats, stream):
    x = numba.carray(ncl.as_voidptr(p), (n,), np.float64)
    failures = 0
    cfg = count[(n + 127) // 128, 128, stream]
    for _ in range(repeats):
        failures += cfg.launch_status(x) != 0
    return failures


def concurrency(threads=8, repeats=100_000, one_stream=False):
    n = 256
    arrays = [cuda.to_device(np.zeros(n)) for _ in range(threads)]
    shared = cuda.stream()
    streams = [shared if one_stream else cuda.stream() for _ in range(threads)]
    hammer(arrays[0].__cuda_array_interface__["data"][0], n, 0, 0)
    failures = [None] * threads
    barrier = threading.Barrier(threads)

    def work(k):
        barrier.wait()
        failures[k] = hammer(arrays[k].__cuda_array_interface__["data"][0], n, repeats,
                             int(streams[k].handle))

    t0 = time.perf_counter()
    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    cuda.synchronize()
    elapsed = time.perf_counter() - t0
    correct = all(np.array_equal(a.copy_to_host(), np.full(n, float(repeats))) for a in arrays)
    return {"threads": threads, "launches_each": repeats, "one_stream": one_stream,
            "failed_launches": int(sum(failures)), "results_correct": bool(correct),
            "seconds": elapsed}


def first_launch_race(threads=16):
    @cuda.jit
    def fresh(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1.0

    @numba.njit(nogil=True)
    def go(p, n):
        x = numba.carray(ncl.as_voidptr(p), (n,), np.float64)
        return fresh[(n + 127) // 128, 128, 0].launch_status(x)

    go.compile((nt.int64, nt.int64))
    arrays = [cuda.to_device(np.zeros(64)) for _ in range(threads)]
    status = [None] * threads
    barrier = threading.Barrier(threads)

    def work(k):
        barrier.wait()
        status[k] = go(arrays[k].__cuda_array_interface__["data"][0], 64)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    cuda.synchronize()
    ok = all(np.array_equal(a.copy_to_host(), np.ones(64)) for a in arrays)
    return {"threads": threads, "statuses": sorted(set(status)), "results_correct": bool(ok)}


def launches_flat(total=1_000_000):
    d = cuda.to_device(np.zeros(256))
    p = d.__cuda_array_interface__["data"][0]
    s = cuda.stream()
    hammer(p, 256, 1000, int(s.handle))
    s.synchronize()
    gc.collect()
    r0, m0 = rss(), device_used()
    for _ in range(total // 100_000):
        hammer(p, 256, 100_000, int(s.handle))
        s.synchronize()
    gc.collect()
    return {"launches": total, "host_rss_change_bytes": rss() - r0,
            "device_memory_change_bytes": device_used() - m0}


SRC = """
def make(k_id):
    @cuda.jit
    def kern(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = k_id

    @numba.cfunc(nt.int32(nt.voidptr, nt.int64))
    def launcher(p, n):
        x = numba.carray(p, (n,), np.float32)
        return kern[(n + 127) // 128, 128].launch_status(x)
    return kern, launcher
"""


BASELINE_SRC = """
def make(k_id):
    @cuda.jit
    def kern(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = k_id

    @numba.cfunc(nt.int32(nt.voidptr, nt.int64))
    def launcher(p, n):
        return 0

    def python_launch(d):
        kern[1, 128](d)
    return kern, launcher, python_launch
"""


def _churn(src, cycles, run_one):
    """Per-cycle host RSS and device memory growth while *run_one* compiles
    and runs fresh functions made by *src*'s ``make``."""
    ns = {"cuda": cuda, "numba": numba, "nt": nt, "np": np}
    exec(src, ns)
    d = cuda.to_device(np.zeros(128, np.float32))
    samples = []
    for c in range(cycles):
        run_one(ns["make"](float(c)), d)
        if c % 50 == 0 or c == cycles - 1:
            cuda.synchronize()
            gc.collect()
            samples.append((c, rss(), device_used()))
    (c0, r0, m0), (c1, r1, m1) = samples[1], samples[-1]
    return d, {"cycles": cycles, "host_rss_per_cycle_bytes": (r1 - r0) / (c1 - c0),
               "device_memory_per_cycle_bytes": (m1 - m0) / (c1 - c0), "samples": samples}


def baseline_cycles(cycles):
    """The same churn without this package: a new kernel launched from
    Python and a new (non-launching) cfunc compiled per cycle."""
    def run_one(made, d):
        made[2](d)
    return _churn(BASELINE_SRC, cycles, run_one)[1]


def compile_cycles(cycles):
    import ctypes

    def run_one(made, d):
        launcher = made[1]
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64)(launcher.address)
        assert fn(d.__cuda_array_interface__["data"][0], 128) == 0

    d, out = _churn(SRC, cycles, run_one)
    out["last_result_correct"] = bool(np.all(d.copy_to_host() == cycles - 1))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--only-cycles", action="store_true")
    args = parser.parse_args()
    out = {}
    if args.only_cycles:
        out["compile_cycles"] = compile_cycles(args.cycles)
        print({k: v for k, v in out["compile_cycles"].items() if k != "samples"}, flush=True)
        out["baseline_cycles"] = baseline_cycles(args.cycles)
        print("baseline", out["baseline_cycles"], flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
        return
    out["concurrency_streams"] = concurrency(one_stream=False)
    print(out["concurrency_streams"], flush=True)
    out["concurrency_one_stream"] = concurrency(one_stream=True)
    print(out["concurrency_one_stream"], flush=True)
    out["first_launch_race"] = first_launch_race()
    print(out["first_launch_race"], flush=True)
    out["launches_flat"] = launches_flat()
    print(out["launches_flat"], flush=True)
    out["compile_cycles"] = compile_cycles(args.cycles)
    print({k: v for k, v in out["compile_cycles"].items() if k != "samples"}, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
