"""Refusals of foreign_kernel() and of launches of foreign kernels, on the
CPU (docs/kernel-sources.md): each wrong source, entry, signature,
param_names or live handle is a TypeError/ValueError naming
``foreign_kernel(<entry>)`` and what was given; a constant that is no
address is a typing error naming the kernel and the parameter. Live handles
are fakes named and moduled as cuda.core's and CuPy's, known to the
recording driver."""

import struct

import numpy as np
import pytest
from numba import njit
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from support.nvrtc import nvrtc_ptx
from numba_cuda_launch.testing import RecordingDriver

AXPY = r'''
extern "C" __global__ void axpy(float* y, const float* x, float a, long long n)
{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }
'''
SIG = "void(CPointer(float32), CPointer(float32), float32, int64)"
SIZES = [8, 8, 4, 8]
HANDLE = 0x7E590000


@pytest.fixture(scope="module")
def ptx():
    return nvrtc_ptx(AXPY, ("-arch=compute_90",), "axpy")


@pytest.fixture(scope="module")
def cubin():
    from cuda.core import Program, ProgramOptions

    return bytes(Program(AXPY, "c++", ProgramOptions(arch="sm_90")).compile("cubin").code)


def refused(kind, *args, **kw):
    with pytest.raises(kind) as info:
        ncl.foreign_kernel(*args, **kw)
    return str(info.value)


# -- the source ------------------------------------------------------------------------

@pytest.mark.parametrize("source, kind, words", [
    (b"", ValueError, "source: the image is empty (0 bytes)"),
    ("", ValueError, "source: '' is neither PTX text (it has no .entry) nor a file that can "
                     "be read"),
    ("/no/such/axpy.cubin", ValueError, "source: '/no/such/axpy.cubin' is neither PTX text"),
    (None, TypeError, "source: an image is bytes (cubin, fatbin or PTX), PTX text or a file "
                      "path, got NoneType"),
    (b"\x50\xed\x55", ValueError, "source: the image is not a cubin (ELF), a fatbin or PTX"),
])
def test_a_source_that_is_no_image_is_refused_naming_it(source, kind, words):
    assert refused(kind, source, "axpy", SIG).startswith("foreign_kernel(axpy): " + words)


def test_a_directory_is_refused_naming_it(tmp_path):
    text = refused(ValueError, str(tmp_path), "axpy", SIG)
    assert text.startswith("foreign_kernel(axpy): source: %r is neither PTX text" % str(tmp_path))


def test_ptx_text_on_one_line_is_ptx_not_a_path(ptx):
    one_line = ptx.rstrip(b"\0").decode().replace("\n", " ")
    k = ncl.foreign_kernel(one_line, "axpy", SIG)
    assert k.kind == "ptx" and k.image.endswith(b"\0")


@pytest.mark.parametrize("cut, words", [
    (4, "the cubin is not a 64-bit little-endian ELF file of at least 64 bytes (it is 4 "
        "bytes)"),
    (100, "the cubin is truncated or malformed: its section headers end at byte"),
])
def test_a_truncated_cubin_is_refused(cubin, cut, words):
    text = refused(ValueError, cubin[:cut], "axpy", SIG)
    assert text.startswith("foreign_kernel(axpy): source: " + words), text


@pytest.mark.parametrize("entry", ["xpy", "ax", "axpy_", ".text.axpy", "nv.info"])
def test_a_cubin_entry_is_a_function_symbol_not_a_substring(cubin, entry):
    # (before: 'xpy' was accepted, found inside "axpy\0")
    text = refused(ValueError, cubin, entry, SIG)
    assert text == "foreign_kernel(%s): the cubin has no entry %r" % (entry, entry)
    assert ncl.foreign_kernel(cubin, "axpy", SIG).kind == "cubin"


@pytest.mark.parametrize("data, words", [
    (b"\x50\xed\x55\xba", "its header is 4 bytes of 16"),
    (b"\x50\xed\x55\xba\x01\x00\x10\x00" + struct.pack("<Q", 64) + bytes(10),
     "it is 26 bytes; its header announces 80"),
])
def test_a_truncated_fatbin_is_refused(data, words):
    assert refused(ValueError, data, "axpy", SIG) == \
        "foreign_kernel(axpy): the fatbin is truncated: " + words


# -- entry, signature and parameter names ----------------------------------------------------

@pytest.mark.parametrize("entry, shown", [(b"axpy", "bytes b'axpy'"), (5, "int 5"),
                                          ("axpy\0", "str 'axpy\\x00'")])
def test_an_entry_that_is_no_name_is_refused_with_the_value(ptx, entry, shown):
    text = refused(TypeError, ptx, entry, SIG)
    assert "entry must be the entry point's name (its extern \"C\" name, a str), got " + \
        shown in text
    assert text.startswith("foreign_kernel(")


@pytest.mark.parametrize("names, words", [
    ("yxan", "param_names must be a list of 4 names, one per parameter, got str 'yxan'"),
    (4, "param_names must be a list of 4 names, one per parameter, got int 4"),
    ((n for n in "yxan"), "param_names must be a list of 4 names, one per parameter, got "
                          "generator"),
    (["y"], "1 parameter names for 4 parameters (['y'])"),
    (["y", "y", "a", "n"], "param_names names 'y' more than once"),
    (["y", "x-1", "a", "n"], "param_names must be Python identifiers (they name the "
                             "parameters in messages and jax_kernel scalars); got 'x-1'"),
    (["y", "class", "a", "n"], "param_names must be Python identifiers"),
    (["", "x", "a", "n"], "param_names must be Python identifiers (they name the "
                          "parameters in messages and jax_kernel scalars); got ''"),
    ([None, "x", "a", "n"], "param_names must be Python identifiers (they name the "
                            "parameters in messages and jax_kernel scalars); got None"),
    ([1, 2, 3, 4], "param_names must be Python identifiers (they name the parameters in "
                   "messages and jax_kernel scalars); got 1"),
])
def test_param_names_are_checked(ptx, names, words):
    # (before: "yxan" gave four one-letter names; '' an IndexError; 1 and
    # 'x-1' inspect's errors without the function's name; duplicates passed)
    text = refused(TypeError, ptx, "axpy", SIG, param_names=names)
    assert text.startswith("foreign_kernel(axpy): " + words), text


def test_a_literal_type_in_the_signature_is_its_plain_type(ptx):
    k = ncl.foreign_kernel(ptx, "axpy", nt.void(nt.voidptr, nt.voidptr, nt.float32,
                                                nt.IntegerLiteral(3)))
    assert k.c_types[-1] == nt.int64  # (before: only the constant 3 could be passed)

    @njit
    def go(n):
        k[1, 32](0x1000, 0x2000, 1.0, n)

    with RecordingDriver() as rec:
        go(77)
    assert rec.launches[0].params[3] == struct.pack("<q", 77)


# -- launches --------------------------------------------------------------------------------

@pytest.mark.parametrize("address", [-5, -(2 ** 63)])
def test_a_constant_that_is_no_address_is_a_typing_error(ptx, address):
    k = ncl.foreign_kernel(ptx, "axpy", SIG, param_names=["y", "x", "a", "n"])
    go = njit(eval("lambda: k[1, 32](0x1000, %d, 1.0, 4)" % address, {"k": k}))
    with pytest.raises(TypingError) as info:
        go()
    first = str(info.value).splitlines()[0]
    assert first.startswith("kernel 'axpy' parameter 'x' (argument 2): got Literal[int](%d), "
                            "expected float32* (address): the constant %d is not an address "
                            "(0..2**64-1)" % (address, address)), first


def test_a_constant_address_at_the_top_of_the_range_is_passed(ptx):
    k = ncl.foreign_kernel(ptx, "axpy", SIG)

    @njit
    def go():
        k[1, 32](0x1000, 2 ** 64 - 1, 1.0, 4)

    with RecordingDriver() as rec:
        go()
    assert rec.launches[0].params[1] == b"\xff" * 8


# -- live handles ------------------------------------------------------------------------------

CoreKernel = type("Kernel", (), {"__module__": "cuda.core._module"})
CuPyFunction = type("Function", (), {"__module__": "cupy.cuda.function"})
CuPyRawKernel = type("RawKernel", (), {"__module__": "cupy._core.raw"})


def core_kernel(**attrs):
    k = CoreKernel()
    k.__dict__.update(attrs)
    return k


def cupy_function(**attrs):
    f = CuPyFunction()
    f.__dict__.update(attrs)
    return f


@pytest.fixture
def known():
    with RecordingDriver() as rec:
        rec.add_kernel(HANDLE, "axpy", SIZES, "CUkernel")
        rec.add_kernel(HANDLE + 0x100, "axpy", SIZES, "CUfunction")
        yield rec


@pytest.mark.parametrize("make, words", [
    (lambda: core_kernel(handle=-1), "the cuda.core Kernel's CUkernel is -1, not an address "
                                     "(addresses are 1..2**64-1)"),
    (lambda: core_kernel(handle=2 ** 64), "the cuda.core Kernel's CUkernel is "
                                          "18446744073709551616, not an address"),
    # the driver would have seen it wrapped to a handle it knows
    (lambda: core_kernel(handle=2 ** 64 + HANDLE), "the cuda.core Kernel's CUkernel is %d, "
                                                   "not an address" % (2 ** 64 + HANDLE)),
    (lambda: cupy_function(ptr=-1), "the CuPy Function's CUfunction is -1, not an address"),
])
def test_a_live_handle_outside_the_addresses_is_refused(known, make, words):
    # (before: -1 and 2**64 reached the driver; 2**64 + a known handle was
    # accepted and launched as the wrapped one)
    text = refused(ValueError, make(), "axpy", SIG)
    assert text == "foreign_kernel(axpy): " + words + ("" if "addresses are" in words else
                                                       " (addresses are 1..2**64-1)")


@pytest.mark.parametrize("make, words", [
    (lambda: cupy_function(ptr=1.5), "the CuPy Function's 'ptr' is 1.5 (float), not a driver "
                                     "handle (an integer address)"),
    (lambda: cupy_function(ptr="0x10"), "the CuPy Function's 'ptr' is '0x10' (str), not a "
                                        "driver handle"),
    (lambda: cupy_function(), "the CuPy Function has no 'ptr' (its driver handle), so it "
                              "holds no loaded kernel"),
    (lambda: core_kernel(), "the cuda.core Kernel has no 'handle' (its driver handle)"),
    (lambda: core_kernel(handle=object()), "the cuda.core Kernel's 'handle' is <object"),
    (lambda: type("RawKernel", (), {"__module__": "cupy._core.raw", "name": "axpy"})(),
     "the CuPy RawKernel 'axpy' has no 'kernel' attribute (its cupy.cuda.Function), so it "
     "holds no loaded kernel"),
])
def test_a_live_kernel_without_an_integer_handle_is_refused(known, make, words):
    # (before: 1.5 was launched as handle 1; the others raised AttributeError
    # or int()'s errors)
    text = refused(TypeError, make(), "axpy", SIG)
    assert text.startswith("foreign_kernel(axpy): " + words), text


def test_a_live_kernel_entry_must_be_a_name(known):
    text = refused(TypeError, core_kernel(handle=HANDLE), 5, SIG)
    assert "entry must be the entry point's name (its extern \"C\" name, a str), got int 5" \
        in text


def test_a_live_handle_in_range_is_taken(known):
    k = ncl.foreign_kernel(core_kernel(handle=np.uint64(HANDLE)), "axpy", SIG)
    assert k.handle == HANDLE and type(k.handle) is int
