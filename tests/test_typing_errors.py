"""Bad launches are Numba TypingErrors that name the kernel and the problem."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl


@cuda.jit
def lazy(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = 0


@cuda.jit("void(float32[::1], int32)")
def eager(x, n):
    pass


@cuda.jit(device=True)
def device_fn(x):
    return x


@cuda.jit(debug=True, opt=False)
def debug_kernel(x):
    x[0] = 1


@cuda.jit
def broken(x):
    x[0] = undefined_name  # noqa: F821


def compile_error(pyfunc, *argtypes):
    with pytest.raises(TypingError) as info:
        njit(argtypes)(pyfunc)
    return str(info.value)


P = (nt.intp,)


def test_wrong_argument_count():
    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        eager[1, 1](x)
    msg = compile_error(f, *P)
    assert "kernel 'eager'" in msg and "takes 2 argument(s) (x, n), got 1" in msg


def test_wrong_element_type_names_parameter():
    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float64)
        eager[1, 1](x, 3)
    msg = compile_error(f, *P)
    assert "kernel 'eager' parameter 'x' (argument 1)" in msg
    assert "array(float64, 1d, C)" in msg and "array(float32, 1d, C)" in msg


def test_wrong_ndim():
    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4, 4), np.float32)
        eager[1, 1](x, 3)
    msg = compile_error(f, *P)
    assert "parameter 'x'" in msg and "array(float32, 2d, C)" in msg


@pytest.mark.parametrize("make, kind", [
    ("[1.0, 2.0]", "list"), ("'text'", "str"), ("{1: 2.0}", "DictType"),
])
def test_host_only_types(make, kind):
    src = "def f(p):\n    lazy[1, 1](%s, 3)\n" % make
    ns = {"lazy": lazy}
    exec(src, ns)
    msg = compile_error(ns["f"], *P)
    assert "kernel 'lazy' parameter 'x'" in msg and "host-only type" in msg
    assert kind in msg


def test_python_object_argument():
    def f(o):
        lazy[1, 1](o, 3)
    with pytest.raises(TypingError) as info:
        njit(f)(object())
    assert "pyobject" in str(info.value) or "non-precise" in str(info.value)


def test_voidptr_to_lazy_kernel():
    def f(p):
        lazy[1, 1](ncl.as_voidptr(p), 3)
    msg = compile_error(f, *P)
    assert "kernel 'lazy' parameter 'x'" in msg and "voidptr" in msg
    assert "numba.carray" in msg


def test_device_function_launched():
    def f(p):
        device_fn[1, 1](p)
    msg = compile_error(f, *P)
    assert "'device_fn' is a CUDA device function" in msg


def test_non_kernel_indexed():
    other = np.zeros(3)

    def f(p):
        return other[1, 1]
    with pytest.raises(TypingError):
        njit(f)(1)


@pytest.mark.parametrize("config", ["[1]", "[1, 2, 0, 0, 1, 5]"])
def test_configuration_item_count(config):
    ns = {"lazy": lazy}
    exec("def f(p):\n    lazy%s(p, 3)\n" % config, ns)
    msg = compile_error(ns["f"], *P)
    assert "kernel 'lazy'" in msg and "item(s)" in msg


@pytest.mark.parametrize("config, what", [
    ("[1.5, 32]", "griddim"), ("[1, 32.0]", "blockdim"),
    ("[(1, 1, 1, 1), 32]", "griddim"), ("[1, (2, 2, 2, 2)]", "blockdim"),
    ("[-1, 32]", "griddim"), ("[1, 0]", "blockdim"),
    ("[1j, 32]", "griddim"), ("[(1, 2.0), 32]", "griddim"), ("[1, (32, -2)]", "blockdim"),
])
def test_bad_dimensions(config, what):
    ns = {"lazy": lazy}
    exec("def f(p):\n    lazy%s(p, 3)\n" % config, ns)
    msg = compile_error(ns["f"], *P)
    assert "kernel 'lazy'" in msg and what in msg


def test_float_stream():
    def f(p):
        lazy[1, 32, 1.5](p, 3)
    msg = compile_error(f, *P)
    assert "kernel 'lazy'" in msg and "stream" in msg and "float64" in msg


def test_string_stream():
    def f(p):
        lazy[1, 32, "stream"](p, 3)
    msg = compile_error(f, *P)
    assert "kernel 'lazy'" in msg and "stream" in msg


def test_negative_literal_sharedmem():
    def f(p):
        lazy[1, 32, 0, -4](p, 3)
    msg = compile_error(f, *P)
    assert "sharedmem must be between 0 and 2**32-1 bytes, got -4" in msg


def test_float_sharedmem():
    def f(p):
        lazy[1, 32, 0, 1.0](p, 3)
    msg = compile_error(f, *P)
    assert "sharedmem must be an integer" in msg


def test_kernel_compile_failure_shows_kernel_error():
    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        broken[1, 1](x)
    msg = compile_error(f, *P)
    assert "compiling kernel 'broken'" in msg and "undefined_name" in msg


def test_keyword_arguments_refused():
    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        lazy[1, 1](x, n=3)
    msg = compile_error(f, *P)
    assert "keyword arguments" in msg


def test_debug_kernel_refused():
    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        debug_kernel[1, 1](x)
    msg = compile_error(f, *P)
    assert "'debug_kernel' cannot be launched from compiled code" in msg
    assert "debug=True" in msg


def test_no_overload_among_several():
    @cuda.jit(["void(float32[::1])", "void(int32[::1])"])
    def two(x):
        pass

    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.complex128)
        two[1, 1](x)
    msg = compile_error(f, *P)
    assert "kernel 'two' has no compiled signature accepting" in msg
    assert "array(float32, 1d, C)" in msg and "array(int32, 1d, C)" in msg


def test_status_form_errors_too():
    def f(p):
        return eager[1, 1].launch_status(p)
    msg = compile_error(f, *P)
    assert "kernel 'eager'" in msg


def test_kernel_handle_bad_input():
    with pytest.raises(TypeError):
        ncl.kernel_handle(np.sin, (nt.float32,))
    with pytest.raises(ncl.KernelTypingError) as info:
        ncl.kernel_handle(eager, (nt.float64[::1], nt.int32))
    assert "parameter 'x'" in str(info.value)


@cuda.jit
def _first():
    pass


@cuda.jit
def _second():
    pass


_KERNELS = (_first, _second)


def test_a_kernel_picked_by_a_run_time_index_says_what_works(fake_driver):
    @njit
    def pick(s, i):
        _KERNELS[i][1, 1, s]()

    with pytest.raises(TypingError) as info:
        pick(0x51, 1)
    assert str(info.value).splitlines()[0].startswith(
        "a kernel cannot be picked from a tuple of kernels by a run-time index")


def test_cuda_jit_in_compiled_code_says_what_works(fake_driver):
    @njit
    def make(s):
        k = cuda.jit(lambda: None)
        k[1, 1, s]()

    with pytest.raises(TypingError) as info:
        make(0x51)
    assert str(info.value).splitlines()[0].startswith(
        "numba.cuda.jit cannot be called in @njit/@cfunc code: make kernels with @cuda.jit "
        "in Python")
