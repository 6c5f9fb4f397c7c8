"""Device arrays from Python into compiled launchers: the cost of a call.

All rows in one process, one stream, host microseconds per call (median of
batches of back-to-back calls, the stream idle before each batch):

* numba-cuda's Python launch ``kernel[g, b](a, b, c)`` on three numba-cuda
  device arrays, and an ``@njit`` launcher called with the same arrays;
* CuPy's ``RawKernel`` on three CuPy arrays, and the ``@njit`` launcher
  called with the same arrays; numba-cuda's own Python launch of the kernel
  on the same CuPy arrays;
* per-argument unboxing cost of each producer (numba-cuda, CuPy, PyTorch,
  JAX, and JAX's arrays through DLPack alone): an ``@njit`` function taking
  four arrays and launching nothing, against one taking four integers; and
  a whole one-argument call (``benchmarks/devicearray_overhead_cpu.py``
  measures the same without a GPU);
* inside compiled code: a loop launching on device-array arguments against
  the same loop on ``carray`` views of the same memory.

    python benchmarks/devicearray_overhead.py [--json out.json]
"""

import argparse
import contextlib
import json
import os
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, njit  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402

N = 1024
BATCH = 200
BATCHES = 30


@cuda.jit
def add3(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@njit
def launcher(a, b, c, stream):
    add3[(c.size + 255) // 256, 256, stream](a, b, c)


@njit
def take4(a, b, c, d):
    return a.size + b.size + c.size + d.size


@njit
def take4_ints(a, b, c, d):
    return a + b + c + d


@njit
def take1(a):
    return a.size


@njit
def loop_device_arrays(a, b, c, stream, n):
    cfg = add3[(c.size + 255) // 256, 256, stream]
    for _ in range(n):
        cfg(a, b, c)


@njit
def loop_carrays(pa, pb, pc, size, stream, n):
    a = numba.carray(ncl.as_voidptr(pa), (size,), np.float32)
    b = numba.carray(ncl.as_voidptr(pb), (size,), np.float32)
    c = numba.carray(ncl.as_voidptr(pc), (size,), np.float32)
    cfg = add3[(size + 255) // 256, 256, stream]
    for _ in range(n):
        cfg(a, b, c)


class DLPackOnly:
    """A device array seen through DLPack alone (JAX's arrays also have the
    CUDA Array Interface, which is read first: ``on_stream`` of a JAX array
    is read through the interface)."""

    def __init__(self, x):
        self.x = x

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, stream=None, max_version=None):
        return self.x.__dlpack__(stream=stream, max_version=max_version)


def batch_us(call, batch=BATCH):
    """Microseconds per call of one batch of back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(batch):
        call()
    return (time.perf_counter() - t0) / batch * 1e6


def per_call_us(call, sync, batch=BATCH, batches=BATCHES):
    call()
    sync()
    times = []
    for _ in range(batches):
        sync()
        times.append(batch_us(call, batch))
    sync()
    return float(np.median(times))


def paired_us(ours, baseline, sync, baseline_context=contextlib.nullcontext,
              ours_context=contextlib.nullcontext, batch=BATCH, batches=BATCHES):
    """``(ours, baseline, ratio)``: batches of the two alternate, so drift
    in the machine's speed touches both; the ratio is the median of the
    per-round ratios. Each batch runs inside its ``*_context()``."""
    with ours_context():
        ours()
    with baseline_context():
        baseline()
    sync()
    a, b = [], []
    for _ in range(batches):
        for call, out, context in ((ours, a, ours_context),
                                   (baseline, b, baseline_context)):
            sync()
            with context():
                out.append(batch_us(call, batch))
    sync()
    return (float(np.median(a)), float(np.median(b)),
            float(np.median(np.array(a) / np.array(b))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    rows, checks, info = {}, [], []
    stream = cuda.stream()
    host = [np.random.default_rng().standard_normal(N).astype(np.float32) for _ in range(3)]
    da, db, dc = (cuda.to_device(h, stream=stream) for h in host)
    # numba-cuda arrays made on a stream carry it (CAI v3): a launch on
    # that stream does not wait for it. Plain arrays:
    pa, pb, pc = (cuda.to_device(h) for h in host)
    sync = stream.synchronize
    ours, base, ratio = paired_us(lambda: launcher(pa, pb, pc, stream),
                                  lambda: add3[N // 256, 256, stream](pa, pb, pc), sync)
    rows["numba-cuda Python launch, 3 device arrays"] = base
    rows["@njit launcher from Python, 3 numba-cuda arrays"] = ours
    rows["@njit launcher, 3 numba-cuda arrays carrying the launch stream"] = \
        per_call_us(lambda: launcher(da, db, dc, stream), sync)
    checks.append(("<= 0.3x numba-cuda's Python launch (3 numba-cuda arrays)", ratio,
                   ratio <= 0.3))
    unbox = {}
    try:
        import cupy as cp

        ca, cb, cc = (cp.asarray(h) for h in host)
        cstream = cp.cuda.Stream(non_blocking=True)
        raw = cp.RawKernel(r"""
        extern "C" __global__ void add3(const float* a, const float* b, float* c, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) c[i] = a[i] + b[i];
        }""", "add3")
        # Both launch on cstream, inside ``with cstream`` as a CuPy user
        # writes it: CuPy then names cstream for its arrays, the launch
        # stream, so the call does not wait (the CAI v3 rule as applied at
        # launches, see launch/devicearray/producer_wait.py).
        ours, base, ratio = paired_us(
            lambda: launcher(ca, cb, cc, cstream),
            lambda: raw((N // 256,), (256,), (ca, cb, cc, np.int32(N))),
            cstream.synchronize, baseline_context=lambda: cstream, ours_context=lambda: cstream)
        rows["CuPy RawKernel, 3 CuPy arrays"] = base
        rows["@njit launcher from Python, 3 CuPy arrays"] = ours
        checks.append(("<= 1.5x CuPy RawKernel (3 CuPy arrays)", ratio, ratio <= 1.5))
        # What launching this kernel on CuPy arrays costs a numba-cuda user
        # today: numba-cuda's own Python launch (CuPy's stream given to it
        # as an external stream, as numba-cuda refuses CuPy's stream object).
        ext = cuda.external_stream(cstream.ptr)
        ours, base, ratio = paired_us(
            lambda: launcher(ca, cb, cc, cstream),
            lambda: add3[N // 256, 256, ext](ca, cb, cc),
            cstream.synchronize, baseline_context=lambda: cstream, ours_context=lambda: cstream)
        rows["numba-cuda Python launch, 3 CuPy arrays (external stream)"] = base
        info.append(("@njit launcher / numba-cuda's Python launch, 3 CuPy arrays", ratio))
        # Outside ``with cstream`` CuPy names its default stream, another
        # stream than the launch's: each call synchronises it (idle here).
        rows["@njit launcher, 3 CuPy arrays naming another stream (a wait per call)"] = \
            per_call_us(lambda: launcher(ca, cb, cc, cstream), cstream.synchronize)
        unbox["CuPy"] = (ca, cb, cc, ca)
    except ImportError:
        pass
    unbox["numba-cuda"] = (pa, pb, pc, pa)
    try:
        import torch

        t = [torch.from_numpy(h).cuda() for h in host]
        unbox["PyTorch"] = (t[0], t[1], t[2], t[0])
    except ImportError:
        pass
    try:
        import jax.numpy as jnp

        j = [jnp.asarray(h) for h in host]
        unbox["JAX"] = (j[0], j[1], j[2], j[0])
        # (the row's name is kept from earlier runs: JAX's arrays have the
        # CUDA Array Interface, which on_stream's reader takes first)
        unbox["JAX via on_stream (DLPack)"] = tuple(ncl.on_stream(x, stream) for x in
                                                    (j[0], j[1], j[2], j[0]))
        only = tuple(ncl.on_stream(DLPackOnly(x), stream) for x in (j[0], j[1], j[2], j[0]))
        try:
            take1(only[0])
            unbox["JAX through DLPack only, on_stream"] = only
        except Exception as e:  # a JAX whose __dlpack__ takes other arguments
            info.append(("(skipped: JAX through DLPack only: %s)" % e, float("nan")))
    except ImportError:
        pass
    base = per_call_us(lambda: take4_ints(1, 2, 3, 4), lambda: None)
    rows["@njit call with 4 integers (baseline)"] = base
    for name, arrays in unbox.items():  # the whole cost of a one-argument call
        rows["@njit call with one %s array" % name] = \
            per_call_us(lambda: take1(arrays[0]), lambda: None)
    for name, arrays in unbox.items():
        us = per_call_us(lambda: take4(*arrays), lambda: None)
        rows["unboxing one %s array (per argument)" % name] = (us - base) / 4
    n = 20_000
    for label, fn in (("device arrays", lambda: loop_device_arrays(pa, pb, pc, stream, n)),
                      ("carray views", lambda: loop_carrays(
                          pa.device_ctypes_pointer.value, pb.device_ctypes_pointer.value,
                          pc.device_ctypes_pointer.value, N, stream, n))):
        fn()
        sync()
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            best.append(time.perf_counter() - t0)
            sync()
        rows["inside @njit: launch on %s" % label] = min(best) / n * 1e6
    ratio = rows["inside @njit: launch on device arrays"] / rows["inside @njit: launch on carray views"]
    checks.append(("inside compiled code, device arrays <= 1.05x carray views", ratio,
                   ratio <= 1.05))
    for name, us in rows.items():
        print("%-75s %8.2f us" % (name, us))
    for what, value, ok in checks:
        print("%s %s (%.2f)" % ("PASS" if ok else "FAIL", what, value))
    for what, value in info:
        print("ratio %s: %.2f" % (what, value))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows_us": rows, "checks": [[w, v, ok] for w, v, ok in checks],
                       "ratios": dict(info),
                       "device": cuda.get_current_device().name.decode()
                       if isinstance(cuda.get_current_device().name, bytes)
                       else str(cuda.get_current_device().name)}, f, indent=1)


if __name__ == "__main__":
    main()
