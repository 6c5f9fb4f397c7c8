"""Helpers of the test suite (one package, imported as ``support``: tests/
is on the path of every test run, through its conftest.py).

``HAVE_GPU``, ``SIMULATED``, ``HAVE_NUMBA_CUDA`` and :func:`has_libcuda` say what
the run targets (:func:`needs_numba_cuda` skips a module without numba-cuda), :func:`package_source`
where the package's sources are; the modules hold
kernels (:mod:`.kernels`, :mod:`.cluster_kernels`,
:mod:`.jax_export_kernels`), child-process environments (:mod:`.childenv`),
fake XLA call frames (:mod:`.ffi_frames`), leak measurements
(:mod:`.leaks`), message helpers (:mod:`.messages`), a recording driver
counting the shared-memory opt-in's cold path (:mod:`.cold_path`) and a
fixture ending recordings a GPU test left open (:mod:`.recordings`).
"""

import ctypes
import os

import pytest

from numba_cuda_launch.compat.cuda_target import gpu_available
from numba_cuda_launch.compat.versions import has_numba_cuda

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
HAVE_GPU = gpu_available() and not SIMULATED
#: numba-cuda is installed (the numba-cuda-mlir-only combination has none).
HAVE_NUMBA_CUDA = has_numba_cuda()


def has_libcuda() -> bool:
    """Whether the CUDA driver library loads here (a GPU need not be present)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def needs_numba_cuda():
    """At the top of a test module using numba-cuda (before it imports
    ``numba.cuda``): skip the module, saying so, where it is not installed
    (``numba.cuda`` would be Numba's deprecated built-in target)."""
    if not HAVE_NUMBA_CUDA:
        pytest.skip("needs numba-cuda, which is not installed (a numba-cuda-mlir-only "
                    "installation)", allow_module_level=True)
#: The checkout (or copy) holding tests/.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def package_source():
    """The directory of numba_cuda_launch's source files: the checkout's,
    else (tests copied beside an installed package, as ci/check_package.sh
    runs them) the installed package's."""
    here = os.path.join(ROOT, "numba_cuda_launch")
    if os.path.isdir(here):
        return here
    import numba_cuda_launch

    return os.path.dirname(numba_cuda_launch.__file__)
