"""Runs tests/sim (launches from compiled code executing real kernels in
numba-cuda's CUDA simulator) in a process with NUMBA_ENABLE_CUDASIM=1."""

import os
import subprocess
import sys

import pytest

from support import needs_numba_cuda
from support.childenv import child_env

needs_numba_cuda()  # the simulator is numba-cuda's

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
def test_launches_under_the_cuda_simulator():
    env = child_env(NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         os.path.join(HERE, "sim")],
        env=env, capture_output=True, text=True, timeout=900, cwd=HERE)
    print(out.stdout[-4000:])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and "failed" not in out.stdout
