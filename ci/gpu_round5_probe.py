"""GPU-machine probe of what the CUDA driver itself does where round 5
(issue 39) made the package refuse before asking it: each probe prints one
line, ``PROBE name: result``. Run by ci/gpu_round5.sh.

* ``end_capture_of_a_body``: cuStreamEndCapture on a stream recording a
  conditional node's body (cuStreamBeginCaptureToGraph): the status, and
  whether the graph it hands back is the body;
* ``abort_then_rerecord``: the package's abort of a body (cuGraphGetNodes,
  cuGraphDestroyNode on the body's nodes), then the body recorded again:
  what the replay added (10 expected, 11 if the aborted launch stayed);
* ``default_in_body``: a handle made in a WHILE body with default 1: inner
  body runs after one launch of 3 outer iterations (1: the default is
  applied at each graph launch, as CUDA documents; 3: at each body run);
* ``empty_while`` (in a child process, 20 s limit): a WHILE node whose body
  is empty, recorded with the driver directly (the package refuses it):
  whether its replay completes.
"""

import ctypes
import os
import subprocess
import sys

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from numba import cuda, njit  # noqa: E402

from numba_cuda_launch import graphs  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
from support import recording_states as states  # noqa: E402


@njit
def open_body(xp, stream, body):
    return states.if_body_begun(states.view(xp), stream, body)


def end_capture_of_a_body(d):
    from cuda.bindings import driver as drv

    stream, body = cuda.stream(), cuda.stream()
    node = open_body(d.device_ctypes_pointer.value, stream, body)
    body_graph = ctypes.c_uint64.from_address(node.bodies).value  # the driver's array
    err, graph = drv.cuStreamEndCapture(body.handle)
    print("PROBE end_capture_of_a_body: %s, graph %s the body" % (
        err.name, "is" if int(graph) == body_graph else "is NOT (%#x vs %#x)" % (
            int(graph), body_graph)))
    graphs.abort_capture(stream)


def default_in_body():
    d = cuda.to_device(np.array([3, 0, 0, 0], np.int64))
    stream = cuda.stream()
    exe = states.default_in_body(d.device_ctypes_pointer.value, stream, cuda.stream(),
                                 cuda.stream())
    exe.launch(stream)
    stream.synchronize()
    print("PROBE default_in_body: inner body ran %d times over 3 outer iterations"
          % d.copy_to_host()[1])
    exe.destroy()


def abort_then_rerecord():
    d = cuda.to_device(np.zeros(4, np.int64))
    stream = cuda.stream()
    aborted, exe = states.abort_a_body(d.device_ctypes_pointer.value, stream, cuda.stream())
    exe.launch(stream)
    stream.synchronize()
    print("PROBE abort_then_rerecord: abort status %d, replay added %d"
          % (aborted, d.copy_to_host()[0]))
    exe.destroy()


_EMPTY_WHILE = r'''
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
from cuda.bindings import driver as drv
from numba import cuda
cuda.current_context()
err, graph = drv.cuGraphCreate(0)
err, handle = drv.cuGraphConditionalHandleCreate(graph, cuda.current_context().handle, 1,
                                                  drv.CU_GRAPH_COND_ASSIGN_DEFAULT)
params = drv.CUgraphNodeParams()
params.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
params.conditional.handle = handle
params.conditional.type = drv.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
params.conditional.size = 1
params.conditional.ctx = cuda.current_context().handle
err, node = drv.cuGraphAddNode(graph, None, None, 0, params)
print("PROBE empty_while: add", err.name, flush=True)
err, exe = drv.cuGraphInstantiate(graph, 0)
print("PROBE empty_while: instantiate", err.name, flush=True)
stream = cuda.stream()
err, = drv.cuGraphLaunch(exe, stream.handle)
print("PROBE empty_while: launch", err.name, flush=True)
err, = drv.cuStreamSynchronize(stream.handle)
print("PROBE empty_while: replay completed:", err.name, flush=True)
'''


def empty_while():
    try:
        out = subprocess.run([sys.executable, "-c", _EMPTY_WHILE], capture_output=True,
                             text=True, timeout=20)
        print(out.stdout.strip() or out.stderr.strip()[-400:])
    except subprocess.TimeoutExpired as exc:
        print((exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout or "")
        print("PROBE empty_while: replay still running after 20 s (the loop never ends)")


if __name__ == "__main__":
    d = cuda.to_device(np.zeros(4, np.int64))
    for probe in (lambda: end_capture_of_a_body(d), abort_then_rerecord, default_in_body,
                  empty_while):
        try:
            probe()
        except Exception as exc:  # one line per probe, whatever happens
            print("PROBE %s: raised %s: %s" % (getattr(probe, "__name__", "end_capture"),
                                              type(exc).__name__, str(exc).splitlines()[0]))
