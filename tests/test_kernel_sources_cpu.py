"""Kernels from other compilers (docs/kernel-sources.md) on the CPU: images
built here with NVRTC, launched from @njit/@cfunc against the recording
driver; the parameter bytes recorded are compared with the bytes the C
signature implies, computed independently with ``struct``. Triton kernels
are fake ``CompiledKernel`` objects with Triton's attributes (Triton needs a
GPU to compile); the GPU tests use the real packages."""

import ctypes
import os
import shutil
import struct

import numba
import numpy as np
import pytest
from numba import cfunc, njit
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from support.nvrtc import nvrtc_ptx
from numba_cuda_launch.testing import RecordingDriver
from support.foreign_sources import (  # noqa: F401  (fake_triton: tests/test_jax_sources_cpu.py)
    AXPY, AXPY_SIG, AXPY_SIZES, CUFUNCTION, CUKERNEL, SOURCES, axpy_bytes, core_kernel, cubin_of,
    cupy_function, cupy_raw_kernel, fake_triton, know_live)

ALL_SCALARS = r'''
extern "C" __global__ void every(float* y, const double* x, void* raw, signed char i8,
    short i16, int i32, long long i64, unsigned char u8, unsigned short u16,
    unsigned int u32, unsigned long long u64, unsigned short h, float f, double d, bool b)
{ if (threadIdx.x == 0) y[0] = x[0] + f + d + i8 + i16 + i32 + i64 + u8 + u16 + u32 + u64 + h + b
      + (raw != 0); }
'''
EVERY_SIG = ("void(CPointer(float32), CPointer(float64), voidptr, int8, int16, int32, int64, "
             "uint8, uint16, uint32, uint64, float16, float32, float64, boolean)")

@pytest.fixture(scope="module")
def every():
    return ncl.foreign_kernel(nvrtc_ptx(ALL_SCALARS, ("-arch=compute_90",), "every"),
                              "every", EVERY_SIG)


@pytest.fixture(scope="module")
def axpy_code():
    return cubin_of(AXPY, "axpy")


def test_ptx_parameters_are_the_c_signature_bytes(every, fake_driver):
    k = every

    @njit
    def go(yp, xp, raw, addr):
        y = numba.carray(ncl.as_voidptr(yp), (4,), np.float32)
        k[2, 64, 0, 0](y, addr, raw, -5, -300, -70000, -(2 ** 40), 200, 60000, 4000000000,
                       2 ** 63 + 5, 1.5, 2.25, -3.125, True)

    go(0x1000, 0x2000, 0x3000, 0x4000)
    (launch,) = fake_driver.launches
    want = [struct.pack("<Q", 0x1000), struct.pack("<Q", 0x4000), struct.pack("<Q", 0x3000),
            struct.pack("<b", -5), struct.pack("<h", -300), struct.pack("<i", -70000),
            struct.pack("<q", -(2 ** 40)), struct.pack("<B", 200), struct.pack("<H", 60000),
            struct.pack("<I", 4000000000), struct.pack("<Q", 2 ** 63 + 5),
            struct.pack("<e", 1.5), struct.pack("<f", 2.25), struct.pack("<d", -3.125),
            struct.pack("<?", True)]
    assert launch.params == want
    assert (launch.kernel, launch.grid, launch.block) == ("every", (2, 1, 1), (64, 1, 1))
    assert fake_driver.loads and bytes(ctypes.string_at(fake_driver.loads[-1], 9)) == \
        k.image[:9]


def test_image_from_a_file_path(axpy_code, tmp_path, fake_driver):
    path = tmp_path / "axpy.cubin"
    path.write_bytes(axpy_code.code)
    k = ncl.foreign_kernel(str(path), "axpy", nt.void(nt.CPointer(nt.float32),
                                                      nt.CPointer(nt.float32), nt.float32,
                                                      nt.int64))
    assert k.image == axpy_code.code


def test_fatbin_is_loaded_as_is(fake_driver):
    fatbin = b"\x50\xed\x55\xba" + b"\x01\x00\x10\x00" + bytes(64)
    k = ncl.foreign_kernel(fatbin, "axpy", AXPY_SIG)

    @njit
    def go(y):
        k[1, 32](y, y, 1.0, 0)

    go(0x1000)
    assert k.kind == "fatbin"
    assert bytes(ctypes.string_at(fake_driver.loads[-1], len(fatbin))) == fatbin


def test_device_array_argument_passes_its_data_pointer(axpy_code, fake_driver):
    k = ncl.foreign_kernel(axpy_code, "axpy", AXPY_SIG)

    @njit
    def go(yp, n):
        y = numba.carray(ncl.as_voidptr(yp), (n,), np.float32)
        k[1, 32](y[2:], y, 1.0, n)

    go(0x1000, 16)
    assert fake_driver.launches[0].params[:2] == [struct.pack("<Q", 0x1000 + 8),
                                                  struct.pack("<Q", 0x1000)]


def test_host_array_for_a_pointer_parameter_is_refused(axpy_code, fake_driver):
    k = ncl.foreign_kernel(axpy_code, "axpy", AXPY_SIG)

    @njit
    def go(y, x):
        return k[1, 32].launch_status(y, x, 1.0, y.size)

    @njit
    def go_raising(y, x):
        k[1, 32](y, x, 1.0, y.size)

    host = np.zeros(16, np.float32)
    assert go(host, host) == 1  # CUDA_ERROR_INVALID_VALUE, before the driver
    with pytest.raises(ncl.CudaLaunchError, match="parameter 'arg0' \\(argument 1\\) is an array "
                       "in host memory"):
        go_raising(host, host)
    assert fake_driver.launches == []


def test_wrong_array_dtype_for_a_pointer_is_a_typing_error(axpy_code, fake_driver):
    k = ncl.foreign_kernel(axpy_code, "axpy", AXPY_SIG, param_names=("y", "x", "a", "n"))

    @njit
    def go(yp):
        y = numba.carray(ncl.as_voidptr(yp), (4,), np.float64)
        k[1, 32](y, y, 1.0, 4)

    with pytest.raises(TypingError) as err:
        go(0x1000)
    first = str(err.value).splitlines()[0]
    assert "'axpy'" in first and "'y'" in first and "float64" in first and "float32*" in first
    assert fake_driver.launches == []


def test_float_for_an_integer_parameter_is_a_typing_error(axpy_code):
    k = ncl.foreign_kernel(axpy_code, "axpy", AXPY_SIG, param_names=("y", "x", "a", "n"))

    @njit
    def go(p):
        k[1, 32](p, p, 1.0, 2.5)

    with pytest.raises(TypingError) as err:
        go(0x1000)
    first = str(err.value).splitlines()[0]
    assert "'n'" in first and "float64" in first and "truncated" in first


def test_integer_out_of_range_refuses_the_launch(every, fake_driver):
    k = every

    @njit
    def go(big):
        return k[1, 32].launch_status(0, 0, 0, big, 0, 0, 0, 0, 0, 0, 0, 1.0, 1.0, 1.0, False)

    assert go(1000) != 0
    assert fake_driver.launches == []


def test_ptx_signature_that_does_not_match_is_refused():
    ptx = nvrtc_ptx(AXPY, ("-arch=compute_90",), "axpy")
    with pytest.raises(ValueError) as err:
        ncl.foreign_kernel(ptx, "axpy", "void(CPointer(float32), CPointer(float32), float64, "
                                        "int64)")
    assert "'axpy'" in str(err.value) and "[8, 8, 4, 8]" in str(err.value)
    with pytest.raises(ValueError, match="no entry 'saxpy'"):
        ncl.foreign_kernel(ptx, "saxpy", AXPY_SIG)


def test_cubin_without_the_entry_is_refused(axpy_code):
    with pytest.raises(ValueError, match="no entry 'saxpy'"):
        ncl.foreign_kernel(axpy_code, "saxpy", AXPY_SIG)


@pytest.mark.parametrize("sig, words", [
    ("void(float32[::1], int64)", ["'arg0'", "CPointer(float32)"]),
    ("void(complex64, int64)", ["'arg0'", "by value"]),
    ("void(UniTuple(int32, 2))", ["'arg0'", "by value"]),
    ("int32(int64)", ["return nothing"]),
])
def test_unsupported_c_parameters_are_refused(axpy_code, sig, words):
    with pytest.raises(TypeError) as err:
        ncl.foreign_kernel(axpy_code, "axpy", sig)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_not_an_image_is_refused():
    with pytest.raises(ValueError, match="not a cubin"):
        ncl.foreign_kernel(b"\x00\x01\x02\x03 not code", "k", "void()")


def test_entry_and_signature_are_required(axpy_code):
    with pytest.raises(TypeError, match="entry"):
        ncl.foreign_kernel(axpy_code, signature=AXPY_SIG)
    with pytest.raises(TypeError, match="signature"):
        ncl.foreign_kernel(axpy_code, "axpy")


def test_triton_kernel_gets_its_block_shared_memory_and_scratch_pointers(fake_driver):
    k = ncl.foreign_kernel(fake_triton())
    assert (k.block, k.sharedmem) == ((128, 1, 1), 1024)
    assert [p.name for p in k.params] == ["x", "out", "n", "global_scratch", "profile_scratch"]

    @njit
    def go(x, out, n):
        k[(n + 1023) // 1024, 128, 0, 1024](x, out, n)

    go(0x1000, 0x2000, 4096)
    (launch,) = fake_driver.launches
    assert launch.params == [struct.pack("<Q", 0x1000), struct.pack("<Q", 0x2000),
                             struct.pack("<i", 4096), bytes(8), bytes(8)]
    assert launch.sharedmem == 1024 and launch.block == (128, 1, 1)


@pytest.mark.parametrize("meta, words", [
    (dict(global_scratch_size=256), "global scratch"),
    (dict(num_ctas=2), "num_ctas=2"),
    (dict(launch_cooperative_grid=True), "cooperative launch"),
])
def test_triton_kernels_needing_more_than_a_launch_are_refused(meta, words):
    with pytest.raises(ValueError) as err:
        ncl.foreign_kernel(fake_triton(**meta))
    assert str(err.value).startswith("foreign_kernel(add_kernel): the Triton kernel ") and \
        words in str(err.value)


def test_triton_kernel_compiled_for_dependent_launch_launches_so(fake_driver):
    # launch_pdl: Triton's launcher makes each launch a programmatic dependent
    # one; so does compiled code (before: refused)
    k = ncl.foreign_kernel(fake_triton(launch_pdl=True))
    plain = ncl.foreign_kernel(fake_triton())

    @njit
    def go(x, out, n):
        k[4, 128, 0, 1024](x, out, n)
        plain[4, 128, 0, 1024](x, out, n)
        plain[4, 128, 0, 1024].dependent()(x, out, n)

    go(0x1000, 0x2000, 4096)
    assert [l.dependent for l in fake_driver.launches] == [True, False, True]


def test_triton_ptx_that_does_not_match_its_signature_is_refused():
    k = fake_triton()
    k.src.signature["n"] = "i64"
    with pytest.raises(ValueError, match=r"\[8, 8, 4, 8, 8\]"):
        ncl.foreign_kernel(k)


def test_jax_kernel_takes_a_foreign_kernel(axpy_code):
    """(the handler's launches: tests/test_jax_sources_cpu.py)"""
    jax = pytest.importorskip("jax")
    from numba_cuda_launch.jax import jax_kernel

    k = ncl.foreign_kernel(axpy_code, "axpy", AXPY_SIG, param_names=["y", "x", "a", "n"])
    # y is updated in place: an input aliased to the output
    jk = jax_kernel(k, lambda y, x, a, n: y, (1, 32), scalars={"a": np.float32, "n": np.int64},
                    input_output_aliases={0: 0})
    with pytest.raises(TypeError, match="kernel 'axpy' takes 4 parameters \\(y, x, a, n\\); "
                                        "got 2 inputs, 1 outputs and 2 scalars"):
        jk.register(jax.ShapeDtypeStruct((4,), np.float32),
                    jax.ShapeDtypeStruct((4,), np.float32), a=1.0, n=4)


class CAI:
    """A device array as a producer exposes it (``__cuda_array_interface__``)."""

    def __init__(self, address, n, typestr="<f4"):
        self.__cuda_array_interface__ = dict(shape=(n,), strides=None, typestr=typestr,
                                             data=(address, False), version=2)


def test_device_array_from_python_passes_its_data_pointer(axpy_code, fake_driver):
    k = ncl.foreign_kernel(axpy_code, "axpy", AXPY_SIG)

    @njit
    def go(y, x, n):
        k[1, 32](y, x, 2.0, n)

    go(CAI(0x7000, 8), CAI(0x9000, 8), 8)
    assert fake_driver.launches[0].params[:2] == [struct.pack("<Q", 0x7000),
                                                  struct.pack("<Q", 0x9000)]


@pytest.fixture
def live(fake_driver):
    return know_live(fake_driver)


LIVE_HANDLES = {"cuda.core Kernel": (CUKERNEL, "CUkernel"),
                "CuPy RawKernel": (CUFUNCTION, "CUfunction"),
                "CuPy Function": (CUFUNCTION, "CUfunction")}
LIVE_SOURCES = {name: (SOURCES[name].make,) + handle for name, handle in LIVE_HANDLES.items()}
AXPY_BYTES = axpy_bytes(0x1000, 0x2000, 0.5, 1000)


@pytest.mark.parametrize("source", sorted(LIVE_SOURCES))
def test_live_kernel_launches_its_own_handle_from_njit(source, live):
    make, handle, kind = LIVE_SOURCES[source]
    k = make()
    assert (k.image, k.handle, k.handle_kind, k.name) == (None, handle, kind, "axpy")

    @njit
    def go(y, x, n):
        k[(n + 127) // 128, 128, 0x55](y, x, np.float32(0.5), n)

    go(0x1000, 0x2000, 1000)
    (launch,) = live.launches
    assert launch.params == AXPY_BYTES
    assert (launch.grid, launch.stream) == ((8, 1, 1), 0x55)
    assert live.loads == []  # the other library's binary: no image of ours loaded


def test_launch_through_the_recorded_handle_only(fake_driver):
    # A handle the driver does not know is refused at launch (and, with
    # param info, at foreign_kernel()): the launch really passes the address.
    fake_driver.add_kernel(CUKERNEL + 16, "other", AXPY_SIZES)
    k = ncl.foreign_kernel(core_kernel(CUKERNEL + 16), "other", AXPY_SIG)

    @njit
    def go(p):
        return k[1, 32].launch_status(p, p, 1.0, 8)

    assert go(0x1000) == 0
    assert fake_driver.launches[0].kernel == "other"


def test_cupy_function_without_entry_is_named_by_its_handle(live):
    k = ncl.foreign_kernel(cupy_function(), signature=AXPY_SIG)
    assert k.name == "CuPy Function %#x" % CUFUNCTION


@pytest.mark.parametrize("make, words", [
    (lambda: core_kernel(), ["'a'", "float64", "8 bytes", "4 bytes"]),
    (lambda: cupy_raw_kernel(), ["'a'", "float64", "8 bytes", "4 bytes"]),
])
def test_param_info_mismatch_is_refused_naming_the_parameter(make, words, live):
    sig = "void(CPointer(float32), CPointer(float32), float64, int64)"
    with pytest.raises(ValueError) as err:
        ncl.foreign_kernel(make(), "axpy", sig, param_names=("y", "x", "a", "n"))
    assert "foreign_kernel(axpy)" in str(err.value)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_param_info_count_mismatch_is_refused(live):
    with pytest.raises(ValueError) as err:
        ncl.foreign_kernel(core_kernel(), "axpy", "void(CPointer(float32), float32, int64)")
    assert "takes 4 parameters ([8, 8, 4, 8] bytes)" in str(err.value)
    assert "declares 3 ([8, 4, 8] bytes)" in str(err.value)


def test_param_info_of_the_other_kind_is_not_asked(fake_driver):
    # A CUfunction is asked with cuFuncGetParamInfo (the fake refuses the
    # CUkernel query for it): a mismatch is found only through the right one.
    fake_driver.add_kernel(CUFUNCTION, "axpy", [8, 8, 8, 8], "CUfunction")
    with pytest.raises(ValueError, match="'arg2' is declared float32"):
        ncl.foreign_kernel(cupy_function(), "axpy", AXPY_SIG)


def test_unknown_live_handle_is_refused(fake_driver):
    with pytest.raises(ValueError) as err:
        ncl.foreign_kernel(core_kernel(0xBAD0), "axpy", AXPY_SIG)
    assert "CUkernel 0xbad0" in str(err.value) and "CUDA_ERROR_INVALID_HANDLE" in str(err.value)


def test_null_live_handle_is_refused():
    with pytest.raises(ValueError, match="holds no loaded kernel"):
        ncl.foreign_kernel(cupy_function(0), "axpy", AXPY_SIG)


def test_live_kernel_without_param_info_is_not_checked(fake_driver):
    # A driver before CUDA 12.4 lacks the query (the table's stub answers
    # CUDA_ERROR_NOT_FOUND): the declared signature is taken as is.
    from numba_cuda_launch.cudadrv import driver

    fake_driver.add_kernel(CUKERNEL, "axpy", AXPY_SIZES)
    missing = driver.prototype("cuKernelGetParamInfo")(lambda *args: 500)
    with driver.use_functions(cuKernelGetParamInfo=missing):
        k = ncl.foreign_kernel(core_kernel(), "axpy", "void(float64)")
    assert k.c_types == (nt.float64,)


@pytest.mark.parametrize("make, words", [
    (lambda: cupy_raw_kernel(cooperative=True), "cooperative groups"),
    (lambda: type("RawModule", (), {"__module__": "cupy._core.raw"})(), "get_function"),
])
def test_cupy_objects_that_are_not_plain_kernels_are_refused(make, words):
    with pytest.raises((TypeError, ValueError), match=words):
        ncl.foreign_kernel(make(), signature=AXPY_SIG)


def test_live_kernel_signature_is_required(live):
    with pytest.raises(TypeError, match="signature"):
        ncl.foreign_kernel(core_kernel(), "axpy")


@pytest.mark.parametrize("source", sorted(LIVE_SOURCES))
def test_live_kernel_launcher_is_not_cached(source, live):
    k = LIVE_SOURCES[source][0]()

    @njit
    def go(p):
        k[1, 32](p, p, 1.0, 8)

    go(0x1000)
    # Numba's mark of process addresses: cache=True refuses to save such code.
    assert go.overloads[go.signatures[0]].library.has_dynamic_globals
    ours = ncl.foreign_kernel(nvrtc_ptx(AXPY, ("-arch=compute_90",), "axpy"), "axpy", AXPY_SIG)

    @njit
    def from_image(p):
        ours[1, 32](p, p, 1.0, 8)

    from_image(0x1000)
    assert not from_image.overloads[from_image.signatures[0]].library.has_dynamic_globals


@pytest.mark.slow
def test_cache_true_warns_and_does_not_cache_a_live_kernel_launcher(tmp_path):
    import subprocess
    import sys

    from support.childenv import child_env

    script = tmp_path / "live_cached.py"
    script.write_text(
        "import warnings\n"
        "import numba\n"
        "import numba_cuda_launch as ncl\n"
        "from numba_cuda_launch.testing import RecordingDriver\n"
        "Kernel = type('Kernel', (), {'__module__': 'cuda.core._module'})\n"
        "src = Kernel(); src.handle = 0x7E570000\n"
        "with RecordingDriver() as rec:\n"
        "    rec.add_kernel(0x7E570000, 'axpy', [8, 8, 4, 8])\n"
        "    k = ncl.foreign_kernel(src, 'axpy', %r)\n"
        "    @numba.njit(cache=True)\n"
        "    def go(p):\n"
        "        k[1, 32](p, p, 1.0, 8)\n"
        "    with warnings.catch_warnings(record=True) as w:\n"
        "        warnings.simplefilter('always')\n"
        "        go(0x1000)\n"
        "    print(len(rec.launches), [str(x.message) for x in w])\n" % AXPY_SIG)
    env = child_env()
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env=env, cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("1 ") and "dynamic globals" in done.stdout, done.stdout
    cached = [f for _, _, fs in os.walk(tmp_path / "cache") for f in fs if f.endswith(".nbc")]
    assert cached == []


@pytest.mark.parametrize("source", sorted(LIVE_SOURCES))
def test_aot_build_refuses_a_live_kernel_launcher(source, live, tmp_path):
    from numba_cuda_launch import aot

    if shutil.which(os.environ.get("CC") or "cc") is None:
        pytest.skip("no C compiler")
    k = LIVE_SOURCES[source][0]()

    @cfunc(nt.int32(nt.voidptr, nt.int64))
    def launch(p, n):
        return k[1, 32].launch_status(p, p, np.float32(1.0), n)

    with pytest.raises(aot.AotBuildError) as err:
        aot.build(str(tmp_path / "liblive.so"), {"launch": launch})
    assert "'launch'" in str(err.value) and "foreign kernel 'axpy'" in str(err.value)
    assert "driver handle" in str(err.value) and "image" in str(err.value)


# -- every source, one test per feature ------------------------------------------
# axpy(y, x, a, n) from each source (tests/support/foreign_sources.py). A
# source read into an image loads that image; a live handle loads nothing
# of ours. Triton's launches end with its two NULL scratch pointers.

NAMES = ("y", "x", "a", "n")


@pytest.fixture(params=sorted(SOURCES))
def source(request, fake_driver):
    src = SOURCES[request.param]
    if src.live:
        know_live(fake_driver)
    return request.param, src.make(param_names=NAMES), src, fake_driver


def launched_its_own_binary(k, src, rec):
    if src.live:
        return rec.loads == []
    return any(ctypes.string_at(address, len(k.image)) == k.image for address in rec.loads)


def test_cfunc_launch_status_of_every_source(source):
    _, k, src, rec = source

    @cfunc(nt.int32(nt.voidptr, nt.voidptr, nt.int64, nt.intp))
    def go(y, x, n, stream):
        return k[(n + 127) // 128, 128, stream].launch_status(y, x, np.float32(0.5), n)

    assert go.ctypes(0x1000, 0x2000, 1000, 0x55) == 0
    rec.launch_status = 719  # CUDA_ERROR_LAUNCH_FAILED: the status comes back as it is
    assert go.ctypes(0x1000, 0x2000, 1000, 0x55) == 719
    first = rec.launches[0]
    assert (first.kernel, first.grid, first.block, first.stream) == (
        "axpy", (8, 1, 1), (128, 1, 1), 0x55)
    assert first.params == AXPY_BYTES + list(src.extra)
    assert launched_its_own_binary(k, src, rec)


def test_graph_capture_and_update_of_every_source(source):
    _, k, src, rec = source

    @njit
    def go(p, stream):
        graphs.begin_capture(stream)
        k[1, 128, stream](p, p, 1.0, 8)
        node = graphs.last_launch(stream)
        exe = graphs.end_capture(stream).instantiate()
        exe.launch(stream)
        exe.update_launch(node, k[2, 128, stream], p, p, 3.0, 16)
        exe.launch(stream)

    go(0x1000, 0x51)
    (graph,) = rec.graphs.values()
    (captured,) = graph.launches
    assert captured.kernel == "axpy"
    assert captured.params == axpy_bytes(0x1000, 0x1000, 1.0, 8) + list(src.extra)
    (_, _, update), = rec.node_updates
    assert (update.kernel, update.grid) == ("axpy", (2, 1, 1))
    assert update.params == axpy_bytes(0x1000, 0x1000, 3.0, 16) + list(src.extra)
    # the replays: as captured, then as updated
    assert [(x.grid, x.params[2]) for x in rec.launches] == [
        ((1, 1, 1), struct.pack("<f", 1.0)), ((2, 1, 1), struct.pack("<f", 3.0))]
    assert launched_its_own_binary(k, src, rec)


def test_occupancy_and_cluster_of_every_source(source):
    _, k, src, rec = source

    @njit
    def go(p):
        blocks = k[1, 128, 0, 64].max_active_blocks(p, p, 1.0, 8)
        clusters = k[4, 128, 0, 0, 2].max_active_clusters(p, p, 1.0, 8)
        k[4, 128, 0, 0, 2](p, p, 1.0, 8)
        return blocks, clusters

    blocks, clusters = go(0x1000)
    assert [(q.kind, q.kernel, q.block_size, q.sharedmem) for q in rec.occupancy_queries] == [
        ("max_active_blocks", "axpy", 128, 64), ("max_active_clusters", "axpy", 128, 0)]
    assert blocks == rec.occupancy(128, 64)
    assert clusters == rec.occupancy(128, 0) * rec.multiprocessors // 2
    (launch,) = rec.launches
    assert (launch.kernel, launch.grid, launch.cluster) == ("axpy", (4, 1, 1), (2, 1, 1))
    assert launch.params == axpy_bytes(0x1000, 0x1000, 1.0, 8) + list(src.extra)


@njit
def launch_given(k, y, x, n):
    k[(n + 127) // 128, 128](y, x, np.float32(0.5), n)


def test_kernel_passed_as_an_njit_argument_of_every_source(source):
    # (before: "can't unbox ForeignKernel(axpy) type" at the call)
    _, k, src, rec = source
    launch_given(k, 0x1000, 0x2000, 1000)
    (launch,) = rec.launches
    assert (launch.kernel, launch.grid) == ("axpy", (8, 1, 1))
    assert launch.params == AXPY_BYTES + list(src.extra)
    assert launched_its_own_binary(k, src, rec)


def test_kernels_passed_to_one_function_each_launch_their_own(fake_driver):
    # the kernel is the argument's type: one compilation each
    axpy = SOURCES["PTX"].make()
    add = ncl.foreign_kernel(fake_triton())

    @njit
    def go(k, p, n):
        return k[1, 32].launch_status(p, p, n)

    assert go(add, 0x1000, 7) == 0
    launch_given(axpy, 0x1000, 0x2000, 1000)
    assert go(add, 0x3000, 9) == 0
    assert [(x.kernel, x.params[0]) for x in fake_driver.launches] == [
        ("add_kernel", struct.pack("<Q", 0x1000)), ("axpy", struct.pack("<Q", 0x1000)),
        ("add_kernel", struct.pack("<Q", 0x3000))]
    assert len(go.overloads) == 1


def test_kernel_handle_of_every_source(source):
    name, k, src, rec = source
    h = ncl.kernel_handle(k, AXPY_SIG)
    layout = [("y", 8, 0), ("x", 8, 8), ("a", 4, 16), ("n", 8, 24)]
    if src.extra:  # Triton's scratch pointers, passed NULL
        layout += [("global_scratch", 8, 32), ("profile_scratch", 8, 40)]
    assert [(p.name, p.size, p.offset) for p in h.params] == layout
    assert h.entry_name == "axpy"
    if src.live:
        assert (h.handle, h.handle_kind, h.image) == LIVE_HANDLES[name] + (None,)
        assert rec.loads == []
    else:
        # the image is loaded once per process (the same bytes: the same handle)
        assert h.image == k.image and h.handle_kind == "CUkernel" and h.handle != 0


def test_jax_kernel_handler_of_every_source(source):
    jax = pytest.importorskip("jax")
    from numba_cuda_launch.jax import jax_kernel
    from support.ffi_frames import FakeXla, Frame

    _, k, src, rec = source
    # one input (y's buffer) and one output (x's): the kernel takes inputs,
    # then outputs, then the scalars
    jk = jax_kernel(k, lambda y, a, n: y, lambda y, a, n: (8, 128),
                    scalars={"a": np.float32, "n": np.int64})
    spec = jax.ShapeDtypeStruct((1000,), np.float32)
    handler = jk.handler([spec], [spec])
    xla = FakeXla(stream=0x5150)
    frame = Frame(xla, args=[(0x1000, (1000,), np.float32)],
                  rets=[(0x3000, (1000,), np.float32)],
                  attrs={"ncl_grid_x": np.int64(8), "ncl_block_x": np.int64(128),
                         "ncl_sharedmem": np.int64(0), "ncl_s_a": np.float32(0.5),
                         "ncl_s_n": np.int64(1000)})
    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler.address)
    assert call(frame.address) is None
    assert xla.errors == []
    (launch,) = rec.launches
    assert (launch.kernel, launch.grid, launch.block, launch.stream) == (
        "axpy", (8, 1, 1), (128, 1, 1), 0x5150)
    assert launch.params == axpy_bytes(0x1000, 0x3000, 0.5, 1000) + list(src.extra)
    assert launched_its_own_binary(k, src, rec)


CACHED_MODULE = """
import sys
sys.path.insert(0, %r)
import numba
import numpy as np
import numba_cuda_launch as ncl
from numba_cuda_launch.compat.cuda_target import gpu_available
from support.foreign_sources import IMAGE_SOURCES, SOURCES
if not gpu_available():
    ncl.set_compute_capability((9, 0))
KERNELS = [SOURCES[name].make() for name in IMAGE_SOURCES]
"""
CACHED_LAUNCHER = """
k{i} = KERNELS[{i}]

@numba.njit(cache=True)
def go{i}(p, a):
    return k{i}[1, 128].launch_status(p, p, a, 8)
"""
CACHED_PROBE = """
import ctypes, json
import numpy as np
import foreign_cached as m
from numba_cuda_launch.testing import RecordingDriver
rows = []
for i, k in enumerate(m.KERNELS):
    go = getattr(m, "go%d" % i)
    with RecordingDriver() as rec:
        status = go(0x1000, np.float32(1.5))
    (launch,) = rec.launches
    rows.append([status, launch.kernel, [p.hex() for p in launch.params],
                 any(ctypes.string_at(a, len(k.image)) == k.image for a in rec.loads),
                 sum(go.stats.cache_hits.values())])
print(json.dumps(rows))
"""


@pytest.mark.slow
def test_cache_true_launcher_of_every_image_source_loads_in_a_new_process(tmp_path):
    import json
    import subprocess
    import sys

    from support import ROOT
    from support.childenv import PREAMBLE, child_env
    from support.foreign_sources import IMAGE_SOURCES

    (tmp_path / "foreign_cached.py").write_text(
        CACHED_MODULE % os.path.join(ROOT, "tests")
        + "".join(CACHED_LAUNCHER.format(i=i) for i in range(len(IMAGE_SOURCES))))
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", PREAMBLE + CACHED_PROBE], env=env,
                              cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    want = [p.hex() for p in axpy_bytes(0x1000, 0x1000, 1.5, 8)]
    for name, first, second in zip(IMAGE_SOURCES, *runs):
        extra = [p.hex() for p in SOURCES[name].extra]
        assert first == [0, "axpy", want + extra, True, 0], name  # compiled and saved
        assert second == [0, "axpy", want + extra, True, 1], name  # loaded from the cache
