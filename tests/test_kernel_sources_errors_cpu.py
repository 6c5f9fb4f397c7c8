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
from numba import njit, typeof
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from support import HAVE_NUMBA_CUDA
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
    # (a // comment runs to the end of its line: NVRTC's header comments go)
    one_line = " ".join(line for line in ptx.rstrip(b"\0").decode().splitlines()
                        if not line.lstrip().startswith("//"))
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


def _with_entry_before(ptx, text):
    """*ptx* (bytes) with *text* put before its entry point."""
    ptx = ptx.rstrip(b"\0").decode()
    at = ptx.index(".visible .entry")
    return ptx[:at] + text + ptx[at:]


@pytest.mark.parametrize("comment", [
    "// .visible .entry axpy(\n//\t.param .u64 old_param_0\n// )\n",
    "/* .visible .entry axpy(\n\t.param .u64 old_param_0,\n\t.param .b32 old_param_1\n) */\n",
    "/* an old axpy: .entry axpy(.param .b8 x[3]) */ // .entry axpy(.param .b16 y)\n",
])
def test_an_entry_commented_out_is_not_read(ptx, comment):
    # (before: KeyError 'aram', or the commented-out parameters were the
    # ones checked: "takes parameters of [8, 4] bytes")
    text = _with_entry_before(ptx, comment)
    k = ncl.foreign_kernel(text, "axpy", SIG)
    assert k.kind == "ptx"
    # the entry read is the real one: its sizes are checked still
    wrong = refused(ValueError, text, "axpy", SIG.replace("float32, int64", "float64, int64"))
    assert wrong == "foreign_kernel(axpy): entry 'axpy' takes parameters of [8, 8, 4, 8] " \
        "bytes; the signature declares [8, 8, 8, 8]"


def test_comments_inside_the_parameter_list_are_not_parameters(ptx):
    text = ptx.rstrip(b"\0").decode().replace(
        ".param .f32 axpy_param_2", "// a, the scale\n\t.param .f32 axpy_param_2 /* a, b */")
    assert ncl.foreign_kernel(text, "axpy", SIG).kind == "ptx"


def test_a_comment_marker_inside_a_string_is_text(ptx):
    from numba_cuda_launch.compat.ptx import strip_comments

    line = '.file 1 "/src//axpy.cu" // the source\n'
    assert strip_comments(line) == '.file 1 "/src//axpy.cu"  \n'
    assert ncl.foreign_kernel(_with_entry_before(ptx, line), "axpy", SIG).kind == "ptx"


def test_ptx_whose_only_entry_is_commented_out_has_none(ptx):
    # (before: accepted, and the driver would have found no kernel)
    text = _with_entry_before(ptx, "/*\n") + "\n*/\n"
    assert refused(ValueError, text, "axpy", SIG) == \
        "foreign_kernel(axpy): the PTX has no entry 'axpy' (it declares no .entry outside " \
        "comments)"


def test_a_missing_ptx_entry_names_the_entries_there_are(ptx):
    assert refused(ValueError, ptx, "saxpy", SIG) == \
        "foreign_kernel(saxpy): the PTX has no entry 'saxpy' (its entry points: axpy)"


@pytest.mark.parametrize("decl", [".param .u64", ".param .pred p", ".reg .u64 r",
                                  ".param .u128 x"])
def test_a_parameter_declaration_that_cannot_be_read_is_named(ptx, decl):
    text = ptx.rstrip(b"\0").decode().replace(".param .f32 axpy_param_2", decl)
    assert refused(ValueError, text, "axpy", SIG) == (
        "foreign_kernel(axpy): the PTX's entry 'axpy' declares a parameter %r whose size "
        "cannot be read (expected '.param .<type> name' with a type .b8 .. .f64, as "
        "compilers write it)" % decl)


# -- kernels that are not for foreign_kernel() ---------------------------------------------

@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="needs numba-cuda, which is not installed")
def test_a_kernel_of_another_source_is_launched_as_it_is(ptx):
    from numba import cuda

    @cuda.jit("void(float32[::1])")
    def nk(x):
        pass

    assert refused(TypeError, nk, "nk", SIG) == (
        "foreign_kernel(nk): this is a numba-cuda kernel already, launched as it is "
        "(kernel[griddim, blockdim](args...)); foreign_kernel() takes the kernels of other "
        "compilers")
    k = ncl.foreign_kernel(ptx, "axpy", SIG)
    assert refused(TypeError, k, "axpy", SIG).startswith(
        "foreign_kernel(axpy): this is a ForeignKernel already, launched as it is")


def test_a_cuda_core_object_that_is_no_kernel_says_what_to_pass():
    program = type("Program", (), {"__module__": "cuda.core._program"})()
    assert refused(TypeError, program, "axpy", SIG) == (
        "foreign_kernel(axpy): a cuda.core Program is not a kernel: pass an ObjectCode (what "
        "Program.compile('cubin') returns) with entry=..., or the Kernel "
        "ObjectCode.get_kernel(name) returns")


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


def test_a_signature_whose_parser_fails_without_a_message_names_the_error(ptx):
    # (before: the message ended with ": " and nothing)
    assert refused(TypeError, ptx, "axpy", "void(Undefined)") == (
        "foreign_kernel(axpy): signature 'void(Undefined)' does not parse as a Numba "
        "signature such as 'void(CPointer(float32), float32, int64)': NotImplementedError")


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


@njit
def _launch_with_address(k, address):
    k[1, 32](0x1000, address, 1.0, 4)


@njit
def _status_with_address(k, address):
    return k[1, 32].launch_status(0x1000, address, 1.0, 4)


@pytest.mark.parametrize("address", [-5, -(2 ** 63), np.int32(-1), np.int8(-128)])
def test_a_negative_address_at_run_time_refuses_the_launch(ptx, address):
    # the rule of constants (above) at run time (before: -5 was launched as
    # 0xfffffffffffffffb)
    k = ncl.foreign_kernel(ptx, "axpy", SIG, param_names=["y", "x", "a", "n"])
    with RecordingDriver() as rec:
        with pytest.raises(ncl.CudaLaunchError) as info:
            _launch_with_address(k, address)
        assert _status_with_address(k, address) == 1  # CUDA_ERROR_INVALID_VALUE
    assert rec.launches == []
    assert str(info.value) == (
        "launch of CUDA kernel 'axpy' failed: CUDA_ERROR_INVALID_VALUE (1): parameter 'x' "
        "(argument 2) of type float32* (address) was given a %s value that is not an "
        "address (0..2**64-1)" % typeof(address))


@pytest.mark.parametrize("address, raw", [
    (0, 0), (2 ** 63 - 1, 2 ** 63 - 1), (np.uint64(2 ** 64 - 1), 2 ** 64 - 1),
    (np.int32(7), 7), (np.uint8(255), 255)])
def test_addresses_in_range_at_run_time_are_launched_as_given(ptx, address, raw):
    k = ncl.foreign_kernel(ptx, "axpy", SIG)
    with RecordingDriver() as rec:
        _launch_with_address(k, address)
    assert rec.launches[0].params[1] == struct.pack("<Q", raw)


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


# -- Triton ------------------------------------------------------------------------------------

TRITON_MAKE = ("pass the CompiledKernel that triton.compile(...), a launch of the @triton.jit "
               "function or its .warmup(...) returns, compiled for an NVIDIA GPU")


@pytest.mark.parametrize("meta, kind, words", [
    (dict(num_warps=0), ValueError, "metadata.num_warps is 0; Triton's num_warps is a power of "
                                    "two, 1..32 (blocks of num_warps * 32 threads, at most "
                                    "1024)"),
    (dict(num_warps=64), ValueError, "metadata.num_warps is 64; Triton's num_warps is a power "
                                     "of two"),
    (dict(num_warps=6), ValueError, "metadata.num_warps is 6; Triton's num_warps is a power "
                                    "of two"),
    (dict(num_warps=4.0), TypeError, "metadata.num_warps is 4.0 (float), not an integer"),
    (dict(num_warps=True), TypeError, "metadata.num_warps is True (bool), not an integer"),
    (dict(shared=-1), ValueError, "metadata.shared is -1; it must be 0..2**32-1"),
    (dict(shared=2 ** 32), ValueError, "metadata.shared is 4294967296; it must be 0..2**32-1"),
    (dict(shared=227 * 1024 + 1), ValueError,
     "metadata.shared is 232449 bytes; no GPU gives a block more than 232448 bytes of shared "
     "memory (227 KiB): compile it with smaller blocks or fewer stages"),
    (dict(shared="1024"), TypeError, "metadata.shared is '1024' (str), not an integer"),
    (dict(shared=None), TypeError, "metadata has no 'shared'; " + TRITON_MAKE),
    (dict(num_ctas=0), ValueError, "metadata.num_ctas is 0; it must be 1..2147483647"),
    (dict(launch_pdl="no"), TypeError, "metadata.launch_pdl is 'no' (str), not a bool"),
])
def test_triton_metadata_out_of_range_is_refused_naming_the_field(meta, kind, words):
    # (before: num_warps=0 gave a block of 0 threads, 64 one of 2048;
    # shared=-1 was taken)
    from support.foreign_sources import fake_triton

    assert refused(kind, fake_triton(**meta)).startswith(
        "foreign_kernel(add_kernel): the Triton kernel's " + words)


@pytest.mark.parametrize("num_warps, shared", [(1, 0), (32, 227 * 1024), (8, 48 * 1024)])
def test_triton_metadata_at_the_limits_is_taken(num_warps, shared):
    from support.foreign_sources import fake_triton

    k = ncl.foreign_kernel(fake_triton(num_warps=num_warps, shared=shared))
    assert (k.block, k.sharedmem) == ((32 * num_warps, 1, 1), shared)


def _without(**changes):
    """A fake Triton kernel with attributes changed (None: deleted)."""
    from support.foreign_sources import fake_triton

    k = fake_triton()
    for attr, value in changes.items():
        if value is None:
            delattr(k, attr)
        else:
            setattr(k, attr, value)
    return k


@pytest.mark.parametrize("make, kind, text", [
    (lambda: _without(metadata=None), TypeError,
     "foreign_kernel(CompiledKernel): the Triton kernel has no metadata; " + TRITON_MAKE),
    (lambda: _without(metadata=type("Meta", (), {"num_warps": 4})()), TypeError,
     "foreign_kernel(CompiledKernel): the Triton kernel's metadata.name (its entry point) is "
     "None, not a name; " + TRITON_MAKE),
    (lambda: _without(asm={"ptx": "..."}), ValueError,
     "foreign_kernel(add_kernel): the Triton kernel has no cubin (its asm holds ptx): only "
     "kernels compiled for an NVIDIA GPU launch; " + TRITON_MAKE),
    (lambda: _without(asm={"amdgcn": "", "hsaco": b""}), ValueError,
     "foreign_kernel(add_kernel): the Triton kernel has no cubin (its asm holds amdgcn, "
     "hsaco): only kernels compiled for an NVIDIA GPU launch; " + TRITON_MAKE),
    (lambda: _without(asm=None), TypeError,
     "foreign_kernel(add_kernel): the Triton kernel has no 'asm' (its compiled forms); "
     + TRITON_MAKE),
    (lambda: _without(asm={"cubin": "text", "ptx": ""}), TypeError,
     "foreign_kernel(add_kernel): the Triton kernel's asm['cubin'] is str, not bytes"),
    (lambda: _without(src=None), TypeError,
     "foreign_kernel(add_kernel): the Triton kernel has no src.signature (the types of its "
     "parameters); " + TRITON_MAKE),
    (lambda: _without(src=type("Src", (), {"signature": ["*fp32", "*fp32", "i32"]})()),
     TypeError,
     "foreign_kernel(add_kernel): the Triton kernel's src.signature is a list (['*fp32', "
     "'*fp32', 'i32']); Triton's signature is a dict of parameter names to types, e.g. "
     "{'x': '*fp32', 'n': 'i32', 'BLOCK': 'constexpr'}"),
    (lambda: _without(src=type("Src", (), {"signature": {0: "*fp32"}})()), TypeError,
     "foreign_kernel(add_kernel): the Triton kernel's src.signature names a parameter 0; "
     "parameter names are Python identifiers"),
    (lambda: type("JITFunction", (), {"__module__": "triton.runtime.jit"})(), TypeError,
     "foreign_kernel(JITFunction): a Triton JITFunction is not a compiled kernel; "
     + TRITON_MAKE),
])
def test_a_triton_kernel_missing_a_part_says_what_and_what_to_do(make, kind, text):
    # (before: AttributeError, KeyError: 'cubin', or "'list' object has no
    # attribute 'items'")
    assert refused(kind, make()) == text


def test_triton_entry_and_signature_are_its_own():
    from support.foreign_sources import fake_triton

    assert refused(ValueError, fake_triton(), "other") == (
        "foreign_kernel(add_kernel): entry 'other' given, but the Triton kernel's entry point "
        "is 'add_kernel' (its metadata.name); leave entry out")
    assert refused(TypeError, fake_triton(), signature="void(int32)") == (
        "foreign_kernel(add_kernel): a Triton kernel declares its own signature "
        "(src.signature); leave signature out")
    assert ncl.foreign_kernel(fake_triton(), "add_kernel").entry == "add_kernel"


def test_triton_param_names_rename_its_parameters_checked_as_any():
    # (before: param_names were dropped without a word)
    from support.foreign_sources import fake_triton

    k = ncl.foreign_kernel(fake_triton(), param_names=["src", "dst", "count"])
    assert [p.name for p in k.params] == ["src", "dst", "count", "global_scratch",
                                          "profile_scratch"]
    assert refused(TypeError, fake_triton(), param_names=["a", "b"]) == (
        "foreign_kernel(add_kernel): 2 parameter names for 3 parameters (['a', 'b'])")


@pytest.mark.parametrize("meta, words", [
    (dict(global_scratch_size=256), "needs a global scratch buffer, which Triton's launcher "
                                    "allocates per launch"),
    (dict(launch_cooperative_grid=True), "was compiled for a cooperative launch, which is not "
                                         "done from compiled code"),
])
def test_triton_refusals_start_with_the_function(meta, words):
    from support.foreign_sources import fake_triton

    assert refused(ValueError, fake_triton(**meta)) == \
        "foreign_kernel(add_kernel): the Triton kernel " + words
