"""TVM-FFI functions exported by ``aot.build(..., tvm_ffi_functions=...)``: the
library loads with ``tvm_ffi.load_module`` in a process with no Numba and no
numba_cuda_launch, its function checks its arguments there as in this process,
and reaches the driver (none here: CUDA_ERROR_NO_DEVICE, raised as a TVM-FFI
error); what cannot be exported is refused."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from numba.core import types as nt

from support import has_libcuda, needs_numba_cuda

needs_numba_cuda()
pytest.importorskip("tvm_ffi")

from numba_cuda_launch import aot  # noqa: E402
from numba_cuda_launch import tvm_ffi as ntf  # noqa: E402
from support.kernels import axpy, axpy_blocks  # noqa: E402
from support.childenv import child_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    k = ntf.tvm_ffi_kernel(axpy, axpy_blocks, arrays=[(np.float32, 1)] * 3,
                           scalars={"a": np.float32})
    d = tmp_path_factory.mktemp("tvmffi")
    return aot.build(str(d / "libtvmaxpy.so"), tvm_ffi_functions={"axpy": k})


CHILD = r"""
import importlib.util, sys
import numpy as np
import tvm_ffi
spec = importlib.util.spec_from_file_location("tvm_tensors", sys.argv[2])
tt = importlib.util.module_from_spec(spec); spec.loader.exec_module(tt)
f = tvm_ffi.load_module(sys.argv[1]).axpy
x = np.ones(10, np.float32)
for args in [(x, x, x, 1.0), (tt.cuda_tensor(x),) * 3 + (1e39,), (1,),
             (tt.cuda_tensor(x),) * 3 + (2.0,)]:
    try:
        f(*args)
        print("ok")
    except Exception as e:
        print(type(e).__name__, e)
print("numba_cuda_launch" in sys.modules, "numba" in sys.modules)
"""


def test_loads_and_checks_in_a_process_without_numba(library):
    assert library.tvm_ffi_functions == ("axpy",) and library.functions == ()
    out = subprocess.run([sys.executable, "-c", CHILD, library.path,
                          os.path.join(HERE, "support", "tvm_tensors.py")],
                         env=child_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("TypeError numba_cuda_launch: CUDA kernel 'axpy': parameter "
                               "'x' (argument 0) is in host (CPU) memory")
    assert lines[1].startswith("ValueError") and "scalar 'a' (argument 3)" in lines[1]
    assert lines[2] == ("TypeError numba_cuda_launch: CUDA kernel 'axpy' takes 4 arguments "
                        "(x, y, out, a); got 1")
    if not has_libcuda():
        assert lines[3] == ("RuntimeError numba_cuda_launch: CUDA kernel 'axpy' failed: "
                            "CUDA_ERROR_NO_DEVICE (100)")
    assert lines[4] == "False False"


def test_exports_the_function_under_tvm_ffi_s_name_only(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library.path], capture_output=True,
                         text=True)
    if out.returncode != 0:
        pytest.skip("no nm")
    names = {line.split()[-1] for line in out.stdout.splitlines()}
    assert "__tvm_ffi_axpy" in names
    assert not {"TVMFFIEnvGetStream", "TVMFFIErrorSetRaisedFromCStr"} & names
    aot.check_library(library.path)  # libc, libdl and libm only
    with open(library.header) as f:
        assert "int __tvm_ffi_axpy(void *self, const void *args, int32_t num_args, " \
               "void *result);" in f.read()


@numba.cfunc(nt.int32(nt.voidptr, nt.voidptr, nt.int64, nt.voidptr))
def wrong_signature(self, args, num_args, result):
    return 0


@pytest.mark.parametrize("functions, words", [
    ({"bad-name": wrong_signature}, ["'bad-name'", "C identifier"]),
    ({"f": wrong_signature}, ["'f'", "int32(voidptr, voidptr, int32, voidptr)"]),
    ({"f": len}, ["'f'", "tvm_ffi_kernel() result or a @numba.cfunc"]),
])
def test_what_is_not_a_tvm_ffi_function_is_refused(tmp_path, functions, words):
    with pytest.raises(aot.AotBuildError) as info:
        aot.build(str(tmp_path / "libx.so"), tvm_ffi_functions=functions)
    for w in words:
        assert w in str(info.value)
