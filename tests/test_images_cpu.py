"""Images for several architectures, without a GPU: the fatbin container
(checked against the layout nvcc 13.0 writes), the setting that asks for it
(``set_compute_capability`` with a list), and the recording driver playing
the driver's choice of code for a device of a given compute capability."""

import ctypes
import struct
import subprocess
import sys

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from numba_cuda_launch import config
from numba_cuda_launch.cudadrv import fatbin
from numba_cuda_launch.kernels.numba_cuda import kernel_cubin
from numba_cuda_launch.launch import caching
from numba_cuda_launch.testing import RecordingDriver
from support import HAVE_GPU
from support.childenv import CACHED_LAUNCHER, PREAMBLE, child_env

ADDR = 0x7F0000001000
SIG = "void(float32, float32[::1], float32[::1])"


@cuda.jit
def axpy(a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]


@pytest.fixture
def architectures():
    """Set a compute capability setting for one test, restored after it."""
    before = config._configured
    yield ncl.set_compute_capability
    config._configured = before


def _fatbin_at(address):
    head = ctypes.string_at(address, 16)
    return fatbin.fatbin_entries(ctypes.string_at(address, 16 + int.from_bytes(head[8:], "little")))


def _cubin(cc):
    kernel = axpy.compile((nt.float32, nt.float32[::1], nt.float32[::1]))
    return kernel_cubin(kernel, cc)


# -- the container ------------------------------------------------------------------

PTX = ".version 9.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n"


def test_fatbin_entries_are_laid_out_as_nvcc_writes_them():
    data = fatbin.build_fatbin({(8, 0): b"\x7fELF" + b"\1" * 11}, ((8, 0), PTX))
    magic, version, header, size = struct.unpack_from("<IHHQ", data)
    assert (magic, version, header, size + 16) == (0xBA55ED50, 1, 16, len(data))
    entries, pos = [], 16
    while pos < len(data):
        fields = struct.unpack_from("<HHIQIIHHIIIQQQ", data, pos)
        entries.append((fields, data[pos + 64:pos + fields[2]]))
        pos += fields[2] + fields[3]
    assert pos == len(data)
    (cubin, _), (ptx, ext) = entries
    # What `nvcc -fatbin --no-compress -gencode arch=compute_80,code=[sm_80,compute_80]`
    # (CUDA 13.0) wrote: kind, 0x0101, header size, (padded size), 0 (uncompressed),
    # extension offset, code version minor/major, arch, no name, flags 64-bit|Linux.
    assert cubin[:3] == (2, 0x0101, 64) and cubin[3] == 16 and cubin[4:11] == (
        0, 0, 8, 1, 80, 0, 0) and cubin[11] == 0x11
    assert ptx[:3] == (1, 0x0101, 80) and ptx[4:11] == (0, 64, 0, 9, 80, 0, 0)
    assert ptx[11] == 0x11 and ext == struct.pack("<I12x", 0x48)
    assert ptx[3] % 8 == 0 and ptx[3] >= len(PTX) + 1


def test_fatbin_round_trip_keeps_each_entry():
    c80, c90 = _cubin((8, 0)), _cubin((9, 0))
    data = fatbin.build_fatbin({(9, 0): c90, (8, 0): c80}, ((8, 0), PTX))
    got = fatbin.fatbin_entries(data)
    assert [(e.kind, e.cc) for e in got] == [("cubin", (8, 0)), ("cubin", (9, 0)),
                                             ("ptx", (8, 0))]
    assert got[0].data[:len(c80)] == c80 and got[1].data[:len(c90)] == c90
    assert got[2].data == PTX.encode() + b"\0"


def test_fatbin_reader_refuses_what_is_not_one():
    with pytest.raises(ValueError, match="not a fatbin"):
        fatbin.fatbin_entries(b"\x7fELF" + bytes(60))
    whole = fatbin.build_fatbin({}, ((8, 0), PTX))
    with pytest.raises(ValueError, match="truncated fatbin"):
        fatbin.fatbin_entries(whole[:40])
    with pytest.raises(ValueError, match="PTX without a .version"):
        fatbin.build_fatbin({}, ((8, 0), ".target sm_80\n"))


@pytest.mark.parametrize("device, expected", [
    ((8, 0), ("cubin", (8, 0))),
    ((8, 6), ("cubin", (8, 0))),   # same family, newer minor
    ((9, 0), ("cubin", (9, 0))),
    ((10, 0), ("ptx", (8, 0))),    # newer than every cubin
    ((12, 1), ("ptx", (8, 0))),
    ((7, 5), None),                # older than everything
])
def test_driver_choice(device, expected):
    entries = [fatbin.FatbinEntry("cubin", (8, 0), b""), fatbin.FatbinEntry("cubin", (9, 0), b""),
               fatbin.FatbinEntry("ptx", (8, 0), b"")]
    chosen = fatbin.driver_choice(entries, device)
    assert (chosen and (chosen.kind, chosen.cc)) == expected


# -- the setting -----------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ([(9, 0), (8, 0)], ((8, 0), (9, 0))),
    ([(8, 0)], ((8, 0),)),
    (["8.0", "sm_90"], ((8, 0), (9, 0))),
    (((8, 6), "9,0"), ((8, 6), (9, 0))),
])
def test_a_list_configures_portable_images(architectures, value, expected):
    architectures(value)
    assert ncl.get_compute_capabilities() == expected
    assert ncl.get_compute_capability() == expected[0]


def test_a_pair_of_integers_is_still_one_architecture(architectures):
    architectures([9, 0])
    assert ncl.get_compute_capabilities() is None
    assert ncl.get_compute_capability() == (9, 0)


@pytest.mark.parametrize("value, what", [
    ([], "an empty list names no architecture"),
    ([(8, 0), (8, 0)], "compute capability 8.0 is listed twice"),
    ([(8, 0), "sm_80"], "compute capability 8.0 is listed twice"),
    ([8.0, 9.0], "item 0, 8.0, is not a compute capability; each item of a list"),
    ([(8, 0), None], "item 1, None, is not a compute capability"),
    ([(8, 0), (9,)], "item 1: (9,) is not a compute capability (a tuple of two integers"),
    ([(8, 0), "sm_90a"], "architecture-specific targets such as sm_90a are not built"),
    ([(5, 0), (9, 0)], "the installed CUDA toolkit does not build for compute capability 5.0 "
                       "(it builds for 7.5, "),
    ([(9, 0), (9, 9)], "does not build for compute capability 9.9"),
])
def test_bad_lists_are_refused_with_a_sentence(architectures, value, what):
    before = config._configured
    with pytest.raises(ValueError) as info:
        architectures(value)
    assert str(info.value).startswith("set_compute_capability(): ")
    assert what in str(info.value)
    assert config._configured == before  # unchanged


def test_an_architecture_the_toolkit_lacks_is_refused_from_the_variable(monkeypatch,
                                                                        architectures):
    @cuda.jit
    def lacking(x):
        x[0] = 1

    config._configured = None
    monkeypatch.setenv("NUMBA_CUDA_LAUNCH_CC", "8.0 9.9")
    with pytest.raises(TypingError) as info:
        ncl.kernel_handle(lacking, "void(float32[::1])")
    assert ("kernel 'lacking' cannot be launched from compiled code: the installed CUDA "
            "toolkit does not build for compute capability 9.9 (NUMBA_CUDA_LAUNCH_CC; it "
            "builds for 7.5, ") in str(info.value)


def test_the_variable_takes_a_list(monkeypatch, architectures):
    config._configured = None
    monkeypatch.setenv("NUMBA_CUDA_LAUNCH_CC", "9.0 sm_80")
    assert config.get_compute_capabilities() == ((8, 0), (9, 0))
    monkeypatch.setenv("NUMBA_CUDA_LAUNCH_CC", "8.0;8.0")
    with pytest.raises(ValueError, match="NUMBA_CUDA_LAUNCH_CC: compute capability 8.0 is "
                                         "listed twice"):
        config.get_compute_capabilities()


# -- images and the recording driver -------------------------------------------------

@njit
def run_axpy(p, n):
    x = numba.carray(ncl.as_voidptr(p), (n,), np.float32)
    axpy[1, 32](np.float32(2), x, x)


def test_kernel_handle_image_holds_a_cubin_per_architecture_and_ptx(architectures):
    architectures([(9, 0), (8, 0)])
    handle = ncl.kernel_handle(axpy, SIG)
    entries = fatbin.fatbin_entries(handle.image)
    assert [(e.kind, e.cc) for e in entries] == [("cubin", (8, 0)), ("cubin", (9, 0)),
                                                 ("ptx", (8, 0))]
    assert all(e.data[:4] == b"\x7fELF" for e in entries[:2])
    ptx = entries[2].data.decode()
    assert ".target sm_80" in ptx and (".entry %s(" % handle.entry_name) in ptx


def test_one_architecture_keeps_one_cubin(architectures):
    architectures((9, 0))
    assert ncl.kernel_handle(axpy, SIG).image[:4] == b"\x7fELF"


@pytest.mark.parametrize("device, kind, cc", [
    ((9, 0), "cubin", (9, 0)),
    ((8, 6), "cubin", (8, 0)),
    ((10, 0), "ptx", (8, 0)),
])
def test_a_device_runs_the_code_the_driver_picks(architectures, device, kind, cc):
    architectures([(8, 0), (9, 0)])
    with RecordingDriver(compute_capability=device) as rec:
        run_axpy(ADDR, 4)
    assert len(rec.launches) == 1
    assert [(c.device_cc, c.kind, c.cc) for c in rec.choices] == [(device, kind, cc)]
    if rec.loads:  # the first of these tests loads the image (once per process)
        assert [(e.kind, e.cc) for e in _fatbin_at(rec.loads[0])] == [
            ("cubin", (8, 0)), ("cubin", (9, 0)), ("ptx", (8, 0))]


def test_a_device_older_than_every_architecture_fails_with_the_driver_error(architectures):
    @cuda.jit
    def older(x):
        x[0] = 1

    @njit
    def run(p):
        older[1, 1](numba.carray(ncl.as_voidptr(p), (1,), np.float32))

    architectures([(8, 0), (9, 0)])
    for _ in range(2):  # the first launch fails loading the image, the next one again
        with RecordingDriver(compute_capability=(7, 5)) as rec:
            with pytest.raises(ncl.CudaLaunchError) as info:
                run(ADDR)
        assert info.value.code == ncl.CudaLaunchError(209).code
        assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in str(info.value)
        assert "one built for a list of them runs on devices of the lowest listed or newer" \
            in str(info.value)
        assert rec.launches == [] and [(c.kind, c.cc) for c in rec.choices] == [(None, None)]
    # once a device that fits launches it, the image is loaded and launches run
    with RecordingDriver(compute_capability=(8, 0)) as rec:
        run(ADDR)
    assert len(rec.launches) == 1 and rec.choices[0].kind == "cubin"


def test_one_handle_runs_on_devices_of_two_architectures(architectures):
    @cuda.jit
    def mixed(x):
        x[0] = 1

    @njit
    def run(p):
        mixed[1, 1](numba.carray(ncl.as_voidptr(p), (1,), np.float32))

    architectures([(8, 0), (9, 0)])
    with RecordingDriver(compute_capability={0: (9, 0), 1: (8, 6), 2: (12, 0)}) as rec:
        run(ADDR)
        rec.use_device(1)
        run(ADDR)
        rec.use_device(2)
        run(ADDR)
    assert len(rec.loads) == 1  # one library, its CUkernel launched in every context
    assert [(c.device, c.kind, c.cc) for c in rec.choices] == [
        (0, "cubin", (9, 0)), (1, "cubin", (8, 0)), (2, "ptx", (8, 0))]
    assert len({launch.kernel for launch in rec.launches}) == 1


def test_numba_cuda_mlir_kernels_get_an_image_for_each_architecture(architectures):
    pytest.importorskip("numba_cuda_mlir")
    from numba_cuda_mlir import cuda as mcuda

    @mcuda.jit
    def mlir_fill(out):
        out[0] = 1

    architectures([(8, 0), (9, 0)])
    image = ncl.kernel_handle(mlir_fill, "void(float32[::1])").image
    assert [(e.kind, e.cc) for e in fatbin.fatbin_entries(image)] == [
        ("cubin", (8, 0)), ("cubin", (9, 0)), ("ptx", (8, 0))]


def test_a_kernel_whose_ptx_needs_linked_code_is_refused(architectures, tmp_path):
    def twice(x):
        return 2 * x

    ptx, _ = cuda.compile_ptx(twice, "float32(float32)", device=True, cc=(8, 0), abi="numba",
                              abi_info={"abi_name": "ncl_ext_twice"})
    ptx_file = tmp_path / "ext.ptx"
    ptx_file.write_text(ptx)
    ext = cuda.declare_device("ncl_ext_twice", "float32(float32)")

    @cuda.jit(link=[str(ptx_file)])
    def linked(x):
        x[0] = ext(x[0])

    architectures([(8, 0), (9, 0)])
    with pytest.raises(TypingError) as info:
        ncl.kernel_handle(linked, "void(float32[::1])")
    assert ("kernel 'linked' cannot be launched from compiled code: its image for several "
            "architectures needs the PTX of compute capability 8.0, for newer GPUs, and its "
            "PTX calls functions it links from other files (ncl_ext_twice), which the driver "
            "cannot link when it compiles PTX") in str(info.value)
    architectures((9, 0))  # one cubin: linked as numba-cuda links it
    from importlib.metadata import version

    try:
        h = ncl.kernel_handle(linked, "void(float32[::1])")
    except TypingError as exc:  # numba-cuda 0.26's linker cannot link this PTX file
        assert tuple(int(p) for p in version("numba-cuda").split(".")[:2]) < (0, 28)
        assert "building its cubin for compute capability (9, 0) failed" in str(exc)
    else:
        assert h.image[:4] == b"\x7fELF"


def test_code_linked_through_nvjitlink_is_in_the_ptx(architectures):
    @cuda.jit
    def half_add(x):
        x[0] = x[0] + nt.float16(1)  # links numba-cuda's float16 C++ source

    architectures([(8, 0), (9, 0)])
    image = ncl.kernel_handle(half_add, "void(float16[::1])").image
    ptx = fatbin.fatbin_entries(image)[-1].data.decode()
    assert ".visible .entry" in ptx and ".extern .func" not in ptx


# -- cached code -------------------------------------------------------------------

@pytest.mark.parametrize("built, now, used", [
    (((8, 0), (9, 0)), ((8, 0), (9, 0)), True),
    (((8, 0), (9, 0)), (9, 0), True),      # a device the cubins or PTX run on
    (((8, 0), (9, 0)), (12, 0), True),
    (((8, 0), (9, 0)), (7, 5), False),     # older than every listed architecture
    (((8, 0), (9, 0)), ((9, 0),), False),  # another list asked for
    ((9, 0), ((8, 0), (9, 0)), False),     # one cubin, a list asked for now
    ((9, 0), (9, 0), True),
    ((9, 0), (8, 0), False),
])
def test_cached_code_is_used_where_its_images_run(monkeypatch, built, now, used):
    monkeypatch.setattr(caching, "current_target", lambda: ("driver", now))
    check = caching.LaunchTargetCheck(("driver", built))
    if used:
        check()
    else:
        with pytest.raises(Exception, match="cached for"):
            check()


CACHE_MAIN = """
import sys
import numpy as np
import cachemod
from numba_cuda_launch.testing import RecordingDriver
a = np.zeros(4, np.float32)
with RecordingDriver(compute_capability=tuple(map(int, sys.argv[1].split(".")))) as rec:
    status = cachemod.run(a.ctypes.data, 4)
print(status, [(c.kind, c.cc) for c in rec.choices], sum(cachemod.run.stats.cache_hits.values()))
"""


@pytest.mark.slow
@pytest.mark.skipif(HAVE_GPU, reason="with a GPU the device decides the architecture")
def test_cached_code_of_several_architectures_is_used_where_it_runs(tmp_path):
    (tmp_path / "cachemod.py").write_text(CACHED_LAUNCHER)

    def run(setting, device):
        out = subprocess.run([sys.executable, "-c", PREAMBLE + CACHE_MAIN, device],
                             cwd=tmp_path, env=child_env(NUMBA_CUDA_LAUNCH_CC=setting),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().splitlines()[-1]

    assert run("8.0 9.0", "9.0") == "0 [('cubin', (9, 0))] 0"  # compiled
    assert run("9.0", "9.0") == "0 [('cubin', (9, 0))] 1"  # the cached fatbin
    assert run("12.0", "12.0") == "0 [('ptx', (8, 0))] 1"  # its PTX, for a newer GPU
    assert run("7.5", "7.5") == "0 [] 0"  # older than its architectures: built again


def test_aot_build_info_names_every_architecture(architectures):
    from numba_cuda_launch.interop import aot

    architectures([(8, 0), (9, 0)])
    assert "kernels for sm_80, sm_90 + compute_80 PTX;" in aot._build_info("x", None)
    architectures((9, 0))
    assert "kernels for sm_90;" in aot._build_info("x", None)
