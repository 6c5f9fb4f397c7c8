"""Every public function takes the keywords its signature (docs, type hints)
shows, from Python and from nopython code alike: the test walks the
signatures of numba_cuda_launch's and numba_cuda_launch.graphs' public
functions and calls each with every parameter by keyword, then
positionally, under the recording driver, and compares what they did (the
status, or the exception and its first line). A function callable from
nopython code is called there too."""

import inspect

import pytest
from numba import njit
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from support import HAVE_GPU

STREAM, BODY = 0x51, 0x52

# Functions of the public API that nopython code does not call (Python
# tools, compute-capability settings) or that only kernels call.
NOT_NOPYTHON = {"error_name", "kernel_handle", "foreign_kernel", "driver_problem",
                "get_compute_capability", "get_compute_capabilities",
                "set_compute_capability", "check_pointers", "pointer_checks_enabled",
                "griddepcontrol_wait", "griddepcontrol_launch_dependents", "set_conditional"}


def sample(name):
    """A value for parameter *name* (the same in every call)."""
    return {
        "stream": STREAM,
        "mode": graphs.CAPTURE_RELAXED,
        "default": 1,
        "assign_default": True,
        "handle": graphs.ConditionalHandle(0x5000_0000),
        "node": graphs.ConditionalNode(0, 0, 0, graphs.COND_WHILE, 1),
        "index": 0,
        "n": 2,
        "timing": True,
        "blocking": False,
    }[name]


def public_functions():
    out = []
    for module in (ncl, graphs):
        for name in module.__all__:
            fn = getattr(module, name)
            if inspect.isfunction(fn) and name not in NOT_NOPYTHON:
                out.append(pytest.param(fn, id="%s.%s" % (module.__name__, name)))
    return out


def outcome(call):
    """What *call()* did: its status (the first item of a tuple), or the
    exception's type and first line; typing and argument errors fail."""
    try:
        result = call()
    except (TypeError, TypingError) as exc:
        pytest.fail("refused: %s: %s" % (type(exc).__name__, str(exc).splitlines()[0]))
    except ncl.CudaError as exc:
        return type(exc).__name__, str(exc).splitlines()[0]
    finally:
        graphs.abort_capture(BODY)
        graphs.abort_capture(STREAM)
    if isinstance(result, tuple):
        result = result[0]
    return result if isinstance(result, (int, type(None))) else type(result).__name__


def nopython_forms(fn):
    """``(by keyword, positional)``: @njit functions calling *fn* with its
    parameters as arguments."""
    params = list(inspect.signature(fn).parameters)
    args = ", ".join(params)
    made = []
    for call in (", ".join("%s=%s" % (p, p) for p in params), args):
        namespace = {"fn": fn}
        exec("def call(%s):\n    return fn(%s)\n" % (args, call), namespace)
        made.append(njit(namespace["call"]))
    return made


@pytest.mark.skipif(HAVE_GPU, reason="the recording driver stands in for the GPU")
@pytest.mark.parametrize("fn", public_functions())
def test_every_parameter_by_keyword(fake_driver, fn):
    params = list(inspect.signature(fn).parameters)
    values = [sample(p) for p in params]
    positional = outcome(lambda: fn(*values))
    assert outcome(lambda: fn(**dict(zip(params, values)))) == positional
    by_keyword, by_position = nopython_forms(fn)
    assert outcome(lambda: by_keyword(*values)) == outcome(lambda: by_position(*values))
    assert outcome(lambda: by_position(*values)) == positional


def test_the_python_only_functions_are_plain_functions():
    # Plain Python functions take their keywords by construction; a name
    # listed here that became nopython-callable would skip the test above.
    for name in NOT_NOPYTHON:
        fn = getattr(ncl, name, None) or getattr(graphs, name)
        kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
        assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}


@pytest.mark.skipif(HAVE_GPU, reason="the recording driver stands in for the GPU")
def test_documented_keywords_record_what_they_say(fake_driver):
    @njit
    def record(stream, body):
        graphs.begin_capture(stream, mode=graphs.CAPTURE_RELAXED)
        h = graphs.conditional_handle(stream, default=1, assign_default=True)
        node = graphs.add_switch(stream, handle=h, n=2)
        graphs.begin_body(body, node, index=1, mode=graphs.CAPTURE_RELAXED)
        graphs.end_body(stream=body)
        return graphs.end_capture(stream=stream), h, node

    graph, h, node = record(STREAM, BODY)
    record_ = fake_driver.handles[h.handle]
    assert (record_.default, record_.assign_default) == (1, True)
    assert fake_driver.graphs[graph.handle].mode == graphs.CAPTURE_RELAXED
    # index=1 was recorded: body 1 was captured in relaxed mode (body 0 never was)
    cond = fake_driver.graphs[graph.handle].launches[0]
    assert cond.size == 2
    graph.destroy()
    # the same from Python
    graphs.begin_capture(STREAM, mode=graphs.CAPTURE_RELAXED)
    h = graphs.conditional_handle(STREAM, default=3, assign_default=True)
    assert fake_driver.handles[h.handle].default == 3
    graphs.abort_capture(STREAM)


@njit
def methods_by_keyword(s):
    graphs.begin_capture(s)
    g = graphs.end_capture(s)
    exe = g.instantiate()
    exe.launch(stream=s)
    launched = exe.launch_status(stream=s)
    exe.update(graph=g)
    updated = exe.update_status(graph=g)
    e1, e2 = ncl.event(timing=True), ncl.event(blocking=False)
    e1.record(stream=s)
    recorded = e2.record_status(stream=s)
    e1.elapsed_time(end=e2)
    timed = e1.elapsed_time_status(end=e2)[0]
    exe.destroy()
    g.destroy()
    return launched, updated, recorded, timed


@pytest.mark.skipif(HAVE_GPU, reason="the recording driver stands in for the GPU")
def test_methods_by_keyword(fake_driver):
    assert methods_by_keyword(STREAM) == (0, 0, 0, 0)
    assert len(fake_driver.graph_launches) == 2 and len(fake_driver.exec_updates) == 2
    graphs.begin_capture(stream=STREAM)
    exe = graphs.end_capture(stream=STREAM).instantiate()
    exe.launch(stream=STREAM)
    assert fake_driver.graph_launches[-1] == (exe.handle, STREAM)
    exe.destroy()
