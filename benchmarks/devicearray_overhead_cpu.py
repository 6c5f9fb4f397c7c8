"""Device arrays from Python into compiled launchers, without a GPU: the
cost of each array argument.

The launches go to the recording driver (``numba_cuda_launch.testing``);
the arrays are fakes over host memory, one per producer kind, each taking
the package's path for that kind:

* numba-cuda's ``DeviceNDArray`` (its ``gpu_data`` carries a host pointer);
* a PyTorch-like tensor (its class looks like ``torch.Tensor``: the
  PyTorch fast path);
* a CUDA Array Interface producer building its dict at each read, as CuPy
  and JAX do (the generic CAI path, JAX's);
* DLPack producers on a CUDA device whose capsules NumPy writes (versioned
  and unversioned), and one wrapped in ``on_stream``;
* the CAI producer wrapped in ``on_stream`` (what ``on_stream`` of a JAX
  GPU array is: JAX arrays have both protocols, the CAI is read first).

An ``@njit`` function launching a kernel is called with 1 and with 8 such
arrays; the per-argument cost is the difference over 7 (the fastest of
several batches of back-to-back calls: the least disturbed by other work on
the machine). Host microseconds, so comparable between versions of the
package on one machine, not with GPU numbers (see ``docs/benchmarks.md``).

    python benchmarks/devicearray_overhead_cpu.py [--json out.json] [--quick] [--rounds N]
"""

import argparse
import ctypes
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numpy as np  # noqa: E402
from numba import cuda, njit  # noqa: E402
from numba.cuda.cudadrv.devicearray import DeviceNDArray  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch.testing import RecordingDriver  # noqa: E402

N = 64


class _Memory:
    """What a ``DeviceNDArray`` reads of its ``gpu_data``: a pointer."""

    def __init__(self, host):
        self.host = host
        self.device_ctypes_pointer = ctypes.c_void_p(host.ctypes.data)


def numba_cuda_array(host):
    return DeviceNDArray(host.shape, host.strides, host.dtype, gpu_data=_Memory(host))


class _TensorBase:
    """What the package's PyTorch reader reads, over a NumPy array."""

    def __init__(self, a):
        self.a, self.ptr = a, a.ctypes.data

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    is_cuda, requires_grad, layout = True, False, "strided"

    def stride(self):
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def element_size(self):
        return self.a.itemsize

    def numel(self):
        return self.a.size

    def data_ptr(self):
        return self.ptr

    @property
    def __cuda_array_interface__(self):
        return dict(shape=self.a.shape, strides=None, typestr=self.a.dtype.str,
                    data=(self.ptr, False), version=2)


Tensor = type("Tensor", (_TensorBase,), {"__module__": "torch"})


class CAIProducer:
    """A CUDA Array Interface v3 producer building its dict at each read."""

    def __init__(self, a):
        self.a, self.ptr = a, a.ctypes.data

    @property
    def __cuda_array_interface__(self):
        a = self.a
        return {"shape": a.shape, "strides": None, "typestr": a.dtype.str,
                "data": (self.ptr, False), "version": 3, "stream": None}


class DLPackProducer:
    """A DLPack producer that says it is on a CUDA device; NumPy writes the
    capsules (versioned when the consumer asks for DLPack 1.x)."""

    def __init__(self, a, versioned=True):
        self.a, self.versioned = a, versioned

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, stream=None, max_version=None, **kw):
        if self.versioned and max_version is not None:
            return self.a.__dlpack__(max_version=max_version)
        return self.a.__dlpack__()


PRODUCERS = {
    "numba-cuda DeviceNDArray": numba_cuda_array,
    "PyTorch-like (fast path)": Tensor,
    "CAI producer (JAX-like)": CAIProducer,
    "DLPack, versioned capsule": DLPackProducer,
    "DLPack, unversioned capsule": lambda a: DLPackProducer(a, versioned=False),
    "DLPack in on_stream": lambda a: ncl.on_stream(DLPackProducer(a), 7),
    # JAX's GPU arrays have both protocols: on_stream(jax_array) is read
    # through the CUDA Array Interface (the GPU benchmark's DLPack row).
    "CAI producer in on_stream": lambda a: ncl.on_stream(CAIProducer(a), 7),
}


@cuda.jit
def touch1(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


@cuda.jit
def touch8(a, b, c, d, e, f, g, h):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += b[i] + c[i] + d[i] + e[i] + f[i] + g[i] + h[i]


@njit
def launch1(a):
    touch1[1, 64](a)


@njit
def launch8(a, b, c, d, e, f, g, h):
    touch8[1, 64](a, b, c, d, e, f, g, h)


def batch_us(call, batch):
    t0 = time.perf_counter()
    for _ in range(batch):
        call()
    return (time.perf_counter() - t0) / batch * 1e6


def measure(batch, batches, rounds):
    """Per producer: microseconds per call with 1 and with 8 arrays (the
    fastest batch of all rounds; the two alternate, so that other work on
    the machine touches both), and their difference per argument."""
    rows = {}
    with RecordingDriver() as driver:
        for name, make in list(PRODUCERS.items()) * rounds:
            arrays = [make(np.zeros(N, np.float32)) for _ in range(8)]
            one, eight = (lambda: launch1(arrays[0])), (lambda: launch8(*arrays))
            launch8(*arrays)
            assert len(driver.launches) == 1, "the launcher did not launch"
            one()
            t1, t8 = [], []
            for _ in range(batches):
                t1.append(batch_us(one, batch))
                t8.append(batch_us(eight, batch))
                driver.launches.clear()  # the record would grow for the whole run
            best = rows.get(name, {"1 array": float("inf"), "8 arrays": float("inf")})
            best = {"1 array": min(best["1 array"], *t1), "8 arrays": min(best["8 arrays"], *t8)}
            best["per argument"] = (best["8 arrays"] - best["1 array"]) / 7
            rows[name] = best
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter batches")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the producers")
    args = parser.parse_args()
    if ncl.get_compute_capability() is None:
        ncl.set_compute_capability((9, 0))  # kernels compile for it without a GPU
    batch, batches = (100, 7) if args.quick else (200, 20)
    rows = measure(batch, batches, 1 if args.quick else args.rounds)
    print("%-30s %12s %12s %14s" % ("producer (CPU, recording driver)", "1 array us",
                                    "8 arrays us", "per argument us"))
    for name, r in rows.items():
        print("%-30s %12.2f %12.2f %14.2f" % (name, r["1 array"], r["8 arrays"],
                                              r["per argument"]))
    print("(package: %s)" % os.path.dirname(ncl.__file__))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows_us": rows, "python": sys.version.split()[0],
                       "package": ncl.__file__}, f, indent=1)


if __name__ == "__main__":
    main()
