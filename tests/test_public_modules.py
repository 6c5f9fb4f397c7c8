"""The public modules (numba_cuda_launch.graphs, .jax, .testing, .xla_ffi)
are modules of their own exporting exactly their implementation's public
names, and ``import numba_cuda_launch`` does not import JAX."""

import importlib
import os
import pickle
import subprocess
import sys

import pytest

import numba_cuda_launch
from support.childenv import PREAMBLE, child_env

PUBLIC = {
    "numba_cuda_launch.graphs": "numba_cuda_launch.launch.graph",
    "numba_cuda_launch.jax": "numba_cuda_launch.interop.jax",
    "numba_cuda_launch.testing": "numba_cuda_launch.runtime.recording",
    "numba_cuda_launch.xla_ffi": "numba_cuda_launch.interop.xla_ffi",
}


@pytest.mark.parametrize("public", sorted(PUBLIC))
def test_public_module_exports_its_implementation(public):
    pub, impl = importlib.import_module(public), importlib.import_module(PUBLIC[public])
    assert pub is not impl
    assert pub.__doc__
    assert sorted(pub.__all__) == sorted(impl.__all__)
    for name in pub.__all__:
        assert getattr(pub, name) is getattr(impl, name), name


def test_recording_driver_of_the_public_module_is_the_one_launches_use():
    from numba_cuda_launch.runtime import recording
    from numba_cuda_launch.testing import RecordingDriver

    with RecordingDriver() as rec:
        assert isinstance(rec, recording.RecordingDriver)


def test_a_recorded_launch_pickles_by_its_public_name():
    from numba_cuda_launch.testing import Launch

    fields = {f: 0 for f in Launch.__dataclass_fields__}
    launch = Launch(**fields)
    assert pickle.loads(pickle.dumps(launch)) == launch


def test_the_package_is_typed():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert os.path.exists(os.path.join(root, "numba_cuda_launch", "py.typed"))
    with open(os.path.join(root, "setup.py")) as f:
        assert 'package_data={"numba_cuda_launch": ["py.typed"]}' in f.read()
    hints = numba_cuda_launch.set_compute_capability.__annotations__
    assert hints["return"] is None and "cc" in hints


@pytest.mark.slow
def test_import_of_the_package_does_not_import_jax():
    code = ("import sys, numba_cuda_launch, numba_cuda_launch.graphs, numba_cuda_launch.testing\n"
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))\n")
    out = subprocess.run([sys.executable, "-c", PREAMBLE + code], env=child_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
