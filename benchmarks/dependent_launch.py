"""Dependent launches: a chain of small kernels, each reading what the one
before wrote, launched plainly or as programmatic dependent launches
(``kernel[g, b, stream].dependent()``), directly from an ``@njit`` loop and
recorded into a CUDA graph (dependent launches become programmatic edges).

Each kernel lets its dependent start early (``griddepcontrol_launch_dependents``)
and waits for the one before (``griddepcontrol_wait``) before reading;
without the launch attribute both are no-ops. Reported: GPU-complete
microseconds per kernel (CUDA events around the chain, best of REPEATS) for
a tiny kernel (one block) and a small one (one block per multiprocessor),
and dependent / plain. The chain's result is checked exactly each time.

    python benchmarks/dependent_launch.py [--kernels 1000] [--json out.json]
"""

import argparse
import json
import os

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, njit  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import graphs  # noqa: E402

REPEATS = 5
BLOCK = 256


@cuda.jit
def step(src, dst):
    ncl.griddepcontrol_launch_dependents()  # the next kernel may start its prologue
    i = cuda.grid(1)
    ncl.griddepcontrol_wait()  # src is the kernel before's output
    if i < dst.size:
        dst[i] = src[i] + np.float32(1)


@njit
def chain(a, b, grid, count, stream, dependent):
    """*count* launches alternating a -> b, b -> a; the CUresult."""
    status = 0
    for k in range(count):
        src, dst = (a, b) if k % 2 == 0 else (b, a)
        if dependent:
            status |= step[grid, BLOCK, stream].dependent().launch_status(src, dst)
        else:
            status |= step[grid, BLOCK, stream].launch_status(src, dst)
    return status


@njit
def timed(a, b, grid, count, stream, dependent):
    start, end = ncl.event(), ncl.event()
    start.record(stream)
    status = chain(a, b, grid, count, stream, dependent)
    end.record(stream)
    end.synchronize()
    return status, start.elapsed_time(end)


@njit
def record(a, b, grid, count, stream, dependent):
    graphs.begin_capture(stream)
    status = chain(a, b, grid, count, stream, dependent)
    graph = graphs.end_capture(stream)
    return status, graph.instantiate(), graph


@njit
def timed_replay(exe, stream):
    start, end = ncl.event(), ncl.event()
    start.record(stream)
    exe.launch(stream)
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)


def _check(a, b, count, n):
    # after count kernels the last output holds count (from zeros)
    last = b if count % 2 else a
    got = last.copy_to_host()
    assert np.array_equal(got, np.full(n, count, np.float32)), (got[:4], count)


def run(count, grid, stream):
    n = grid * BLOCK
    a, b = cuda.to_device(np.zeros(n, np.float32)), cuda.to_device(np.zeros(n, np.float32))
    out = {}
    for dependent in (False, True):
        best = float("inf")
        for _ in range(REPEATS):
            a.copy_to_device(np.zeros(n, np.float32))
            b.copy_to_device(np.zeros(n, np.float32))
            status, ms = timed(a, b, grid, count, stream, dependent)
            assert status == 0, ncl.error_name(status)
            _check(a, b, count, n)
            best = min(best, ms)
        out["direct, %s" % ("dependent" if dependent else "plain")] = best * 1e3 / count
        status, exe, graph = record(a, b, grid, count, stream, dependent)
        assert status == 0
        best = float("inf")
        for _ in range(REPEATS):
            a.copy_to_device(np.zeros(n, np.float32))
            b.copy_to_device(np.zeros(n, np.float32))
            best = min(best, timed_replay(exe, stream))
            _check(a, b, count, n)
        out["graph, %s" % ("dependent" if dependent else "plain")] = best * 1e3 / count
        exe.destroy()
        graph.destroy()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=1000)
    parser.add_argument("--json")
    args = parser.parse_args()
    stream = cuda.stream()
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    rows, ratios = {}, {}
    for label, grid in (("1 block", 1), ("%d blocks" % sms, sms)):
        got = run(args.kernels, grid, stream)
        for key, us in got.items():
            rows["%s, %s" % (label, key)] = us
        for how in ("direct", "graph"):
            ratios["%s, %s: dependent / plain" % (label, how)] = \
                got["%s, dependent" % how] / got["%s, plain" % how]
    width = max(map(len, list(rows) + list(ratios)))
    print("GPU-complete us per kernel, chain of %d, best of %d" % (args.kernels, REPEATS))
    for key, us in rows.items():
        print("  %-*s %8.3f" % (width, key, us))
    for key, r in ratios.items():
        print("  %-*s %8.3f" % (width, key, r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows_us": rows, "ratios": ratios, "kernels": args.kernels,
                       "device": cuda.get_current_device().name.decode()
                       if isinstance(cuda.get_current_device().name, bytes)
                       else cuda.get_current_device().name}, f, indent=1)


if __name__ == "__main__":
    main()
