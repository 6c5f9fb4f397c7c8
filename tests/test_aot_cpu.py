"""C libraries built from @cfunc launchers (numba_cuda_launch.aot), without
a GPU: the library's exports and dependencies, a C program driving it with
a recording driver written in C (tests/aot_recorder.c) against what
RecordingDriver records for the same cfuncs in Python, refusals of what
needs Python, reproducible builds and the command line."""

import ctypes
import os
import platform
import re
import shutil
import subprocess
import sys

import numba
import numba.types as nt
import numpy as np
import pytest
from support import has_libcuda, needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda

from numba_cuda_launch import aot
from numba_cuda_launch.interop import aot as aot_impl
from numba_cuda_launch.testing import RecordingDriver

import aot_kernels as K
from support.childenv import child_env
from support.foreign_sources import IMAGE_SOURCES, SOURCES

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None,
                                reason="no C compiler")
f32p = nt.CPointer(nt.float32)
LAUNCHERS = {"saxpy_launch": K.saxpy_launch, "tile_launch": K.tile_launch}
HELPERS = {"ncltest_" + h for h in (
    "abi_version", "build_info", "error_name", "last_error_name", "driver_problem",
    "driver_entry_count", "driver_entry_name", "bind_driver", "check_pointers",
    "ffi_target_count", "ffi_targets")}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("aot")
    lib = aot.build(str(d / "libncltest.so"), LAUNCHERS)
    return d, lib


def _run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    return done.stdout


def _recorder_of(d, lib):
    """tests/aot_recorder.c built against *lib* (libncltest.so in *d*)."""
    exe = str(d / "recorder")
    _run(["cc", "-O1", "-DP(x)=ncltest_##x", "-include", lib.header, "-o", exe,
          os.path.join(HERE, "aot_recorder.c"), "-L", str(d), "-lncltest",
          "-Wl,-rpath," + str(d)])
    return exe


@pytest.fixture(scope="module")
def recorder(built):
    return _recorder_of(*built)


def _ptr(address, ty=ctypes.c_float):
    return ctypes.cast(address, ctypes.POINTER(ty))


def _python_launches(saxpy_launch=K.saxpy_launch):
    """The launches tests/aot_recorder.c makes, made by the same cfuncs in
    this process and recorded by RecordingDriver."""
    with RecordingDriver() as rec:
        statuses = [
            saxpy_launch.ctypes(0x5000, _ptr(0x7000), _ptr(0x8000), 2.5, 1000),
            K.tile_launch.ctypes(0x6000, 3, 5, True, 1.25, -7, _ptr(0x9000, ctypes.c_int16),
                                 96),
            saxpy_launch.ctypes(0, _ptr(0x7100), _ptr(0x8100), -1.0, 1),
        ]
    assert statuses == [0, 0, 0]
    return rec.launches


def _check_recorded(recorder, expected, saxpy_image=b"\x7fELF"):
    """The C program's launches are *expected* (``_python_launches``); the
    saxpy_launch image it loads starts as *saxpy_image* does."""
    sizes = ";".join(",".join(str(len(p)) for p in launch.params) for launch in expected)
    out = _run([recorder, sizes + ";" + sizes.split(";")[0]]).splitlines()
    launches = [line.split() for line in out if line.startswith("launch ")]
    assert len(launches) == 4
    for got, want in zip(launches, expected):
        assert got[1] == want.kernel
        assert tuple(map(int, got[2:5])) == want.grid
        assert tuple(map(int, got[5:8])) == want.block
        assert int(got[8]) == want.sharedmem and int(got[9]) == want.stream
        assert got[10].split(",") == [p.hex() for p in want.params]
    # each launcher loads its own image once, embedded in it: saxpy's, then
    # tile's (a numba-cuda cubin)
    loads = [line.split() for line in out if line.startswith("load ")]
    assert [kind for _, kind, _ in loads] == [
        "elf" if saxpy_image.startswith(b"\x7fELF") else "not-elf", "elf"]
    assert bytes.fromhex(loads[0][2]).startswith(saxpy_image[:16])
    assert "status 0 0 0" in out


def test_c_program_launches_what_python_records(built, recorder):
    _check_recorded(recorder, _python_launches())


def _mlir_saxpy_launch():
    pytest.importorskip("numba_cuda_mlir")
    from numba_cuda_mlir import cuda as mcuda

    @mcuda.jit
    def mlir_axpy(y, x, a):
        i = mcuda.grid(1)
        if i < y.shape[0]:
            y[i] += a * x[i]

    @numba.cfunc(nt.int32(nt.voidptr, f32p, f32p, nt.float32, nt.int64))
    def saxpy_launch(stream, x, y, a, n):
        ys, xs = numba.carray(y, (n,)), numba.carray(x, (n,))
        return mlir_axpy[(n + 255) // 256, 256, stream].launch_status(ys, xs, a)

    return saxpy_launch, b"\x7fELF"


def _foreign_saxpy_launch(source):
    k = SOURCES[source].make()

    @numba.cfunc(nt.int32(nt.voidptr, f32p, f32p, nt.float32, nt.int64))
    def saxpy_launch(stream, x, y, a, n):
        return k[(n + 255) // 256, 256, stream].launch_status(y, x, a, n)

    return saxpy_launch, k.image


@pytest.mark.parametrize("source", IMAGE_SOURCES + ["numba-cuda-mlir"])
def test_c_program_launches_kernels_of_every_image_source(source, tmp_path):
    # saxpy_launch of tests/aot_recorder.c launching axpy from *source*
    # (tests/support/foreign_sources.py) or a numba-cuda-mlir kernel
    saxpy, image = _mlir_saxpy_launch() if source == "numba-cuda-mlir" else \
        _foreign_saxpy_launch(source)
    lib = aot.build(str(tmp_path / "libncltest.so"),
                    {"saxpy_launch": saxpy, "tile_launch": K.tile_launch})
    _check_recorded(_recorder_of(tmp_path, lib), _python_launches(saxpy), image)


def test_failed_launch_status_and_error_names(recorder, built):
    sizes = "8,8,4,8;8,8,1,1;8,8,4,8;8,8,4,8"
    out = _run([recorder, sizes]).splitlines()
    assert "failed 719 CUDA_ERROR_LAUNCH_FAILED CUDA_ERROR_INVALID_VALUE" in out
    # a table of the wrong size is refused, and named as the last error
    assert "bind-short 1 CUDA_ERROR_INVALID_VALUE" in out
    assert "bind 0" in out
    assert "abi %d" % aot.ABI_VERSION in out


def test_exports_only_its_functions(built):
    d, lib = built
    defined = _run(["nm", "-D", "--defined-only", lib.path])
    names = {line.split()[-1] for line in defined.splitlines()}
    assert names == set(LAUNCHERS) | HELPERS


def test_needs_only_libc_and_libdl(built):
    d, lib = built
    deps = _run(["ldd", lib.path])
    # the dynamic loader (an absolute path) and the vDSO are in every process
    libs = {line.split()[0] for line in deps.splitlines()
            if line.strip() and not line.split()[0].startswith(("/", "linux-vdso"))}
    assert libs <= {"libc.so.6", "libdl.so.2"}, deps
    undefined = _run(["nm", "-D", "--undefined-only", lib.path])
    strong = {line.split()[-1].split("@")[0] for line in undefined.splitlines()
              if line.split()[0] == "U"}
    assert strong <= {"dlopen", "dlsym", "dlerror", "getenv", "sched_yield", "strlen",
                      "strstr", "strcmp", "memcpy", "memset", "__stack_chk_fail",
                      "__memcpy_chk", "__memset_chk"}, strong  # the last two: _FORTIFY_SOURCE
    assert not any("Py" in s or "NRT" in s or "numba" in s for s in strong)


def test_position_independent(built):
    assert "TEXTREL" not in _run(["readelf", "-d", built[1].path])


def test_header_prototypes(built):
    with open(built[1].header) as f:
        text = f.read()
    assert "int32_t saxpy_launch(void *stream, float *x, float *y, float a, int64_t n);" in text
    assert ("int32_t tile_launch(void *stream, uint32_t gx, int32_t gy, bool flag, "
            "double scale, int8_t small, int16_t *data, int64_t shmem);") in text
    assert "int ncltest_bind_driver(void *const *functions, unsigned count);" in text
    assert "numba %s" % numba.__version__ in text.split("*/")[0]


def test_build_info_names_the_versions(built):
    lib = ctypes.CDLL(built[1].path)
    info = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "ncltest_build_info")))
    info = info.decode()
    import numba_cuda
    assert "numba %s;" % numba.__version__ in info
    assert "numba-cuda %s;" % numba_cuda.__version__ in info
    assert re.search(r"CUDA (\d+\.\d+|unknown);", info)
    assert "kernels for sm_90" in info
    assert lib.ncltest_abi_version() == aot.ABI_VERSION


@pytest.mark.skipif(has_libcuda(), reason="a CUDA driver is installed here")
def test_no_driver_fails_cleanly(tmp_path):
    lib = aot.build(str(tmp_path / "libnodrv.so"), {"saxpy_launch": K.saxpy_launch})
    so = ctypes.CDLL(lib.path)
    so.nodrv_driver_problem.restype = ctypes.c_char_p
    so.nodrv_last_error_name.restype = ctypes.c_char_p
    status = so.saxpy_launch(None, None, None, ctypes.c_float(1.0), ctypes.c_int64(10))
    assert status == 100
    assert b"libcuda.so.1" in so.nodrv_driver_problem()
    assert so.nodrv_last_error_name() == b"CUDA_ERROR_NO_DEVICE"


@pytest.mark.skipif(has_libcuda(), reason="a CUDA driver is installed here")
def test_threads_racing_on_first_call(built):
    d, lib = built
    exe = str(d / "threads")
    _run(["cc", "-O1", "-pthread", "-DP(x)=ncltest_##x", "-include", lib.header, "-o", exe,
          os.path.join(HERE, "aot_threads.c"), "-L", str(d), "-lncltest",
          "-Wl,-rpath," + str(d)])
    for _ in range(5):
        statuses, problem = _run([exe]).splitlines()
        assert statuses.split() == ["100"] * 8  # CUDA_ERROR_NO_DEVICE, from every thread
        assert problem.startswith("the CUDA driver (libcuda.so.1) could not be loaded: ")


def test_rebuild_gives_the_same_bytes(built, tmp_path):
    again = aot.build(str(tmp_path / "libncltest.so"), LAUNCHERS)
    with open(built[1].path, "rb") as a, open(again.path, "rb") as b:
        assert a.read() == b.read()


# -- refusals -----------------------------------------------------------------

@cuda.jit(nt.void(f32p, nt.int64))
def fill(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = 1


def test_raising_launch_refused(tmp_path):
    @numba.cfunc(nt.void(nt.voidptr, f32p, nt.int64))
    def raising(stream, x, n):
        fill[1, 32, stream](x, n)

    with pytest.raises(aot.AotBuildError) as info:
        aot.build(str(tmp_path / "libr.so"), {"fill_launch": raising})
    msg = str(info.value)
    assert msg.startswith("function 'fill_launch' (cfunc ")
    assert "Python C API" in msg and "launch_status" in msg


def test_nrt_allocation_refused(tmp_path):
    @numba.cfunc(nt.int32(nt.voidptr, f32p, nt.int64))
    def allocating(stream, x, n):
        scratch = np.zeros(n, np.int64)  # an array made in nopython code: NRT
        return fill[1, 32, stream].launch_status(x, scratch.size)

    with pytest.raises(aot.AotBuildError) as info:
        aot.build(str(tmp_path / "libn.so"), {"alloc_launch": allocating})
    msg = str(info.value)
    assert msg.startswith("function 'alloc_launch' (cfunc ")
    assert "allocates arrays with Numba's runtime (NRT: NRT_MemInfo_alloc" in msg
    assert "pass memory in as pointers" in msg


def test_array_argument_refused(tmp_path):
    @numba.cfunc(nt.int32(nt.float32[::1]))
    def takes_array(x):
        return 0

    with pytest.raises(aot.AotBuildError) as info:
        aot.build(str(tmp_path / "liba.so"), {"takes_array": takes_array})
    msg = str(info.value)
    assert "function 'takes_array'" in msg and "argument 1 is array(float32, 1d, C)" in msg


def test_not_a_cfunc_refused(tmp_path):
    with pytest.raises(aot.AotBuildError, match="function 'f'.*expected a @numba.cfunc, got "
                                                "CPUDispatcher"):
        aot.build(str(tmp_path / "libf.so"), {"f": numba.njit(lambda: 0)})


def test_c_name_refused(tmp_path):
    with pytest.raises(aot.AotBuildError, match="'saxpy-launch' is not a C identifier"):
        aot.build(str(tmp_path / "libs.so"), {"saxpy-launch": K.saxpy_launch})


def test_helper_name_clash_refused(tmp_path):
    with pytest.raises(aot.AotBuildError, match="'lib_error_name' is one of the library's own names"):
        aot.build(str(tmp_path / "liblib.so"), {"lib_error_name": K.saxpy_launch})


# Exported names that would take another library's symbol (or break the
# header) in every process loading the library, and why each is refused.
NAME_REFUSALS = {
    "getpid": "is the name of a symbol of libc.so.6: exported, it would take the place of "
              "libc.so.6's in every process that loads the library",
    "abs": "is the name of a symbol of libc.so.6",
    "memcpy": "is the name of a symbol of libc.so.6",
    "malloc": "is the name of a symbol of libc.so.6",
    "dlopen": "is the name of a symbol of libc.so.6",
    "sin": "is the name of a symbol of libm.so.6",
    "cuLaunchKernel": "is in the CUDA driver's or runtime's namespace (libcuda exports cuX...",
    "cudaMalloc": "is in the CUDA driver's or runtime's namespace",
    "numba_cuda_launch_driver_table": "is in the namespace of the library's C runtime",
    "ncl_ensure_bound": "is in the namespace of the library's C runtime",
    "NCL_PREFIX": "is in the namespace of the library's C runtime",
    "NAMES_H": "is one of the library's own names (prefix 'names')",
    "NULL": "is a macro of the C headers the library is compiled with",
    "INT8_MAX": "is a macro of the C headers the library is compiled with",
    "RTLD_NOW": "is a macro of the C headers the library is compiled with",
    "bool": "is a C or C++ keyword",
    "class": "is a C or C++ keyword",
    "_launch": "is reserved for the C implementation",
    "launch_t": "is reserved for the C implementation",
}


@pytest.mark.parametrize("name", sorted(NAME_REFUSALS))
def test_exported_names_follow_the_rule(tmp_path, name):
    with pytest.raises(ValueError) as info:  # an AotBuildError, a ValueError
        aot.build(str(tmp_path / "libnames.so"), {name: K.saxpy_launch})
    assert isinstance(info.value, aot.AotBuildError)
    msg = str(info.value)
    assert msg.startswith("function %r (cfunc saxpy_launch) cannot go in a C library: %r %s"
                          % (name, name, NAME_REFUSALS[name])), msg
    assert msg.endswith('or one of the library\'s own (ncl_*, numba_cuda_launch_*, '
                        'PREFIX_<helper>) (docs/aot.md, "Exported names")')
    assert not (tmp_path / "libnames.so").exists()


def test_the_name_rule_asks_the_system_libraries(tmp_path, monkeypatch):
    # The guard, not the compiler, refuses a libc name: without it the
    # library builds and exports getpid.
    monkeypatch.setattr(aot_impl, "_system_library_of", lambda name: None)
    lib = aot.build(str(tmp_path / "libpid.so"), {"getpid": K.saxpy_launch})
    assert "getpid" in _run(["nm", "-D", "--defined-only", lib.path])
    assert aot_impl._system_libraries()[0][0] == "libc.so.6"


def test_functions_given_as_a_list_say_what_to_pass(tmp_path):
    with pytest.raises(TypeError) as info:
        aot.build(str(tmp_path / "libl.so"), [K.saxpy_launch])
    assert str(info.value).startswith(
        "build(): functions must be a dict {C name: cfunc}, such as {'saxpy_launch': "
        "saxpy_launch}: each cfunc is exported under the name it is given; got list [")
    with pytest.raises(TypeError, match=r"^build\(\): functions maps C names \(strings\) to "
                                        r"cfuncs; got the key int 1$"):
        aot.build(str(tmp_path / "libl.so"), {1: K.saxpy_launch})
    with pytest.raises(TypeError, match=r"^build\(\): jax_kernels must be a list of "
                                        r"jax_kernel\(\) results, got int 5$"):
        aot.build(str(tmp_path / "libl.so"), {"saxpy_launch": K.saxpy_launch}, jax_kernels=5)


def test_outputs_that_overwrite_each_other_or_an_input_are_refused(tmp_path):
    lib = str(tmp_path / "libo.so")
    with pytest.raises(aot.AotBuildError) as info:
        aot.build(lib, {"saxpy_launch": K.saxpy_launch}, header=lib)
    assert str(info.value) == (
        "build(): header=%r is the library's path %r: writing the header would overwrite the "
        "library; give the header another name (default: the library's path with .h)"
        % (lib, lib))
    # the default header of a path ending in .h is the path itself
    with pytest.raises(aot.AotBuildError, match="header='.*libo.h' is the library's path"):
        aot.build(str(tmp_path / "libo.h"), {"saxpy_launch": K.saxpy_launch})
    # a hard link to the library is the same file
    open(lib, "w").close()
    os.link(lib, str(tmp_path / "same.h"))
    with pytest.raises(aot.AotBuildError, match="is the library's path"):
        aot.build(lib, {"saxpy_launch": K.saxpy_launch}, header=str(tmp_path / "same.h"))
    source = K.__file__
    before = open(source).read()
    with pytest.raises(aot.AotBuildError) as info:
        aot.build(str(tmp_path / "libo.so"), {"saxpy_launch": K.saxpy_launch}, header=source)
    assert str(info.value).startswith(
        "build(): header=%r is the Python source of function 'saxpy_launch' (cfunc "
        "saxpy_launch), which the build reads: writing it would destroy it" % source)
    runtime = os.path.join(os.path.dirname(aot_impl.__file__), "clib", "ncl_runtime.c")
    with pytest.raises(aot.AotBuildError, match="path=.*ncl_runtime.c' is the library's C "
                                                "runtime, which the build reads"):
        aot.build(runtime, {"saxpy_launch": K.saxpy_launch}, header=str(tmp_path / "r.h"),
                  prefix="r")
    with pytest.raises(aot.AotBuildError, match="path=.* is a directory; give a file name in it"):
        aot.build(str(tmp_path), {"saxpy_launch": K.saxpy_launch},
                  header=str(tmp_path / "d.h"))
    assert open(source).read() == before and os.path.getsize(lib) == 0


@pytest.mark.parametrize("cpu, why", [
    ("no-such-cpu", "LLVM does not know this CPU for x86_64-"),
    ("i386", "LLVM cannot generate x86_64-unknown-linux-gnu code for it (LLVM ERROR: 64-bit "
             "code requested on a subtarget that doesn't support it!)"),
    ("", "it names no CPU"),
])
@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 CPU names")
def test_a_cpu_llvm_cannot_generate_code_for_is_refused(tmp_path, cpu, why):
    # Given to LLVM in this process, 'i386' ends it (LLVM ERROR) and
    # 'no-such-cpu' is ignored with a warning.
    with pytest.raises(aot.AotBuildError) as info:
        aot.build(str(tmp_path / "libcpu.so"), {"saxpy_launch": K.saxpy_launch}, cpu=cpu)
    msg = str(info.value)
    assert msg.startswith("build(): cpu=%r: %s" % (cpu, why)), msg
    assert "; pass an LLVM CPU name such as 'x86-64', 'x86-64-v2'" in msg
    with pytest.raises(TypeError, match=r"cpu must be an LLVM CPU name .* got int 9"):
        aot.build(str(tmp_path / "libcpu.so"), {"saxpy_launch": K.saxpy_launch}, cpu=9)


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86-64 CPU name")
def test_without_the_cpu_probe_llvm_ends_the_process(tmp_path):
    # The probe is the guard: without it LLVM sees 'no-such-cpu' in this
    # process and ends it.
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import aot_kernels as K\n"
            "from numba_cuda_launch.interop import aot\n"
            "aot._check_cpu = lambda triple, cpu: None\n"
            "aot.build(%r, {'saxpy_launch': K.saxpy_launch}, cpu='no-such-cpu')\n"
            % (HERE, str(tmp_path / "libgen.so")))
    done = subprocess.run([sys.executable, "-c", code], env=child_env(NUMBA_CUDA_LAUNCH_CC="9.0"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "'no-such-cpu' is not a recognized processor" in done.stderr
    assert "LLVM ERROR" in done.stderr


# -- command line ----------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", aot.__name__, *args], cwd=HERE,
                          env=child_env(), capture_output=True, text=True, timeout=300)


def test_command_line(tmp_path):
    out = tmp_path / "libcli.so"
    done = _cli(str(out), "saxpy_c=aot_kernels:saxpy_launch", "--cc", "9.0")
    assert done.returncode == 0, done.stderr
    assert "wrote %s" % out in done.stdout
    assert "saxpy_c" in _run(["nm", "-D", "--defined-only", str(out)])
    assert "int32_t saxpy_c(void *stream" in (tmp_path / "libcli.h").read_text()
    # a build in another process gives the same bytes
    again = _cli(str(tmp_path / "libcli2.so"), "saxpy_c=aot_kernels:saxpy_launch",
                 "--cc", "9.0", "--prefix", "cli")
    assert again.returncode == 0, again.stderr
    assert out.read_bytes() == (tmp_path / "libcli2.so").read_bytes()


@pytest.mark.parametrize("args, message", [
    (["bad-name=aot_kernels:saxpy_launch", "--cc", "9.0"],
     "function 'bad-name' (cfunc saxpy_launch) cannot go in a C library: 'bad-name' is not a "
     "C identifier"),
    (["saxpy_launch=mod:saxpy_launch", "--cc", "9.0"],
     "'mod:saxpy_launch': no module named 'mod' in the current directory (%s) or on the Python "
     "path (modules are imported as `import mod`; run from the folder that has it)" % HERE),
    (["saxpy_launch=aot_kernels:nope", "--cc", "9.0"],
     "'aot_kernels:nope': module 'aot_kernels' has no attribute 'nope'"),
    (["saxpy_launch=aot_kernels", "--cc", "9.0"],
     "'aot_kernels': write MODULE:ATTRIBUTE, e.g. saxpy_launch=mymodule:saxpy_launch"),
    (["saxpy_launch=aot_kernels:saxpy_launch", "--cc", "9"],
     "--cc: '9' is not a compute capability; write it as (9, 0), '9.0'"),
    (["f=aot_kernels:saxpy_launch", "f=aot_kernels:tile_launch", "--cc", "9.0"],
     "'f=aot_kernels:tile_launch': the C name 'f' is given twice; each exported function "
     "needs its own name"),
    (["aot_kernels:saxpy_launch", "--cc", "9.0"],
     "'aot_kernels:saxpy_launch' is a cfunc: export it under a C name, NAME=MODULE:CFUNC (e.g. "
     "saxpy_launch=aot_kernels:saxpy_launch); MODULE:ATTRIBUTE alone names a jax_kernel"),
])
def test_command_line_refusal(tmp_path, args, message):
    done = _cli(str(tmp_path / "libx.so"), *args)
    assert done.returncode == 2
    assert done.stderr.startswith("numba-cuda-launch-aot: %s" % message), done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.skipif(cuda.is_available(), reason="without a GPU, --cc is what is missing")
def test_command_line_without_cc_or_gpu_names_cc(tmp_path):
    env = child_env()
    env.pop("NUMBA_CUDA_LAUNCH_CC", None)
    done = subprocess.run([sys.executable, "-m", aot.__name__, str(tmp_path / "libx.so"),
                           "saxpy_launch=aot_kernels:saxpy_launch"], cwd=HERE, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr == (
        "numba-cuda-launch-aot: importing module 'aot_kernels' failed: its kernels compile for "
        "a GPU, and this machine has no usable GPU and no architecture was given: pass --cc "
        "with the GPUs' compute capability, e.g. --cc 9.0\n")


# -- jax_kernel handlers in the library, registered by a process without Numba ---

JAX_CHILD = r"""
import ctypes, json, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from jax_register import register_library
import jax

lib, names = register_library(sys.argv[1], "ncljax", platform="cpu")
vp, u = ctypes.c_void_p, ctypes.c_uint
launches, keep = [], []

def fn(restype_args, impl):
    f = ctypes.CFUNCTYPE(ctypes.c_int, *restype_args)(impl)
    keep.append(f)
    return ctypes.cast(f, vp).value

def launch(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
    p = ctypes.cast(params, ctypes.POINTER(vp))
    launches.append({"grid": [gx, gy, gz], "block": [bx, by, bz], "shmem": shmem,
                     "a": ctypes.string_at(p[21], 4).hex()})
    return 0

def store(value):
    def impl(out, *rest):
        ctypes.cast(out, ctypes.POINTER(vp))[0] = value
        return 0
    return impl

impls = {"cuInit": ((u,), lambda flags: 0),
         "cuCtxGetCurrent": ((vp,), store(0xC0)),
         "cuLibraryLoadData": ((vp,) * 5 + (u, vp, vp, u), store(0x1000)),
         "cuLibraryGetKernel": ((vp, vp, vp), store(0x2000)),
         "cuLaunchKernel": ((vp,) + (u,) * 7 + (vp, vp, vp), launch)}
name_of = lib.ncljax_driver_entry_name
name_of.restype = ctypes.c_char_p
n = lib.ncljax_driver_entry_count()
table = (vp * n)()
for i in range(n):
    args, impl = impls.get(name_of(i).decode(), ((), lambda: 801))
    table[i] = fn(args, impl)
assert lib.ncljax_bind_driver(table, n) == 0
exported = jax.export.deserialize(open(sys.argv[2], "rb").read())
x = np.arange(1000, dtype=np.float32)
jax.block_until_ready(exported.call(x, x))
print(json.dumps({"numba": [m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite")],
                  "names": names, "launches": launches}))
"""


def test_jax_handler_from_library_without_numba(tmp_path):
    import json

    jax = pytest.importorskip("jax")
    import numba_cuda_launch.interop.jax as J
    from support.childenv import PREAMBLE

    # The CUDA kernel's target is registered for XLA:CPU too (a handler that
    # refuses the call), so a function using it can be exported for the CPU;
    # the child registers the library's real handler there instead.
    k = K.jax_saxpy()
    spec = jax.ShapeDtypeStruct((1000,), np.float32)
    exported = J.export(jax.jit(lambda x, y: k(x, y, a=2.0)), platforms=["cpu"])(spec, spec)
    (tmp_path / "f.jax").write_bytes(exported.serialize())
    lib = aot.build(str(tmp_path / "libncljax.so"), jax_kernels=[k])
    assert lib.ffi_targets == tuple(k.target_names) and lib.functions == ()
    assert k.target_names[0] in _run(["nm", "-D", "--defined-only", lib.path])
    (tmp_path / "again").mkdir()
    again = aot.build(str(tmp_path / "again" / "libncljax.so"), jax_kernels=[k])
    with open(lib.path, "rb") as first, open(again.path, "rb") as second:
        assert first.read() == second.read()  # a handler built twice: the same bytes

    env = child_env(JAX_PLATFORMS="cpu")
    env.pop("PYTHONPATH")  # nothing of this checkout, so nothing imports Numba
    done = subprocess.run(
        [sys.executable, "-c", PREAMBLE + JAX_CHILD,
         lib.path, str(tmp_path / "f.jax"), os.path.join(os.path.dirname(HERE),
                                                         "examples", "clib")],
        env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["numba"] == []
    assert result["names"] == list(k.target_names)
    assert result["launches"] == [{"grid": [4, 1, 1], "block": [256, 1, 1], "shmem": 0,
                                   "a": np.float32(2.0).tobytes().hex()}]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86-64 CPU name")
def test_portable_cpu(tmp_path):
    lib = aot.build(str(tmp_path / "libport.so"), {"saxpy_launch": K.saxpy_launch},
                    cpu="x86-64")
    assert lib.build_info.endswith("CPU x86-64")
    so = ctypes.CDLL(lib.path)
    assert so.port_abi_version() == aot.ABI_VERSION


def test_process_address_refused(tmp_path):
    # A ctypes function pointer is compiled in as an address of this
    # process (a Numba dynamic global): no other process has it.
    labs = ctypes.CDLL(None).labs
    labs.restype, labs.argtypes = ctypes.c_long, [ctypes.c_long]

    @numba.cfunc(nt.int64(nt.int64))
    def absolute(x):
        return labs(x)

    with pytest.raises(aot.AotBuildError) as err:
        aot.build(str(tmp_path / "libaddr.so"), {"absolute": absolute})
    assert "'absolute'" in str(err.value) and "addresses of this process" in str(err.value)
