"""Launch cost per device: a launch on device 1 of 2 against device 0.

One kernel (one array argument, dynamic shared memory when asked) launched
back to back from an ``@njit`` loop on a stream of each device, in this one
process: with that device's context current (as after ``with
cuda.gpus[n]``), with device 0's current (a launch runs in its stream's
context), and alternating the two devices' streams in one loop; each with
no dynamic shared memory and with 64 KiB (above 48 KiB: the per-device
opt-in, one compare once every device's limit is known, the stream's
context and its device until then). Host microseconds per launch, medians
over batches (the stream idle before each batch, batches below the
driver's queue depth; ``launch_overhead.median_us``). With one GPU only
device 0's rows are measured, and the script says so.

    python benchmarks/devices.py [--json out.json]
"""

import argparse
import json
import os
import platform
import sys

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, njit  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_overhead import median_us  # noqa: E402

N = 4096
KIB = 1024
SHARED = (0, 64 * KIB)


@cuda.jit
def bump(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


@njit
def loop(x, stream, sharedmem, count):
    for _ in range(count):
        bump[(x.size + 255) // 256, 256, stream, sharedmem](x)


@njit
def alternate(x0, s0, x1, s1, sharedmem, count):
    for _ in range(count // 2):
        bump[(x0.size + 255) // 256, 256, s0, sharedmem](x0)
        bump[(x1.size + 255) // 256, 256, s1, sharedmem](x1)


def measure(devices):
    """Rows ``{"row", "device", "current", "sharedmem", "us_per_launch"}``."""
    made = []
    for d in devices:
        with cuda.gpus[d]:
            made.append((cuda.to_device(np.zeros(N, np.float32)), cuda.stream()))
    rows = []

    def row(name, device, current, sharedmem, run, syncs):
        def sync():
            for s in syncs:
                s.synchronize()
        with cuda.gpus[current]:
            us = median_us(run, sync)
        rows.append(dict(row=name, device=device, current=current, sharedmem=sharedmem,
                         us_per_launch=us))
        print("%-34s device %s, current %d, sharedmem %6d: %6.2f us/launch"
              % (name, device, current, sharedmem, us))

    for sharedmem in SHARED:
        for d in devices:
            x, s = made[d]
            # with 64 KiB, device 0's first row runs before device 1's limit
            # is known (a process using one device of two)
            row("@njit loop, its device current", d, d, sharedmem,
                lambda n, x=x, s=s: loop(x, s, sharedmem, n), [s])
            if d:
                row("@njit loop, device 0 current", d, 0, sharedmem,
                    lambda n, x=x, s=s: loop(x, s, sharedmem, n), [s])
        if len(devices) > 1:
            (x0, s0), (x1, s1) = made
            row("@njit loop alternating devices", "0+1", 0, sharedmem,
                lambda n: alternate(x0, s0, x1, s1, sharedmem, n), [s0, s1])
            if sharedmem:
                row("@njit loop, both devices known", 0, 0, sharedmem,
                    lambda n: loop(x0, s0, sharedmem, n), [s0])
    for d, (x, s) in enumerate(made):  # every launch added 1 to every element
        s.synchronize()
        got = x.copy_to_host()
        assert (got == got[0]).all() and got[0] > 0, (d, got[:4])
    return rows


def ratios(rows):
    """Device 1 over device 0, per shared memory size and current device
    (device 0's last row of the size: with every device's limit known)."""
    out = {}
    for r in rows:
        if r["device"] != 1:
            continue
        base = [b["us_per_launch"] for b in rows
                if b["device"] == 0 and b["sharedmem"] == r["sharedmem"]][-1]
        key = "sharedmem %d, device %d current" % (r["sharedmem"], r["current"])
        out[key] = r["us_per_launch"] / base
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    if not cuda.is_available():
        print("benchmarks/devices.py needs a GPU (numba-cuda finds none here)")
        return 0
    count = len(cuda.gpus)
    devices = list(range(min(count, 2)))
    info = {"devices": [str(cuda.gpus[d].name) for d in devices], "gpus": count,
            "python": platform.python_version(), "numba": numba.__version__,
            "numba_cuda_launch": ncl.__version__}
    print(info)
    if count < 2:
        print("one GPU: only device 0's rows are measured (device 1 needs a second GPU)")
    rows = measure(devices)
    result = ratios(rows)
    for key, ratio in result.items():
        print("device 1 / device 0, %s: %.3f" % (key, ratio))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "rows": rows, "ratios": result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
