"""numba-cuda-mlir kernels with every feature that does not need numba-cuda,
against the recording driver (no GPU): the graph of a converging loop (a
WHILE node whose body's kernels set the condition with
``graphs.set_conditional``), dependent launches of kernels calling the
``griddepcontrol_*`` functions, their refusals (sm_90, CPU code, values),
and a C library.
Runs in every combination with numba-cuda-mlir; in the one without
numba-cuda (ci/matrix.json ``mlir-only``) it checks that ``numba.cuda`` is
never imported."""

import ctypes
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from numba.core.errors import TypingError

numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import graphs  # noqa: E402
from numba_cuda_launch.testing import RecordingDriver  # noqa: E402
from support import HAVE_GPU, HAVE_NUMBA_CUDA  # noqa: E402
from support.childenv import PREAMBLE, child_env  # noqa: E402
from support.messages import first_line  # noqa: E402

from numba_cuda_mlir import cuda as mcuda  # noqa: E402

if not HAVE_GPU:
    ncl.set_compute_capability(ncl.get_compute_capability() or (9, 0))

from support.mlir_kernels import (chain, consumer, producer,  # noqa: E402
                                  record_solver, scale_add, scale_add_blocks, sweep)

rng = np.random.default_rng()


@numba.njit
def record_at(u_address, v_address, n, tol, stream, body):
    u = numba.carray(ncl.as_voidptr(u_address), (n,), np.float32)
    v = numba.carray(ncl.as_voidptr(v_address), (n,), np.float32)
    return record_solver(u, v, tol, stream, body)


def test_while_loop_of_mlir_kernels_setting_its_condition():
    with RecordingDriver() as rec:
        exe = record_at(0x10000, 0x20000, 1000, np.float32(1e-4), 0x11, 0x22)
        assert rec.launches == []  # recorded, not launched
        (graph,) = [g for g in rec.graphs.values() if not g.body_of]
        (node,) = graph.launches
        assert node.size == 1
        body = rec.graphs[node.bodies[0]].launches
        names = [launch.kernel for launch in body]
        assert len(names) == 3 and names[0] == names[1] != names[2]
        # the handle: the sweeps' 8-byte parameter after their two 1-D arrays
        # (5 parameters each), the check's after its arrays and tolerance
        handle = node.handle.to_bytes(8, "little")
        assert body[0].params[10] == handle and body[2].params[11] == handle
        exe.destroy()
    ptx = next(iter(sweep.overloads.values())).ptx
    assert "cudaGraphSetConditional" in ptx


@numba.njit
def chain_at(address, n, stream):
    out = numba.carray(ncl.as_voidptr(address), (n,), np.float32)
    chain(out, out, out, stream, 1)


def test_dependent_launch_of_mlir_kernels_calling_griddepcontrol():
    with RecordingDriver() as rec:
        chain_at(0x10000, 1000, 0x11)
    assert [launch.dependent for launch in rec.launches] == [False, True]
    ptx = next(iter(consumer.overloads.values())).ptx
    assert "griddepcontrol.wait;" in ptx
    assert "griddepcontrol.launch_dependents;" in next(iter(producer.overloads.values())).ptx


def memref(a):
    """numba-cuda-mlir's parameters of array *a*'s memory: the data pointer
    twice, offset 0, the shape, the strides in elements."""
    return [struct.pack("<q", v) for v in (a.ctypes.data, a.ctypes.data, 0, *a.shape,
                                             *[s // a.itemsize for s in a.strides])]


def test_tvm_ffi_function_of_an_mlir_kernel_launches_its_memrefs():
    pytest.importorskip("tvm_ffi")
    from numba_cuda_launch import tvm_ffi as ntf
    from support.tvm_tensors import cuda_tensor

    fn = ntf.tvm_ffi_kernel(scale_add, scale_add_blocks, arrays=[(np.float32, 2)] * 3,
                            scalars={"a": np.float32})
    rows, cols = (int(v) for v in rng.integers(20, 300, size=2))
    x, y, out = (rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(3))
    a = float(rng.standard_normal())
    with RecordingDriver() as rec:
        fn(cuda_tensor(x), cuda_tensor(y), cuda_tensor(out), a)
        with pytest.raises(TypeError, match=r"kernel 'scale_add': parameter 'y' \(argument 1\) "
                           r"must be a float32 tensor of rank 2, got float64"):
            fn(cuda_tensor(x), cuda_tensor(y.astype(np.float64)), cuda_tensor(out), a)
    (launch,) = rec.launches  # the float64 tensor refused before any launch
    assert launch.grid == ((rows + 15) // 16, (cols + 15) // 16, 1)
    assert launch.block == (16, 16, 1)
    assert launch.params == memref(x) + memref(y) + memref(out) + [struct.pack("<f", a)]


def test_set_conditional_value_refused_naming_what_is_expected():
    @mcuda.jit
    def bad(out, h):
        graphs.set_conditional(h, 1.5)

    @numba.njit
    def go(address):
        bad[1, 1](numba.carray(ncl.as_voidptr(address), (1,), np.float32), np.uint64(3))

    with RecordingDriver(), pytest.raises(TypingError) as info:
        go(0x1000)
    text = str(info.value)
    assert first_line(text).startswith("compiling kernel 'bad' for (out: array(float32, 1d, C), "
                                       "h: uint64) failed")
    assert ("set_conditional(handle, value): value must be an integer or a boolean (the "
            "condition's unsigned int); got float64") in text


def test_kernel_functions_refused_in_cpu_code():
    @numba.njit
    def cpu():
        ncl.griddepcontrol_wait()

    with pytest.raises(TypingError, match=r"griddepcontrol_wait\(\) is called in CUDA kernels "
                                          r"\(numba-cuda or numba-cuda-mlir @cuda\.jit\)"):
        cpu()


_CHILD = PREAMBLE + textwrap.dedent('''
    import sys
    import numba, numpy as np
    import numba_cuda_launch as ncl
    from numba_cuda_launch.testing import RecordingDriver
    from numba_cuda_launch.compat.cuda_target import gpu_available
    from numba_cuda_mlir import cuda as mcuda
    {body}
''')


def _child(body):
    out = subprocess.run([sys.executable, "-c", _CHILD.format(body=textwrap.dedent(body))],
                         env=child_env(), capture_output=True, text=True, timeout=600)
    return out


@pytest.mark.slow
@pytest.mark.skipif(HAVE_GPU, reason="with a GPU, kernels build for the device's architecture "
                    "(sm_80 is configured only without one)")
def test_griddepcontrol_refused_below_sm90():
    out = _child('''
        ncl.set_compute_capability((8, 0))

        @mcuda.jit
        def old(out):
            ncl.griddepcontrol_wait()

        @numba.njit
        def go(p):
            old[1, 1](numba.carray(ncl.as_voidptr(p), (1,), np.float32))

        with RecordingDriver():
            go(0x1000)
    ''')
    assert out.returncode != 0
    assert ("griddepcontrol_wait() needs compute capability 9.0 or later (PTX griddepcontrol, "
            "Hopper); this kernel is built for 8.0") in out.stderr, out.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(HAVE_NUMBA_CUDA, reason="numba-cuda is installed here (importing "
                    "numba_cuda_launch imports it); ci/matrix.json's mlir-only combination "
                    "runs this")
def test_numba_cuda_is_never_imported():
    out = _child('''
        if not gpu_available():
            ncl.set_compute_capability((9, 0))

        @mcuda.jit
        def k(out, h):
            ncl.griddepcontrol_wait()
            ncl.graphs.set_conditional(h, out[0] > 0)

        @numba.njit
        def go(p, n):
            k[1, 32, 0].dependent()(numba.carray(ncl.as_voidptr(p), (n,), np.float32),
                                    np.uint64(7))

        with RecordingDriver() as rec:
            go(0x1000, 4)
        assert len(rec.launches) == 1
        print(sorted(m for m in sys.modules
                     if m == "numba.cuda" or m.startswith(("numba.cuda.", "numba_cuda."))))
    ''')
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["[]"]


@pytest.mark.slow
def test_images_for_several_architectures():
    out = _child('''
        from numba_cuda_launch.cudadrv.fatbin import fatbin_entries
        from numba_cuda_mlir import types as mt
        ncl.set_compute_capability([(8, 0), (9, 0)])

        @mcuda.jit
        def fill(out, v):
            i = mcuda.grid(1)
            if i < out.shape[0]:
                out[i] = v

        @mcuda.jit(mt.void(mt.float32[::1]))
        def eager(out):
            out[0] = 1

        @numba.njit
        def go(p, n):
            out = numba.carray(ncl.as_voidptr(p), (n,), np.float32)
            fill[1, 32](out, np.float32(2))
            eager[1, 1](out)

        with RecordingDriver() as rec:
            go(0x1000, 4)
        assert len(rec.launches) == 2
        f32 = numba.types.float32
        for kernel, args in ((fill, (f32[::1], f32)), (eager, (f32[::1],))):
            image = ncl.kernel_handle(kernel, args).image
            for e in fatbin_entries(image):
                target = [l for l in e.data.decode("latin-1").splitlines()
                          if l.startswith(".target")] if e.kind == "ptx" else []
                print(e.kind, "%d.%d" % e.cc, *target)
    ''')
    assert out.returncode == 0, out.stderr[-3000:]
    # each kernel: a cubin for each architecture and the lowest one's PTX
    assert out.stdout.splitlines() == ["cubin 8.0", "cubin 9.0", "ptx 8.0 .target sm_80"] * 2


@pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None, reason="no C compiler")
def test_c_library_of_an_mlir_kernel_launcher(tmp_path):
    from numba_cuda_launch import aot

    @mcuda.jit
    def twice(out, x):
        i = mcuda.grid(1)
        if i < out.shape[0]:
            out[i] = 2 * x[i]

    sig = numba.types.int32(numba.types.voidptr, numba.types.voidptr, numba.types.voidptr,
                            numba.types.int64)

    @numba.cfunc(sig)
    def twice_launch(stream, out, x, n):
        o = numba.carray(out, (n,), np.float32)
        xs = numba.carray(x, (n,), np.float32)
        return twice[(n + 127) // 128, 128, stream].launch_status(o, xs)

    lib = aot.build(str(tmp_path / "libmlirtwice.so"), {"twice_launch": twice_launch})
    assert lib.functions == ("twice_launch",)
    so = ctypes.CDLL(lib.path)
    fn = so.twice_launch
    fn.restype, fn.argtypes = ctypes.c_int32, [ctypes.c_void_p] * 3 + [ctypes.c_int64]
    if not HAVE_GPU:
        # the library binds the real driver: with no GPU its status
        # (CUDA_ERROR_NO_DEVICE), not a crash; tests/test_aot_cpu.py drives
        # libraries through a recording driver written in C
        assert fn(None, 0x10000, 0x20000, 1000) == 100
