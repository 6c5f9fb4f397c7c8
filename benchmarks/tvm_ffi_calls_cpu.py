"""Cost of a ``tvm_ffi_kernel`` function's body against a TVM-FFI function
written in C++ doing the same checks and launch, without a GPU
(docs/tvm-ffi.md, "Speed"; the GPU measurement is benchmarks/tvm_ffi_calls.py).

Both functions take three float32 tensors and a float (axpy), check rank,
dtype, device and contiguity, read the stream with ``TVMFFIEnvGetStream`` and
launch through one stub ``cuLaunchKernel`` that counts and returns success
(benchmarks/tvm_ffi_calls_cpu.c; ours reaches it through the package's driver
table, whose other entry points fail the call while timing but
``cuCtxGetDevice``, which ours asks once per call to launch on the tensors'
device only (a stub answering device 0), the C++ one through a pointer it is
given); the C++ one is built with
``tvm_ffi.cpp.build_inline`` (g++). The tensors are host memory that claims a
CUDA device (tests/support/tvm_tensors.py's way). Two rows each:

* from Python: ``tvm_ffi.Function`` calls (what the GPU benchmark times, less
  the driver);
* body: the C function called from a C loop with the arguments Python
  passes (type index 70 tensor objects), no Python between calls.

Nanoseconds per call, the median of interleaved batches; the ratio of the two
functions in one run. ``--baseline DIR`` (a checkout of another version of the
package) runs the measurement in fresh processes alternating between that
tree and this one, and reports both.

    python benchmarks/tvm_ffi_calls_cpu.py [--baseline DIR] [--rounds N] [--json out.json]
"""

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# After tvm_ffi_calls.CXX_CHECKS (the GPU benchmark's checks): the launch
# through the pointer bind() gives.
CXX_LAUNCH = r"""
using LaunchFn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void*, void**, void**);
static LaunchFn launch_kernel = nullptr;
static void* kernel_handle = nullptr;

void bind(int64_t launch, int64_t kernel) {
  launch_kernel = reinterpret_cast<LaunchFn>(launch);
  kernel_handle = reinterpret_cast<void*>(kernel);
}

void axpy(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView out, double a) {
  int64_t n = checked_size(x, y, out);
  void* stream = TVMFFIEnvGetStream(x.device().device_type, x.device().device_id);
  const void* xp = x.data_ptr();
  const void* yp = y.data_ptr();
  void* op = out.data_ptr();
  float af = static_cast<float>(a);
  void* params[] = {&xp, &yp, &op, &af, &n};
  int status = launch_kernel(kernel_handle, static_cast<unsigned>((n + 255) / 256), 1, 1, 256,
                             1, 1, 0, stream, params, nullptr);
  TVM_FFI_ICHECK(status == 0) << "launch failed: " << status;
}
"""

OURS = "tvm_ffi_kernel function (numba-cuda-launch)"
CXX = "TVM-FFI function in C++ (build_inline)"


class _Any(ctypes.Structure):  # TVMFFIAny
    _fields_ = [("type_index", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("value", ctypes.c_int64)]


def _build(workdir):
    """The stub driver and call loop (cc), and the C++ function (g++)."""
    import tvm_ffi.cpp
    from tvm_ffi_calls import CXX_CHECKS

    cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        sys.exit("no C compiler (cc, gcc or clang) on PATH")
    helper = os.path.join(workdir, "tvm_ffi_calls_cpu.so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", os.path.join(HERE, "tvm_ffi_calls_cpu.c"),
                    "-o", helper], check=True)
    library = tvm_ffi.cpp.build_inline("ncl_bench_axpy_cpu", cpp_sources=CXX_CHECKS + CXX_LAUNCH,
                                       functions=["axpy", "bind"],
                                       build_directory=os.path.join(workdir, "cxx"))
    return ctypes.CDLL(helper), library


def _sample(fn, calls, key, samples):
    """Append to samples[key] the nanoseconds per call of *calls* calls
    (*fn(calls)*: their seconds)."""
    samples.setdefault(key, []).append(fn(calls) / calls * 1e9)


def measure(n, calls, batches):
    """``{row: {"python": ns, "body": ns}}`` for both functions, and the
    launches the stub counted against those expected."""
    import numpy as np
    import tvm_ffi

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from support.tvm_tensors import cuda_tensor
    from tvm_ffi_calls import axpy, by_size  # the GPU benchmark's kernel and launch rule

    import numba_cuda_launch as ncl
    from numba_cuda_launch import tvm_ffi as ntf
    from numba_cuda_launch.cudadrv import driver
    from numba_cuda_launch.testing import RecordingDriver

    if ncl.get_compute_capability() is None:
        ncl.set_compute_capability((9, 0))  # the kernel compiles without a GPU

    workdir = tempfile.mkdtemp(prefix="ncl_tvm_ffi_cpu_")
    try:
        helper, library = _build(workdir)
        cxx_module = tvm_ffi.load_module(library)
        cxx_symbol = ctypes.cast(getattr(ctypes.CDLL(library), "__tvm_ffi_axpy"),
                                 ctypes.c_void_p).value
        ours_k = ntf.tvm_ffi_kernel(axpy, by_size, arrays=[(np.float32, 1)] * 3,
                                    scalars={"a": np.float32})
        host = [np.zeros(n, np.float32) for _ in range(3)]
        tensors = [cuda_tensor(h) for h in host]
        stub = ctypes.cast(helper.stub_launch, ctypes.c_void_p).value
        helper.stub_launches.restype = ctypes.c_int64
        helper.bench_calls.restype = ctypes.c_double
        helper.bench_calls.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                       ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)]
        cxx_module.bind(stub, 0)
        args = (_Any * 4)(*[_Any(70, 0, t.__chandle__()) for t in tensors],
                          _Any(3, 0, 0))
        ctypes.c_double.from_buffer(args[3], _Any.value.offset).value = 2.0
        functions = {OURS: (ours_k.function, ours_k.address), CXX: (cxx_module.axpy,
                                                                    cxx_symbol)}
        with RecordingDriver() as recording:
            ours_k(*tensors, 2.0)  # loads the kernel (the recording driver's first load)
            (launch,) = recording.launches
            assert launch.grid == ((n + 255) // 256, 1, 1), launch.grid
            other = ctypes.cast(helper.stub_other, ctypes.c_void_p).value
            stubs = dict.fromkeys(driver.ENTRY_POINTS, other)
            stubs["cuLaunchKernel"] = stub
            stubs["cuCtxGetDevice"] = ctypes.cast(helper.stub_ctx_get_device,
                                                  ctypes.c_void_p).value
            with driver.use_functions(**stubs):
                expected = helper.stub_launches()
                samples = {}
                for name, (fn, _) in functions.items():  # warm up
                    fn(*tensors, 2.0)
                    expected += 1
                for _ in range(batches):
                    for name, (fn, address) in functions.items():
                        def from_python(k, fn=fn):
                            t0 = time.perf_counter()
                            for _ in range(k):
                                fn(*tensors, 2.0)
                            return time.perf_counter() - t0

                        def body(k, address=address):
                            failed = ctypes.c_int64()
                            seconds = helper.bench_calls(address, args, 4, k,
                                                         ctypes.byref(failed))
                            assert failed.value == 0, "%d calls failed" % failed.value
                            return seconds
                        _sample(from_python, calls, (name, "python"), samples)
                        _sample(body, calls * 10, (name, "body"), samples)
                        expected += calls * 11
                counted = helper.stub_launches()
            assert recording.launches == [launch], "a call reached the recording driver"
            helper.stub_others.restype = ctypes.c_int64
            assert helper.stub_others() == 0, "a call asked the driver for more than a launch"
        rows = {name: {kind: statistics.median(samples[name, kind])
                       for kind in ("python", "body")} for name in functions}
        return rows, counted, expected
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _child(args):
    rows, counted, expected = measure(args.n, args.calls, args.batches)
    if counted != expected:
        sys.exit("the stub launched %d times for %d calls" % (counted, expected))
    return rows


def _table(results):
    lines = ["| package | call | ours ns | C++ ns | ratio | difference ns |",
             "|---|---|---:|---:|---:|---:|"]
    for label, rows in results.items():
        for kind, what in (("python", "from Python"), ("body", "body (C loop)")):
            ours, cxx = rows[OURS][kind], rows[CXX][kind]
            lines.append("| %s | %s | %.0f | %.0f | %.2fx | %+.0f |"
                         % (label, what, ours, cxx, ours / cxx, ours - cxx))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 16)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--batches", type=int, default=15)
    p.add_argument("--baseline", help="a source tree of another version of the package: "
                   "measured in fresh processes alternating with this one")
    p.add_argument("--rounds", type=int, default=3, help="processes per tree (--baseline)")
    p.add_argument("--json")
    p.add_argument("--child-json", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_json:
        with open(args.child_json, "w") as f:
            json.dump(_child(args), f)
        return
    if not args.baseline:
        results = {"this tree": _child(args)}
    else:
        trees = {"baseline (%s)" % args.baseline: os.path.abspath(args.baseline),
                 "this tree": ROOT}
        per_tree = {label: [] for label in trees}
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            for _ in range(args.rounds):
                for label, tree in trees.items():
                    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                        [tree] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
                    subprocess.run([sys.executable, os.path.abspath(__file__), "--n",
                                    str(args.n), "--calls", str(args.calls), "--batches",
                                    str(args.batches), "--child-json", out],
                                   env=env, check=True, cwd=tree)
                    with open(out) as f:
                        per_tree[label].append(json.load(f))
        results = {label: {row: {kind: statistics.median(r[row][kind] for r in runs)
                                 for kind in ("python", "body")} for row in (OURS, CXX)}
                   for label, runs in per_tree.items()}
    print(_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": args.n, "calls": args.calls, "batches": args.batches,
                       "ns_per_call": results, "python": sys.version.split()[0]}, f, indent=1)


if __name__ == "__main__":
    main()
