"""Leak check for CUDA events made in nopython code: 10^5 create/destroy
cycles per form, host RSS and device memory (cuMemGetInfo) per cycle.

    python benchmarks/events_leak.py [--cycles 100000] [--json out.json]
    python benchmarks/events_leak.py --fake     # no GPU: the recording driver

Forms: ``njit`` (an event per loop iteration, recorded on a stream, released
when it goes out of scope), ``explicit`` (``destroy()`` each), ``status``
(the status forms), ``python`` (``numba_cuda_launch.event()`` from Python,
released by the garbage collector; a tenth of the cycles: each costs a
Python call). Each form first runs a tenth of its cycles to warm allocator
and driver pools; then bytes per cycle = growth / cycles. A leak of one
CUevent or one Numba meminfo per cycle shows as tens to hundreds of bytes
per cycle; a steady state shows as ~0. With ``--fake``, the recording driver
counts creates and destroys instead (no device).
"""

import argparse
import gc
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numpy as np  # noqa: E402

if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4 with numpy 2.5
    np.row_stack = np.vstack

from numba import cuda, njit  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@njit
def automatic(n, stream):
    for i in range(n):
        e = ncl.event(timing=(i % 2 == 0))
        e.record(stream)
    return n


@njit
def explicit(n, stream):
    for _ in range(n):
        e = ncl.event()
        e.record(stream)
        e.destroy()
    return n


@njit
def status(n, stream):
    failed = 0
    for _ in range(n):
        s, e = ncl.event_status(False)
        failed += s != 0
        failed += e.record_status(stream) != 0
        failed += e.query_status() not in (0, 600)
    return failed


def python(n, stream):
    for _ in range(n):
        e = ncl.event(timing=False)
        e.record(stream)
    return n


FORMS = {"njit": (automatic, 1), "explicit": (explicit, 1), "status": (status, 1),
         "python": (python, 10)}


def measure(name, cycles, stream, device_free, settle):
    fn, divisor = FORMS[name]
    cycles //= divisor
    fn(max(1, cycles // 10), stream)  # compile, warm pools
    settle()
    free0, rss0 = device_free(), rss()
    t0 = time.perf_counter()
    result = fn(cycles, stream)
    elapsed = time.perf_counter() - t0
    settle()
    free1, rss1 = device_free(), rss()
    row = {"form": name, "cycles": cycles,
           "host_bytes_per_cycle": (rss1 - rss0) / cycles,
           "device_bytes_per_cycle": (free0 - free1) / cycles,
           "us_per_cycle": elapsed / cycles * 1e6,
           "failures": int(result) if name == "status" else 0}
    print("%-9s %7d cycles  host %+8.2f B/cycle  device %+8.2f B/cycle  %6.2f us/cycle%s" % (
        name, cycles, row["host_bytes_per_cycle"], row["device_bytes_per_cycle"],
        row["us_per_cycle"], "  failures %d" % row["failures"] if row["failures"] else ""))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=100_000)
    parser.add_argument("--json")
    parser.add_argument("--fake", action="store_true",
                        help="no GPU: count creates and destroys with the recording driver")
    args = parser.parse_args()
    rows = []
    if args.fake:
        from numba_cuda_launch.testing import RecordingDriver

        with RecordingDriver() as fake:
            for name in FORMS:
                rows.append(measure(name, args.cycles, 0, lambda: 0, gc.collect))
            gc.collect()
            print("recording driver: %d events created, %d destroyed, %d alive "
                  "(host growth above is the fake's log of calls)" % (
                      fake.events_created, fake.events_destroyed, len(fake.live_events)))
            ok = fake.events_created == fake.events_destroyed and not fake.live_events
    else:
        stream = cuda.stream()
        ctx = cuda.current_context()
        print("device:", cuda.get_current_device().name)

        def settle():
            stream.synchronize()
            gc.collect()

        for name in FORMS:
            rows.append(measure(name, args.cycles, stream,
                                lambda: ctx.get_memory_info()[0], settle))
        # 64 B/cycle of host memory would be 6.4 MB over 10^5 cycles: a leak
        # of anything per event; below that is allocator noise.
        ok = all(abs(r["host_bytes_per_cycle"]) < 64 and r["device_bytes_per_cycle"] < 16
                 and r["failures"] == 0 for r in rows)
    print("OK: no leak" if ok else "LEAK or failures: see above")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"fake": args.fake, "rows": rows, "ok": ok}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
