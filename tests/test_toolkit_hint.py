"""A missing CUDA compiler library (NVVM, NVRTC, nvJitLink: what the
``[cu12]``/``[cu13]`` extras install) is reported with the extra to install,
where a kernel first compiles: an eager ``cuda.jit(sig)`` at decoration, a
lazy kernel when the launching CPU function compiles."""

import subprocess
import sys
import textwrap

import pytest

from support.childenv import PREAMBLE, child_env
from numba_cuda_launch.compat.numba_cuda import with_toolkit_hint

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


@pytest.mark.parametrize("body", [_EAGER, _LAZY], ids=["eager", "lazy"])
def test_missing_compiler_library_names_the_extra(body):
    err = _run(body)
    # numba-cuda's own message, kept (releases load NVVM or NVRTC first)
    assert 'Failure finding "libnvvm.so"' in err or 'Failure finding "libnvrtc.so"' in err
    assert 'pip install "numba-cuda-launch[cu13]"' in err and "[cu12]" in err


def test_other_errors_are_left_alone():
    assert with_toolkit_hint(RuntimeError("CUDA driver library cannot be found")) is None
    assert with_toolkit_hint(ValueError("nvvm: invalid option -opt=4")) is None


def test_hint_added_once():
    once = with_toolkit_hint(RuntimeError('Failure finding "libnvrtc.so"'))
    assert "numba-cuda-launch[cu13]" in str(once)
    assert with_toolkit_hint(once) is None
