"""The C functions every ``jax_kernel`` handler calls by symbol
(``jax_handler.shared_functions``, docs/jax.md, "How the handler is built"):
their machine code kept in the handler cache and loaded by a later process,
and a damaged file or an unwritable directory a miss (compiled again),
never a crash or wrong code."""

import ctypes
import os

import numba
import pytest

jax = pytest.importorskip("jax")

from numba.core.compiler_lock import global_compiler_lock  # noqa: E402
from numba.core.registry import cpu_target  # noqa: E402

from numba_cuda_launch.interop import handler_cache, jax_handler  # noqa: E402

_ERROR_CREATE = 48  # XLA_FFI_Api: the offset of XLA_FFI_Error_Create
_FRAME_API = 16  # XLA_FFI_CallFrame: the offset of api
_MESSAGE = 16  # XLA_FFI_Error_Create_Args: the offset of message
_CODE = 24  # ... and of the error code
_CONFIG_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 7,
                                 ctypes.c_char_p, ctypes.c_char_p)


def _library(builds):
    """The shared functions' library through the cache; *builds* counts compiles."""
    context = cpu_target.target_context
    codegen = context.codegen()

    def build():
        builds.append(1)
        library = codegen.create_library("test_shared")
        library.enable_object_caching()
        library.add_ir_module(jax_handler._checks_module(context, library))
        library.finalize()
        return library
    with global_compiler_lock:
        return handler_cache.shared_library(codegen, build)


def _recording_frame():
    """``(frame, errors)``: a call frame (no extension: an execute call)
    whose API table's error creation appends ``(message, code)`` to
    *errors* and returns 1234; the objects are kept alive with the frame."""
    errors = []

    @ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    def error_create(args):
        errors.append((ctypes.string_at(ctypes.c_void_p.from_address(args + _MESSAGE).value),
                       ctypes.c_int32.from_address(args + _CODE).value))
        return 1234

    api = (ctypes.c_uint8 * 256)()
    ctypes.c_void_p.from_address(ctypes.addressof(api) + _ERROR_CREATE).value = \
        ctypes.cast(error_create, ctypes.c_void_p).value
    frame = (ctypes.c_uint8 * 256)()
    ctypes.c_void_p.from_address(ctypes.addressof(frame) + _FRAME_API).value = \
        ctypes.addressof(api)
    frame._keep = (api, error_create)  # type: ignore[attr-defined]
    return frame, errors


def _config_message(library, grid, block, sharedmem):
    """The message the library's configuration error gives XLA."""
    frame, errors = _recording_frame()
    fn = _CONFIG_ERROR(library.get_pointer_to_function("numba_cuda_launch_jax_config_error"))
    assert fn(ctypes.addressof(frame), *grid, *block, sharedmem, b"the rule", b"k") == 1234
    return errors[0][0].decode()


# what the launch configuration's check says (launchconfig.LIMITS), written out
_GRID = "k: griddim must be 1..2**31-1 in x and 1..65535 in y and z, got (0, 1, 1) (from the rule)"
_BLOCK = ("k: blockdim must be 1..1024 in x and y and 1..64 in z with at most 1024 threads in "
          "all, got (64, 64, 1) (from the rule)")


def _check(library):
    assert _config_message(library, (0, 1, 1), (32, 1, 1), 0) == _GRID
    assert _config_message(library, (1, 1, 1), (64, 64, 1), 0) == _BLOCK


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(handler_cache.ENV_VAR, "1")
    return tmp_path / "cache" / "numba_cuda_launch" / "jax"


def test_saved_then_loaded(cache):
    builds = []
    _check(_library(builds))
    assert builds == [1] and any(p.suffix == ".nbc" for p in cache.iterdir())
    _check(_library(builds))
    assert builds == [1]  # loaded


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty index"])
def test_damaged_file_is_compiled_again(cache, damage):
    builds = []
    _library(builds)
    for path in cache.iterdir():
        if damage == "truncate" and path.suffix == ".nbc":
            path.write_bytes(path.read_bytes()[:100])
        elif damage == "garbage" and path.suffix == ".nbc":
            path.write_bytes(os.urandom(4096))
        elif damage == "empty index" and path.suffix == ".nbi":
            path.write_bytes(b"")
    _check(_library(builds))
    assert builds == [1, 1]


def test_unwritable_directory_compiles(cache):
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the directory goes")
    builds = []
    _check(_library(builds))
    _check(_library(builds))
    assert builds == [1, 1]


def test_cache_turned_off_compiles(cache, monkeypatch):
    monkeypatch.setenv(handler_cache.ENV_VAR, "0")
    builds = []
    _library(builds)
    _check(_library(builds))
    assert builds == [1, 1] and not cache.exists()


def test_refusing_handler_says_why_with_unimplemented():
    # what XLA:CPU gets for a CUDA kernel's target: made once per message
    frame, errors = _recording_frame()
    refusal = jax_handler.refusal("kern_x", False)
    assert refusal.ctypes(ctypes.addressof(frame)) == 1234
    assert errors == [(b"numba_cuda_launch: jax_kernel of CUDA kernel 'kern_x' was called on "
                         b"XLA:CPU; its handlers run on CUDA GPUs only. To run it on the CPU, in "
                         b"numba-cuda's CUDA simulator, set NUMBA_ENABLE_CUDASIM=1 before numba "
                         b"is imported (docs/jax.md)", 12)]  # 12: UNIMPLEMENTED
    assert jax_handler.refusal("kern_x", False) is refusal
    # the simulator's refusal says the same for every compiler: one handler
    assert jax_handler.refusal("kern_x", True) is \
        jax_handler.refusal("kern_x", True, "numba-cuda-mlir")
    assert jax_handler.refusal("kern_y", False).address != refusal.address
