"""C libraries built by numba_cuda_launch.aot, on a GPU: the example C
program (examples/clib/main.c) launching through the library checks its
results against a CPU reference computed in C, under compute-sanitizer's
memcheck too; a process without Numba registers jax_kernel handlers from
the library and runs a jax.jit function and a deserialized export."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda

from numba_cuda_launch import aot

import aot_kernels as K
from support.childenv import PREAMBLE, child_env

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert done.returncode == 0, (cmd, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("aotgpu")
    aot.build(str(d / "libsaxpy.so"), {"saxpy_launch": K.saxpy_launch},
              header=str(d / "saxpy.h"))
    exe = str(d / "saxpy")
    _run(["cc", "-O2", "-I", str(d), os.path.join(ROOT, "examples", "clib", "main.c"),
          "-L", str(d), "-lsaxpy", "-Wl,-rpath," + str(d), "-ldl", "-lm", "-o", exe])
    return exe


@pytest.mark.parametrize("n", [1, 255, 1000003])
def test_c_program_matches_cpu_reference(program, n):
    out = _run([program, str(n)])
    assert "saxpy: %d elements, 0 wrong" % n in out


def _sanitizer():
    return shutil.which("compute-sanitizer") or next(
        (p for p in ["/usr/local/cuda/bin/compute-sanitizer"] if os.path.exists(p)), None)


def test_c_program_memcheck_clean(program):
    tool = _sanitizer()
    if tool is None:
        pytest.skip("compute-sanitizer is not installed")
    out = _run([tool, "--tool", "memcheck", "--error-exitcode", "3", program, "4099"])
    assert "ERROR SUMMARY: 0 errors" in out
    assert "saxpy: 4099 elements, 0 wrong" in out


JAX_CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from jax_register import register_library
import jax, jax.numpy as jnp

lib, names = register_library(sys.argv[1], "ncljaxgpu")
exported = jax.export.deserialize(open(sys.argv[2], "rb").read())
rng = np.random.default_rng(11)
x = rng.standard_normal(5000).astype(np.float32)
y = rng.standard_normal(5000).astype(np.float32)
from_export = np.asarray(exported.call(x, y))
attrs = dict(ncl_sharedmem=np.int64(0), ncl_grid_x=np.int64(20), ncl_grid_y=np.int64(1),
             ncl_grid_z=np.int64(1), ncl_block_x=np.int64(256), ncl_block_y=np.int64(1),
             ncl_block_z=np.int64(1), ncl_s_a=np.float32(-3.0))
call = jax.ffi.ffi_call(names[0], jax.ShapeDtypeStruct(x.shape, x.dtype))
from_jit = np.asarray(jax.jit(lambda x, y: call(x, y, **attrs) + 1)(x, y))
print(json.dumps({"numba": [m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite")],
                  "export_err": float(np.max(np.abs(from_export - (2 * x + y)))),
                  "jit_err": float(np.max(np.abs(from_jit - (-3 * x + y + 1))))}))
"""


def test_jax_handlers_from_library_without_numba(tmp_path):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU backend here")
    import numba_cuda_launch.interop.jax as J

    k = K.jax_saxpy()
    spec = jax.ShapeDtypeStruct((5000,), np.float32)
    exported = J.export(jax.jit(lambda x, y: k(x, y, a=2.0)), platforms=["cuda"])(spec, spec)
    (tmp_path / "f.jax").write_bytes(exported.serialize())
    lib = aot.build(str(tmp_path / "libncljaxgpu.so"), jax_kernels=[k])
    env = child_env()
    env.pop("PYTHONPATH")
    out = _run([sys.executable, "-c", PREAMBLE + JAX_CHILD, lib.path, str(tmp_path / "f.jax"),
                os.path.join(ROOT, "examples", "clib")], env=env)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["numba"] == []
    assert result["export_err"] < 1e-5 and result["jit_err"] < 1e-5
