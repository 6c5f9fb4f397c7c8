"""Where the microseconds of an ``@njit`` call with CuPy arrays go.

Probes, one process (host microseconds, median of batches):

* Numba's C dispatcher fingerprinting an argument it does not know, for a
  CuPy array and for a plain object (it fails, then types the argument
  through ``Dispatcher.typeof_pyval``);
* the package's typing of a CuPy array (``typeof_pyval``), which also
  reads its fields;
* a whole one-argument call;
* three arrays read once while typed, against typed by a key and read
  again when unboxed (the earlier path), alternating (A/B), for CuPy and
  PyTorch;
* the floor: an ``@njit`` launch of five integers (``carray`` views), and
  CuPy's ``RawKernel`` on three arrays;
* the ``@njit`` launcher on three CuPy arrays, as it is and with typing
  that costs nothing (:func:`floor_us`): the least a typing in Python can
  cost, against ``RawKernel``.

    python benchmarks/cupy_call_breakdown.py [--json out.json]
"""

import argparse
import json
import os
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import njit  # noqa: E402
from numba._dispatcher import compute_fingerprint  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch.compat import numba_dispatcher  # noqa: E402
from numba_cuda_launch.launch.devicearray.typeof import TYPES  # noqa: E402
from numba_cuda_launch.launch.devicearray.unbox import TYPED_FIELDS  # noqa: E402
from devicearray_overhead import add3, launcher  # noqa: E402  (this folder is on the path)

N = 1024


def batch_us(fn, n=5000):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def median_us(fn, batches=15):
    fn()
    return float(np.median([batch_us(fn) for _ in range(batches)]))


@njit
def take1(a):
    return 0


@njit
def take3(a, b, c):
    return 0


@njit
def launch_ints(pa, pb, pc, n, stream):
    a = numba.carray(ncl.as_voidptr(pa), (n,), np.float32)
    b = numba.carray(ncl.as_voidptr(pb), (n,), np.float32)
    c = numba.carray(ncl.as_voidptr(pc), (n,), np.float32)
    add3[(n + 255) // 256, 256, stream](a, b, c)


def floor_us(call, arrays):
    """*call*'s time when typing its CuPy arrays costs nothing but Numba's
    own steps: the dispatcher's call back into Python returns a type known
    in advance, and the fields the unboxing reads were read beforehand (they
    stay valid: same objects, same thread). What is left is Numba's C
    dispatcher failing to fingerprint each array and calling back, the
    unboxing and the launch: the least any typing in Python can cost."""
    cls = type(arrays[0])
    known = {id(a): launcher.typeof_pyval(a) for a in arrays}
    saved = numba_dispatcher._TYPEOF[cls]
    numba_dispatcher._TYPEOF[cls] = lambda val: known[id(val)]
    try:
        return median_us(call)
    finally:
        numba_dispatcher._TYPEOF[cls] = saved


def _fingerprint_fails(value):
    try:
        compute_fingerprint(value)
    except NotImplementedError:
        pass


def _key_typing(cls):
    """The earlier typing: a key only (the unboxing then reads the array)."""
    torch_like = cls.__module__.startswith("torch")

    def typeof(val):
        if torch_like:
            k = (type(val), val.dtype, tuple(val.shape), val.stride(), val.is_cuda,
                 val.requires_grad, val.layout)
        else:
            k = (type(val), val.dtype, val.shape, val.strides)
        return TYPES.by_key[k]
    return typeof


def typed_fields_ab(a, b, c, rounds=30):
    """``(read once, key then reader)``: take3 in alternating batches."""
    take3(a, b, c)
    cls = type(a)
    fields_typing, key_typing = numba_dispatcher._TYPEOF[cls], _key_typing(cls)
    once, twice = [], []
    try:
        for _ in range(rounds):
            numba_dispatcher._TYPEOF[cls] = fields_typing
            once.append(batch_us(lambda: take3(a, b, c)))
            numba_dispatcher._TYPEOF[cls] = key_typing
            TYPED_FIELDS.entries.clear()
            twice.append(batch_us(lambda: take3(a, b, c)))
    finally:
        numba_dispatcher._TYPEOF[cls] = fields_typing
    return float(np.median(once)), float(np.median(twice))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    import cupy as cp

    rows = {}
    ca, cb, cc = (cp.zeros(N, cp.float32) for _ in range(3))
    stream = cp.cuda.Stream(non_blocking=True)

    class Plain:
        pass

    rows["C dispatcher: fingerprint of a CuPy array fails"] = \
        median_us(lambda: _fingerprint_fails(ca))
    rows["C dispatcher: fingerprint of a plain object fails"] = \
        median_us(lambda: _fingerprint_fails(Plain()))
    take1(ca)
    rows["typing a CuPy array (typeof_pyval, reads its fields)"] = \
        median_us(lambda: take1.typeof_pyval(ca))
    rows["@njit call with one integer"] = median_us(lambda: take1(1))
    rows["@njit call with one CuPy array"] = median_us(lambda: take1(ca))
    once, twice = typed_fields_ab(ca, cb, cc)
    rows["3 CuPy arrays, read once while typed"] = once
    rows["3 CuPy arrays, typed by key, read again when unboxed"] = twice
    try:
        import torch

        t = [torch.zeros(N, device="cuda") for _ in range(3)]
        once, twice = typed_fields_ab(*t)
        rows["3 PyTorch tensors, read once while typed"] = once
        rows["3 PyTorch tensors, typed by key, read again when unboxed"] = twice
    except ImportError:
        pass
    raw = cp.RawKernel(r"""
    extern "C" __global__ void add3(const float* a, const float* b, float* c, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }""", "add3")
    pa, pb, pc, sp = ca.data.ptr, cb.data.ptr, cc.data.ptr, stream.ptr
    n32 = np.int32(N)
    with stream:
        rows["CuPy RawKernel, 3 CuPy arrays"] = \
            median_us(lambda: raw((N // 256,), (256,), (ca, cb, cc, n32)))
        stream.synchronize()
        rows["@njit launch from Python, five integers (carray views)"] = \
            median_us(lambda: launch_ints(pa, pb, pc, N, sp))
        stream.synchronize()
        rows["@njit launcher, 3 CuPy arrays"] = \
            median_us(lambda: launcher(ca, cb, cc, sp))
        stream.synchronize()
        rows["@njit launcher, 3 CuPy arrays, typing that costs nothing (floor)"] = \
            floor_us(lambda: launcher(ca, cb, cc, sp), (ca, cb, cc))
        stream.synchronize()
    raw_us = rows["CuPy RawKernel, 3 CuPy arrays"]
    ratios = {"@njit launcher / RawKernel": rows["@njit launcher, 3 CuPy arrays"] / raw_us,
              "floor / RawKernel": rows["@njit launcher, 3 CuPy arrays, typing that costs "
                                        "nothing (floor)"] / raw_us}
    for name, us in rows.items():
        print("%-70s %8.3f us" % (name, us))
    for name, r in ratios.items():
        print("%-70s %8.2f" % (name, r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows_us": rows, "ratios": ratios}, f, indent=1)


if __name__ == "__main__":
    main()
