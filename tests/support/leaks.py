"""Leak measurement for GPU tests: host RSS and free device memory around a
workload, in several windows.

Free device memory is the device's, shared with the other test processes
(pytest-xdist): one window can see another process allocate. A leak grows
in every window, so the least growth of the windows is what is asserted."""

import gc
import os

from numba import cuda


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def least_growth(run, windows=5):
    """``(host bytes, device bytes)``: the least growth of host RSS and the
    least drop of free device memory over *windows* runs of ``run()``."""
    grown, dropped = [], []
    ctx = cuda.current_context()
    for _ in range(windows):
        gc.collect()
        free0, rss0 = ctx.get_memory_info()[0], rss()
        run()
        gc.collect()
        free1, rss1 = ctx.get_memory_info()[0], rss()
        grown.append(rss1 - rss0)
        dropped.append(free0 - free1)
    return min(grown), min(dropped)
