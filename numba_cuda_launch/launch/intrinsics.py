"""Functions kernels call: :func:`set_conditional` (a conditional graph
node's value, ``cudaGraphSetConditional``) and the
programmatic-dependent-launch controls :func:`griddepcontrol_wait` and
:func:`griddepcontrol_launch_dependents` (PTX ``griddepcontrol``, sm_90+).

Each kernel source makes them callable in its kernels
(:class:`..kernels.KernelFunction`: the checks are here, the typing and
lowering its compiler's), so every compiler types their arguments by the
same rules. Under numba-cuda's simulator the Python bodies run in the
simulated kernel; in CPU code each is a typing error saying where it
belongs. docs/graphs.md, "Conditional nodes" and "Programmatic dependent
launch"; docs/numba-cuda-mlir.md.
"""

from numba.core import types
from numba.extending import overload

from numba_cuda_launch.errors import NopythonUsageError
from numba_cuda_launch.kernels import KernelFunction, on_register
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.conditionalhandle import ConditionalHandle, ConditionalHandleType

__all__ = ["set_conditional", "griddepcontrol_wait", "griddepcontrol_launch_dependents",
           "PDL_COMPUTE_CAPABILITY", "KERNEL_FUNCTIONS"]

#: The compute capability PTX ``griddepcontrol`` needs (Hopper).
PDL_COMPUTE_CAPABILITY = (9, 0)


def _outside_kernels(name):
    return NopythonUsageError(
        "%s() is called in CUDA kernels (numba-cuda or numba-cuda-mlir @cuda.jit), not in CPU "
        "code; under numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) in simulated kernels"
        % name)


def _run_in_kernel(name, *args):
    """The Python body of kernel function *name*: the backend's, where
    kernels are Python (the simulator's); called from Python elsewhere, a
    refusal saying where it belongs."""
    if not BACKEND.run_kernel_function(name, *args):
        raise _outside_kernels(name)


def set_conditional(handle: ConditionalHandle | int, value: int | bool) -> None:
    """In a kernel: set conditional handle *handle* (a
    :class:`~numba_cuda_launch.graphs.ConditionalHandle` argument, or its
    64-bit integer) to *value* (an integer or a boolean), as CUDA C's
    ``cudaGraphSetConditional(handle, value)``: an IF node then runs its
    body if the value is not 0, a WHILE node goes round again, a SWITCH
    node runs body *value*. A value outside 0..2**32-1 is stored as
    2**32-1 (true, and no SWITCH case) rather than wrapped. Any thread may
    call it; the last write before the node is evaluated wins."""
    _run_in_kernel("set_conditional", getattr(handle, "handle", handle), value)


def griddepcontrol_wait() -> None:
    """In a kernel launched as a programmatic dependent launch: wait until
    the grids it depends on have completed and their memory is visible
    (PTX ``griddepcontrol.wait``; sm_90+). Returns at once in a kernel not
    launched so; does nothing under the simulator."""
    _run_in_kernel("griddepcontrol_wait")


def griddepcontrol_launch_dependents() -> None:
    """In a kernel: let the grid launched after it as a programmatic
    dependent launch start before this one completes (PTX
    ``griddepcontrol.launch_dependents``; sm_90+). A hint, once per block
    suffices; does nothing under the simulator."""
    _run_in_kernel("griddepcontrol_launch_dependents")


# -- in kernels: the checks every compiler's typing makes -------------------------------

def _is_handle(ty):
    return isinstance(ty, ConditionalHandleType) or (
        isinstance(ty, types.Integer) and ty.bitwidth == 64)


def _check_set_conditional(cc, *args):
    if len(args) != 2:
        raise NopythonUsageError("set_conditional(handle, value) takes 2 arguments, got %d"
                                 % len(args))
    handle, value = args
    if not _is_handle(handle):
        raise NopythonUsageError(
            "set_conditional(handle, value): handle must be a ConditionalHandle (a kernel "
            "argument from graphs.conditional_handle) or its 64-bit integer; got %s" % handle)
    if not isinstance(value, (types.Integer, types.Boolean)):
        raise NopythonUsageError(
            "set_conditional(handle, value): value must be an integer or a boolean "
            "(the condition's unsigned int); got %s" % value)


def _griddepcontrol_check(name):
    """Refuse arguments, or a kernel built for *cc* below sm_90."""
    def check(cc, *args):
        if args:
            raise NopythonUsageError("%s() takes no arguments, got %d" % (name, len(args)))
        if cc is not None and tuple(cc) < PDL_COMPUTE_CAPABILITY:
            raise NopythonUsageError(
                "%s() needs compute capability %d.%d or later (PTX griddepcontrol, Hopper); "
                "this kernel is built for %d.%d" % ((name,) + PDL_COMPUTE_CAPABILITY + tuple(cc)))
    return check


#: The functions kernels call, as each kernel source makes them callable.
KERNEL_FUNCTIONS = (
    KernelFunction(set_conditional, _check_set_conditional),
    KernelFunction(griddepcontrol_wait, _griddepcontrol_check("griddepcontrol_wait"),
                   "griddepcontrol.wait;"),
    KernelFunction(griddepcontrol_launch_dependents,
                   _griddepcontrol_check("griddepcontrol_launch_dependents"),
                   "griddepcontrol.launch_dependents;"),
)

# Where kernels are Python (the simulator) there is nothing to type.
if BACKEND.compiles_kernels:
    on_register(lambda source: source.add_kernel_functions(KERNEL_FUNCTIONS))


# -- CPU code: a typing error saying where these belong -------------------------------

def _refuse_on_cpu(fn):
    def typer(*args):
        raise _outside_kernels(fn.__name__)
    overload(fn, target="cpu")(typer)


for _fn in (set_conditional, griddepcontrol_wait, griddepcontrol_launch_dependents):
    _refuse_on_cpu(_fn)
