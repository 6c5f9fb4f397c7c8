"""jax_kernel handlers cached across processes (docs/jax.md, "The handler
cache"), and Numba's own cache (``cache=True``) falling back to compiling
when its files cannot be read or written: never a crash, never a wrong
launch. Tests starting child processes are marked ``slow``."""

import importlib.util
import os
import subprocess
import sys
import textwrap
import types

import numba
import numpy as np
import pytest
from numba import types as nt

from support import HAVE_NUMBA_CUDA
from support.childenv import PREAMBLE, SAXPY_VARIANTS, child_env

# the children launch numba-cuda kernels
NEEDS_NUMBA_CUDA = pytest.mark.skipif(not HAVE_NUMBA_CUDA,
                                      reason="needs numba-cuda, which is not installed")

jax = pytest.importorskip("jax")

from numba_cuda_launch import as_voidptr  # noqa: E402
from numba_cuda_launch.compat.numba_caching import KeyedCache  # noqa: E402
from numba_cuda_launch.compat.numba_cfunc import cached_cfunc, cfunc_code  # noqa: E402
from numba_cuda_launch.interop import handler_cache  # noqa: E402
from numba_cuda_launch.launch import caching  # noqa: E402

rng = np.random.default_rng()
SIG = nt.int64(nt.int64)


def _twice_plus(x):
    return 2 * x + 7


def _compiled(cache):
    cf = cached_cfunc(SIG, _twice_plus, cache)
    assert cf.ctypes(20) == 47
    return cf


def _files(directory, suffix):
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(suffix))


# -- the keyed cache ------------------------------------------------------------

def test_keyed_cache_saves_then_loads(tmp_path):
    assert _compiled(KeyedCache(str(tmp_path), "f", ("one",))).cache_hits == 0
    assert _compiled(KeyedCache(str(tmp_path), "f", ("one",))).cache_hits == 1
    # another key: compiled, saved beside the first
    assert _compiled(KeyedCache(str(tmp_path), "f", ("two",))).cache_hits == 0
    assert len(_files(tmp_path, ".nbi")) == 2


def test_code_loaded_from_the_cache_builds_into_a_c_library(tmp_path):
    # a jax_kernel handler loaded in a new process is such a cfunc: aot.build
    # compiles it again, as the cache keeps machine code only
    import ctypes

    from numba_cuda_launch import aot

    _compiled(KeyedCache(str(tmp_path / "cache"), "f", ("one",)))
    loaded = _compiled(KeyedCache(str(tmp_path / "cache"), "f", ("one",)))
    assert loaded.cache_hits == 1
    # compiled again once: one symbol, so a second export of it is refused as such
    assert cfunc_code(loaded).symbol == cfunc_code(loaded).symbol
    with pytest.raises(aot.AotBuildError, match="already exported"):
        aot.build(str(tmp_path / "libtwice.so"), {"twice_plus": loaded, "again": loaded})
    lib = aot.build(str(tmp_path / "libloaded.so"), {"twice_plus": loaded})
    so = ctypes.CDLL(lib.path)
    so.twice_plus.restype, so.twice_plus.argtypes = ctypes.c_int64, [ctypes.c_int64]
    x = int(rng.integers(-10**6, 10**6))
    assert so.twice_plus(x) == 2 * x + 7


@pytest.mark.parametrize("damage", ["garbage index", "truncated index", "truncated data",
                                    "changed data", "garbage data", "empty data"])
def test_damaged_cache_files_are_a_miss(tmp_path, damage):
    _compiled(KeyedCache(str(tmp_path), "f", ("k",)))
    (index,), (data,) = _files(tmp_path, ".nbi"), _files(tmp_path, ".nbc")
    path = index if "index" in damage else data
    blob = open(path, "rb").read()
    blob = {"garbage": os.urandom(len(blob)), "truncated": blob[:len(blob) // 2],
            "changed": blob[:-9] + bytes([blob[-9] ^ 0xFF]) + blob[-8:],
            "empty": b""}[damage.split()[0]]
    with open(path, "wb") as f:
        f.write(blob)
    assert _compiled(KeyedCache(str(tmp_path), "f", ("k",))).cache_hits == 0
    # ... and the entry compiled again replaces the damaged one
    assert _compiled(KeyedCache(str(tmp_path), "f", ("k",))).cache_hits == 1


def test_unwritable_cache_directory_compiles(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for _ in range(2):  # the directory can be neither made nor written
        assert _compiled(KeyedCache(str(blocker / "cache"), "f", ("k",))).cache_hits == 0


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="needs a user that file modes apply to")
def test_read_only_cache_directory_compiles(tmp_path):
    tmp_path.chmod(0o500)
    try:
        assert _compiled(KeyedCache(str(tmp_path / "c"), "f", ("k",))).cache_hits == 0
    finally:
        tmp_path.chmod(0o700)


def test_cache_directory_removed_while_running(tmp_path):
    import shutil

    directory = str(tmp_path / "c")
    cache = KeyedCache(directory, "f", ("k",))
    shutil.rmtree(str(tmp_path))
    assert _compiled(cache).cache_hits == 0  # made again, and written
    assert _compiled(KeyedCache(directory, "f", ("k",))).cache_hits == 1
    shutil.rmtree(directory)
    assert _compiled(KeyedCache(directory, "f", ("k",))).cache_hits == 0


def test_entry_of_another_key_in_the_same_files_is_refused(tmp_path):
    # a data file holding another key's code (as a race between processes
    # could leave it) is never loaded under this key
    _compiled(KeyedCache(str(tmp_path), "f", ("a",)))
    _compiled(KeyedCache(str(tmp_path), "f", ("b",)))
    a, b = (KeyedCache(str(tmp_path), "f", (k,)) for k in "ab")
    data_a, data_b = ([p for p in _files(tmp_path, ".nbc") if c.key[:24] in p] for c in (a, b))
    os.replace(data_b[0], data_a[0])
    assert _compiled(a).cache_hits == 0


# -- what a key is made of ----------------------------------------------------------

_SCALE = 256


@numba.njit
def _rule(n):
    return (n + _SCALE - 1) // _SCALE, _SCALE


@numba.njit
def _calls_rule(n):
    return _rule(n)


_HELD = [1, 2]
_SETTINGS = types.ModuleType("ncl_test_settings")
_SETTINGS.BLOCK = 64


@numba.njit
def _reads_a_module(n):
    return (n + _SETTINGS.BLOCK - 1) // _SETTINGS.BLOCK, _SETTINGS.BLOCK


@numba.njit
def _reads_a_list(n):
    return len(_HELD), n


def test_rule_digest_follows_code_and_globals(monkeypatch):
    first = handler_cache.rule_digest(_rule)
    assert first is not None and first == handler_cache.rule_digest(_rule)
    calls = handler_cache.rule_digest(_calls_rule)
    monkeypatch.setitem(globals(), "_SCALE", 128)
    assert handler_cache.rule_digest(_rule) != first
    assert handler_cache.rule_digest(_calls_rule) != calls  # a called rule's globals too
    assert handler_cache.rule_digest(_reads_a_list) is None  # not keyable: not cached
    through_module = handler_cache.rule_digest(_reads_a_module)
    monkeypatch.setattr(_SETTINGS, "BLOCK", 128)
    assert handler_cache.rule_digest(_reads_a_module) not in (None, through_module)


def test_cache_dir_honours_numba_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    assert handler_cache.cache_dir() == os.path.join(str(tmp_path), "numba_cuda_launch", "jax")
    os.makedirs(handler_cache.cache_dir())
    handler_cache.clear_cache()
    assert not os.path.exists(handler_cache.cache_dir())


@NEEDS_NUMBA_CUDA
def test_cache_can_be_turned_off(monkeypatch):
    from numba_cuda_launch.jax import jax_kernel
    from support.kernels import add_one

    monkeypatch.setenv(handler_cache.ENV_VAR, "0")
    assert not handler_cache.enabled()
    assert handler_cache.handler_cache("t", [], None, ()) is None
    monkeypatch.setenv(handler_cache.ENV_VAR, "1")
    assert handler_cache.enabled()
    with pytest.raises(TypeError, match="cache must be True or False"):
        jax_kernel(add_one, lambda x: x, (1, 32), cache="yes")


@NEEDS_NUMBA_CUDA
def test_another_build_of_the_package_is_a_miss(tmp_path, monkeypatch):
    """A cached launcher carries the package build's check: loaded by
    another build it is compiled again (the handler key holds the build
    too)."""
    from support.kernels import add_one  # noqa: F401

    from numba_cuda_launch.testing import RecordingDriver

    def launch(p, n):
        x = numba.carray(as_voidptr(p), (n,), np.float32)
        return add_one[1, 32].launch_status(x)

    sig = nt.int32(nt.int64, nt.int64)
    with RecordingDriver():
        cached_cfunc(sig, launch, KeyedCache(str(tmp_path), "g", ("g",)))
        assert cached_cfunc(sig, launch, KeyedCache(str(tmp_path), "g", ("g",))).cache_hits == 1
        monkeypatch.setattr(caching, "package_build", lambda: "another build")
        assert cached_cfunc(sig, launch, KeyedCache(str(tmp_path), "g", ("g",))).cache_hits == 0


# -- Numba's own cache (cache=True) ---------------------------------------------------

_MODULE = '''
import numba

@numba.njit(cache=True)
def triple(x):
    return 3 * x + 1
'''


def _load_module(path, n):
    spec = importlib.util.spec_from_file_location("ncl_cached_module_%d" % n, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("damage", ["garbage index", "truncated index", "truncated data",
                                    "garbage data"])
def test_numba_cache_with_damaged_files_compiles(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "cached_module.py"
    source.write_text(_MODULE)
    assert _load_module(source, 0).triple(4) == 13
    cache = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "cache") for f in fs]
    (path,) = [p for p in cache if p.endswith(".nbi" if "index" in damage else ".nbc")]
    blob = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(os.urandom(len(blob)) if damage.startswith("garbage") else blob[:len(blob) // 2])
    module = _load_module(source, 1)
    assert module.triple(5) == 16
    assert sum(module.triple.stats.cache_hits.values()) == 0  # compiled, and written again
    module = _load_module(source, 2)
    assert module.triple(6) == 19
    assert sum(module.triple.stats.cache_hits.values()) == 1


def test_numba_cache_directory_removed_or_unwritable(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "cached_module.py"
    source.write_text(_MODULE)
    module = _load_module(source, 10)
    shutil.rmtree(str(tmp_path / "cache"), ignore_errors=True)
    assert module.triple(2) == 7  # the directory is made again
    shutil.rmtree(str(tmp_path / "cache"))
    (tmp_path / "cache").write_text("a file where the directory was")
    assert _load_module(source, 11).triple(3) == 10  # cannot be written: compiled


# -- handlers in new processes (slow) ---------------------------------------------------

_CHILD = PREAMBLE + textwrap.dedent('''
    import sys, ctypes
    import numpy as np
    import numba
    from numba import cuda
    import numba_cuda_launch as ncl
    ncl.set_compute_capability((9, 0))
    import jax
    from numba_cuda_launch.jax import jax_kernel
    from numba_cuda_launch.testing import RecordingDriver
    sys.path.insert(0, sys.argv[2])
    from support.ffi_frames import FakeXla, Frame

    variant = sys.argv[1]
    SIGN = -1 if variant == "changed" else 1
''') + SAXPY_VARIANTS + textwrap.dedent('''
    @numba.njit
    def rule(xs, ys, a):
        return (xs[-1] + 127) // 128, 128

    k = saxpy_variant(variant, rule, lambda x, y, a: (8, 128))
    dtype = np.dtype(sys.argv[4])
    spec = jax.ShapeDtypeStruct((1000,), dtype)
    handler = k.handler([spec, spec], [spec])
    a = np.float32(float(sys.argv[3]))
    attrs = {"ncl_sharedmem": np.int64(0), "ncl_s_a": a}
    if variant != "batch-aware":
        attrs.update({"ncl_grid_x": np.int64(8), "ncl_block_x": np.int64(128)})
    xla = FakeXla(stream=0xABCD)
    frame = Frame(xla, args=[(0x1000, (1000,), dtype), (0x2000, (1000,), dtype)],
                  rets=[(0x3000, (1000,), dtype)], attrs=attrs)
    with RecordingDriver() as rec:
        err = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler.address)(frame.address)
    (launch,) = rec.launches
    params = [int.from_bytes(p, "little") for p in launch.params]
    # the image loaded is this process's overload's (this SIGN, this dtype)
    from numba_cuda_launch.launch.plan import plan_launch
    image = plan_launch(saxpy, k._argtypes([spec, spec], [spec])).image.data
    print("image", [ctypes.string_at(i, len(image)) == image for i in rec.loads],
          "itemsize", params[3], params[6])
    print("hits", handler.cache_hits, "err", err, "errors", xla.errors)
    print("launch", launch.grid, launch.block, launch.stream, params[4], params[11], params[18],
          launch.params[-1] == a.tobytes(), launch.kernel_name if hasattr(launch, "kernel_name")
          else "")
''')


def _child(tmp_path, variant, env=None, a=None, dtype="float32"):
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    here = os.path.dirname(os.path.abspath(__file__))
    a = float(rng.standard_normal()) if a is None else a
    return subprocess.Popen(
        [sys.executable, str(script), variant, here, repr(a), dtype],
        env=env or child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(tmp_path))


def _result(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return int(lines["hits"].split()[0]), lines


def _expect_launch(lines, stream=0xABCD, itemsize=4):
    launch = lines["launch"]
    assert launch.startswith("(8, 1, 1) (128, 1, 1) %d 4096 8192 12288 True" % stream), launch
    assert "errors []" in lines["hits"]
    # one image loaded, this process's overload's; x's item size and stride
    assert lines["image"] == "[True] itemsize %d %d" % (itemsize, itemsize), lines["image"]


@NEEDS_NUMBA_CUDA
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "batch-aware", "dependent"])
def test_handler_loaded_in_a_new_process_launches_the_same(tmp_path, variant):
    first, lines = _result(_child(tmp_path, variant))
    assert first == 0
    _expect_launch(lines)
    second, lines = _result(_child(tmp_path, variant))
    assert second == 1
    _expect_launch(lines)


@NEEDS_NUMBA_CUDA
@pytest.mark.slow
def test_changed_kernel_source_launches_its_new_image(tmp_path):
    # the handler body holds no image: the edited kernel's process loads the
    # body and launches the image of its own compile (never the cached one's)
    assert _result(_child(tmp_path, "plain"))[0] == 0
    hits, lines = _result(_child(tmp_path, "changed"))
    assert hits == 1
    _expect_launch(lines)
    hits, lines = _result(_child(tmp_path, "plain"))
    assert hits == 1
    _expect_launch(lines)


@NEEDS_NUMBA_CUDA
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "batch-aware"])
def test_another_dtype_in_a_new_process_loads_the_layouts_body(tmp_path, variant):
    # float32 cached by one process; float64, first in the next, loads that
    # body and launches the float64 overload with 8-byte items
    assert _result(_child(tmp_path, variant))[0] == 0
    hits, lines = _result(_child(tmp_path, variant, dtype="float64"))
    assert hits == 1
    _expect_launch(lines, itemsize=8)


@NEEDS_NUMBA_CUDA
@pytest.mark.slow
def test_two_processes_writing_the_same_entry(tmp_path):
    procs = [_child(tmp_path, "plain") for _ in range(2)]
    for proc in procs:
        hits, lines = _result(proc)
        _expect_launch(lines)
    hits, lines = _result(_child(tmp_path, "plain"))
    assert hits == 1
    _expect_launch(lines)


@NEEDS_NUMBA_CUDA
@pytest.mark.slow
def test_cache_written_by_another_package_build_is_not_loaded(tmp_path):
    assert _result(_child(tmp_path, "plain"))[0] == 0
    # the same entry, as a build whose sources differ would key it: the key
    # holds the build's digest, so nothing written before matches
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    script = tmp_path / "child_other_build.py"
    script.write_text("from numba_cuda_launch.launch import caching\n"
                      "caching.package_build = lambda: 'another build'\n"
                      "import runpy, sys\n"
                      "sys.argv = sys.argv[1:]\n"
                      "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "child.py"), "plain",
                             here, "1.5", "float32"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(tmp_path))
    hits, lines = _result(proc)
    assert hits == 0
    _expect_launch(lines)


_SIM_CHILD = PREAMBLE + textwrap.dedent('''
    import sys
    import numpy as np
    import jax, jax.numpy as jnp
    from numba import cuda
    from numba_cuda_launch.jax import jax_kernel
    jax.config.update("jax_default_device", jax.devices("cpu")[0])
    SIGN = 1
''') + SAXPY_VARIANTS + textwrap.dedent('''
    k = saxpy_variant("plain", None, lambda x, y, a: ((x.shape[0] + 31) // 32, 32))
    rng = np.random.default_rng()
    x, y = (rng.standard_normal(100).astype(np.float32) for _ in range(2))
    a = np.float32(rng.standard_normal())
    got = np.asarray(jax.jit(lambda x, y: k(x, y, a=a))(x, y))
    np.testing.assert_allclose(got, a * x + y, rtol=1e-6)
    spec = jax.ShapeDtypeStruct((100,), np.float32)
    print("hits", k.handler([spec, spec], [spec]).cache_hits)
''')


@NEEDS_NUMBA_CUDA
@pytest.mark.slow
def test_simulated_handler_loaded_in_a_new_process(tmp_path):
    script = tmp_path / "sim_child.py"
    script.write_text(_SIM_CHILD)
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"), NUMBA_ENABLE_CUDASIM="1",
                    JAX_PLATFORMS="cpu")
    for expected in (0, 1):
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=600, cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split()[-2:] == ["hits", str(expected)], done.stdout




_SITE_CHILD = PREAMBLE + textwrap.dedent('''
    import os, shutil, sys
    import numpy as np
    import numba
    import numba_cuda_launch as ncl
    ncl.set_compute_capability((9, 0))
    from numba_cuda_launch.testing import RecordingDriver
    import cachemod
    a = np.zeros(8, np.float32)
    with RecordingDriver() as rec:
        status = cachemod.run(a.ctypes.data, 8)
        if sys.argv[1] == "remove":  # the directory removed while the process runs
            shutil.rmtree(os.environ["NUMBA_CACHE_DIR"])

            @numba.njit(cache=True)
            def other(p, n):
                return cachemod.run(p, n)
            status += other(a.ctypes.data, 8)
    (launch,) = rec.launches[:1]
    print(status, len(rec.launches), launch.grid, launch.block,
          sum(cachemod.run.stats.cache_hits.values()))
''')


@NEEDS_NUMBA_CUDA
@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage index", "truncated data", "remove"])
def test_cached_launch_site_falls_back_to_compiling(tmp_path, damage):
    from support.childenv import CACHED_LAUNCHER

    (tmp_path / "cachemod.py").write_text(CACHED_LAUNCHER)
    script = tmp_path / "site_child.py"
    script.write_text(_SITE_CHILD)
    cache = tmp_path / "cache"

    def run(mode="plain"):
        done = subprocess.run([sys.executable, str(script), mode], capture_output=True,
                              text=True, timeout=600, cwd=str(tmp_path),
                              env=child_env(NUMBA_CACHE_DIR=str(cache)))
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.split()

    assert run()[-1] == "0"
    if damage == "remove":
        out = run("remove")
        assert out[:2] == ["0", "2"] and out[-1] == "1", out
        assert run()[-1] == "0"  # the cache went with the directory: compiled again
        return
    files = [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs
             if f.startswith("cachemod.run")]
    (path,) = [f for f in files if f.endswith(".nbi" if "index" in damage else ".nbc")]
    blob = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(os.urandom(len(blob)) if damage.startswith("garbage") else blob[:len(blob) // 2])
    out = run()
    assert out[:2] == ["0", "1"] and out[-1] == "0", out  # compiled, launched once
    assert " ".join(out[2:8]) == "(1, 1, 1) (32, 1, 1)", out
    assert run()[-1] == "1"  # written again
