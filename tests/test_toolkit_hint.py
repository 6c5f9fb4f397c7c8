"""A missing CUDA compiler library (NVVM, NVRTC, nvJitLink: what the
``[cu12]``/``[cu13]`` extras install) is reported with the extra to install,
where a kernel first compiles: an eager ``cuda.jit(sig)`` at decoration, a
lazy kernel when the launching CPU function compiles."""

import subprocess
import sys
import textwrap

import pytest

from support import needs_numba_cuda
from support.childenv import PREAMBLE, child_env

needs_numba_cuda()  # the children compile numba-cuda kernels
from numba_cuda_launch.compat.cuda_target import (TOOLKIT_MISSING, compile_failure_cause,
                                                 with_toolkit_hint)

# A child process whose library search finds no compiler library, as after
# `pip install numba-cuda-launch` without an extra.
_NO_TOOLKIT = PREAMBLE + textwrap.dedent('''
    import cuda.pathfinder as pf
    found = pf.load_nvidia_dynamic_lib
    def load(name, *args, **kwargs):
        if name in ("nvvm", "nvrtc", "nvJitLink"):
            raise pf.DynamicLibNotFoundError('Failure finding "lib%s.so"' % name)
        return found(name, *args, **kwargs)
    pf.load_nvidia_dynamic_lib = load
    import numba, numpy as np
    from numba import cuda
    import numba_cuda_launch as ncl
    ncl.set_compute_capability((9, 0))
''')

_EAGER = '''
@cuda.jit("void(float32[::1])")
def eager(x):
    x[0] = 1
'''

_LAZY = '''
@cuda.jit
def lazy(x):
    x[0] = 1

@numba.njit
def launch(p):
    lazy[1, 1](numba.carray(ncl.as_voidptr(p), (1,), np.float32))

launch(0x7F0000000000)
'''


def _run(body):
    out = subprocess.run([sys.executable, "-c", _NO_TOOLKIT + body], env=child_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0, out.stdout
    return out.stderr


_LOADED_FIRST = "cuda.pathfinder._dynamic_libs.load_dl_common.DynamicLibNotFoundError: "


# As on a GPU machine: numba-cuda's availability check loads NVVM, asked
# when the first launch site is typed (for the architecture to build for).
_AVAILABILITY_LOADS = '''
import numba.cuda
def is_available():
    pf.load_nvidia_dynamic_lib("nvvm")
numba.cuda.is_available = is_available
'''

_LAZY_FIRST = ("numba.core.errors.TypingError: compiling kernel 'lazy' for (x: array(float32, "
               "1d, C)) failed: ")


@pytest.mark.parametrize("body, first", [
    (_EAGER, _LOADED_FIRST), (_LAZY, _LAZY_FIRST),
    (_AVAILABILITY_LOADS + _LAZY, _LAZY_FIRST)],
    ids=["eager", "lazy", "lazy, availability check loads NVVM"])
def test_missing_compiler_library_names_the_extra_first_and_once(body, first):
    err = _run(body)
    # the error's first line says what to install, once, with no chained
    # traceback repeating it (there were two, 92 lines, the hint last)
    error_line = next(line for line in err.splitlines() if TOOLKIT_MISSING in line)
    assert error_line == first + TOOLKIT_MISSING, err
    assert err.count("numba-cuda-launch[cu13]") == 1
    assert "The above exception was the direct cause" not in err
    assert err.count("Traceback (most recent call last)") == 1
    assert len(err.splitlines()) < 40, err
    # numba-cuda's own message, kept (releases load NVVM or NVRTC first)
    assert 'Failure finding "libnvvm.so"' in err or 'Failure finding "libnvrtc.so"' in err
    assert TOOLKIT_MISSING == (
        'the CUDA compiler libraries (NVVM, NVRTC, nvJitLink) were not found: install them '
        'with the package\'s extra, pip install "numba-cuda-launch[cu13]", or [cu12] for a '
        'CUDA 12 driver')


def test_other_errors_are_left_alone():
    assert with_toolkit_hint(RuntimeError("CUDA driver library cannot be found")) is None
    assert with_toolkit_hint(ValueError("nvvm: invalid option -opt=4")) is None


def test_hint_added_once_and_first():
    once = with_toolkit_hint(RuntimeError('Failure finding "libnvrtc.so"'))
    assert str(once) == TOOLKIT_MISSING + '\nFailure finding "libnvrtc.so"'
    assert with_toolkit_hint(once) is None
    assert compile_failure_cause(once) == (TOOLKIT_MISSING, 'Failure finding "libnvrtc.so"')
