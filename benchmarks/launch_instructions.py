"""Deterministic CPU counts of what one launch costs, for before/after
comparisons on machines without hardware counters (no GPU needed):

* ``llvm``: the LLVM instructions of the optimized ``@njit`` launchers
  (a numba-cuda kernel over ``carray`` views, and one taking a
  ``ConditionalHandle``), compiled against the recording driver for sm_90;
* ``sim``: under numba-cuda's simulator (a child process), the Python
  calls (``sys.setprofile``) one launch from Python
  (``kernel[g, b, stream](...)``) and one from ``@njit`` make, in all and
  in this package's modules.

Run ``python benchmarks/launch_instructions.py`` with the checkout on
``PYTHONPATH``; it prints JSON. docs/reliability.md (round 5) has the
numbers of the change that added it.
"""

import json
import os
import re
import subprocess
import sys

_INSTRUCTION = re.compile(r"^\s+(?:%\S+ = )?[a-z]")


def llvm_counts():
    import numba
    import numpy as np
    from numba import cuda

    import numba_cuda_launch as ncl
    from numba_cuda_launch import graphs
    from numba_cuda_launch.testing import RecordingDriver

    ncl.set_compute_capability((9, 0))

    @cuda.jit
    def axpy(out, x, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + out[i]

    @cuda.jit
    def stop(x, handle):
        if cuda.grid(1) == 0 and x[0] > 0:
            graphs.set_conditional(handle, 0)

    @numba.njit
    def site(out_address, x_address, n, stream):
        out = numba.carray(ncl.as_voidptr(out_address), (n,), np.float32)
        x = numba.carray(ncl.as_voidptr(x_address), (n,), np.float32)
        axpy[(n + 127) // 128, 128, stream](out, x, np.float32(2.5))

    @numba.njit
    def handle_site(x_address, n, stream, handle):
        x = numba.carray(ncl.as_voidptr(x_address), (n,), np.float32)
        stop[1, 32, stream](x, handle)

    counts = {}
    with RecordingDriver():
        site(0x1000, 0x2000, 256, 0x51)
        graphs.begin_capture(0x51)
        handle_site(0x1000, 256, 0x51, graphs.ConditionalHandle(0))
        graphs.abort_capture(0x51)
        for name, fn in (("launch", site), ("launch_with_handle", handle_site)):
            (ir,) = fn.inspect_llvm().values()
            counts[name] = sum(1 for line in ir.splitlines() if _INSTRUCTION.match(line))
    return counts


_SIM = r'''
import json, os, sys
import numba, numpy as np
from numba import cuda
import numba_cuda_launch as ncl

@cuda.jit
def add(x, v):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += v

@numba.njit
def site(x, stream):
    add[1, 16, stream](x, np.float32(1))

x = cuda.to_device(np.zeros(16, np.float32))
stream = cuda.stream()
add[1, 16, stream](x, np.float32(1))
site(x, stream)
package = os.path.dirname(ncl.__file__) + os.sep
out = {}
for name, call in (("python_launch", lambda: add[1, 16, stream](x, np.float32(1))),
                   ("njit_launch", lambda: site(x, stream))):
    calls = [0, 0]
    def profile(frame, event, arg):
        if event == "call":
            calls[0] += 1
            calls[1] += frame.f_code.co_filename.startswith(package)
    sys.setprofile(profile)
    call()
    sys.setprofile(None)
    out[name] = {"calls": calls[0], "package_calls": calls[1]}
assert x.copy_to_host()[0] == 4
print(json.dumps(out))
'''


def sim_counts():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", _SIM], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps({"llvm": llvm_counts(), "sim": sim_counts()}, indent=1))
