"""One kernel, ``axpy(y, x, a, n)``, from every foreign-kernel source
(docs/kernel-sources.md), for tests parametrized over sources: images
built here with NVRTC (cubin, PTX; a fatbin is a header the recording
driver loads as is), a cuda.core ``ObjectCode``, and fakes of the objects
of other libraries, named and moduled as theirs (the readers duck-type on
those): a Triton 3.6 ``CompiledKernel`` (Triton needs a GPU to compile),
a cuda.core ``Kernel`` and CuPy ``RawKernel``/``Function`` whose handles
are fake addresses the recording driver is told about (:func:`know_live`).
"""

import functools
import struct
from collections import namedtuple
from dataclasses import dataclass
from types import SimpleNamespace

AXPY = r'''
extern "C" __global__ void axpy(float* y, const float* x, float a, long long n)
{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }
'''
AXPY_SIG = "void(CPointer(float32), CPointer(float32), float32, int64)"
AXPY_SIZES = [8, 8, 4, 8]


def axpy_bytes(y, x, a, n):
    """The parameter bytes of ``axpy(y, x, a, n)`` by its C signature."""
    return [struct.pack("<Q", y), struct.pack("<Q", x), struct.pack("<f", a),
            struct.pack("<q", n)]


@functools.lru_cache(maxsize=None)
def cubin_of(source, name):
    """A cuda.core ``ObjectCode`` (a cubin for sm_90) of CUDA C++ *source*."""
    from cuda.core import Program, ProgramOptions

    return Program(source, "c++", ProgramOptions(arch="sm_90")).compile("cubin")


@functools.lru_cache(maxsize=None)
def axpy_ptx():
    from support.nvrtc import nvrtc_ptx

    return nvrtc_ptx(AXPY, ("-arch=compute_90",), "axpy")


#: a fatbin header and nothing else: loaded as is, nothing in it is read
FATBIN = b"\x50\xed\x55\xba" + b"\x01\x00\x10\x00" + bytes(64)

# -- Triton: a fake CompiledKernel with Triton 3.6's attributes -------------------

TRITON_PTX = r'''
.version 8.0
.target sm_90
.address_size 64
.visible .entry add_kernel(
	.param .u64 .ptr .global .align 1 add_kernel_param_0,
	.param .u64 .ptr .global .align 1 add_kernel_param_1,
	.param .u32 add_kernel_param_2,
	.param .u64 .ptr .global .align 1 add_kernel_param_3,
	.param .u64 .ptr .global .align 1 add_kernel_param_4
)
{ ret; }
'''

# axpy as Triton compiles it: its parameters, then the two scratch pointers
TRITON_AXPY_PTX = r'''
.version 8.0
.target sm_90
.address_size 64
.visible .entry axpy(
	.param .u64 .ptr .global .align 1 axpy_param_0,
	.param .u64 .ptr .global .align 1 axpy_param_1,
	.param .f32 axpy_param_2,
	.param .u64 axpy_param_3,
	.param .u64 .ptr .global .align 1 axpy_param_4,
	.param .u64 .ptr .global .align 1 axpy_param_5
)
{ ret; }
'''

Meta = namedtuple("KernelMetadata", "name num_warps num_ctas shared global_scratch_size "
                  "profile_scratch_size launch_cooperative_grid launch_pdl")
CompiledKernel = type("CompiledKernel", (), {"__module__": "triton.compiler.compiler"})


def fake_triton(**meta):
    """A Triton ``add_kernel(x, out, n, BLOCK: constexpr)``; *meta* replaces
    items of its metadata."""
    k = CompiledKernel()
    values = dict(name="add_kernel", num_warps=4, num_ctas=1, shared=1024,
                  global_scratch_size=0, profile_scratch_size=0,
                  launch_cooperative_grid=False, launch_pdl=False)
    values.update(meta)
    k.metadata = Meta(**values)
    k.src = SimpleNamespace(signature={"x": "*fp32", "out": "*fp32", "n": "i32",
                                       "BLOCK": "constexpr"})
    k.asm = {"cubin": b"\x7fELF fake cubin add_kernel\0", "ptx": TRITON_PTX}
    return k


def fake_triton_axpy():
    """``axpy`` as a Triton ``CompiledKernel`` (a fake, as :func:`fake_triton`)."""
    k = fake_triton(name="axpy", shared=0)
    k.src = SimpleNamespace(signature={"y": "*fp32", "x": "*fp32", "a": "fp32", "n": "i64",
                                       "BLOCK": "constexpr"})
    k.asm = {"cubin": b"\x7fELF fake cubin axpy\0", "ptx": TRITON_AXPY_PTX}
    return k


# -- live handles: fake cuda.core Kernel / CuPy Function and RawKernel ------------

CUKERNEL, CUFUNCTION = 0x7E570000, 0x7E580000
CoreKernel = type("Kernel", (), {"__module__": "cuda.core._module"})
CuPyFunction = type("Function", (), {"__module__": "cupy.cuda.function"})
CuPyRawKernel = type("RawKernel", (), {"__module__": "cupy._core.raw"})
CUkernelHandle = type("CUkernel", (), {"__module__": "cuda.bindings.driver",
                                       "__init__": lambda self, v: setattr(self, "v", v),
                                       "__int__": lambda self: self.v})


def core_kernel(handle=CUKERNEL):
    k = CoreKernel()
    k.handle = CUkernelHandle(handle)  # cuda.bindings' CUkernel: int() is its address
    return k


def cupy_function(ptr=CUFUNCTION):
    f = CuPyFunction()
    f.ptr = ptr
    return f


def cupy_raw_kernel(name="axpy", ptr=CUFUNCTION, cooperative=False):
    k = CuPyRawKernel()
    k.name, k.kernel, k.enable_cooperative_groups = name, cupy_function(ptr), cooperative
    return k


def know_live(rec):
    """Tell recording driver *rec* about the fake live handles of ``axpy``."""
    rec.add_kernel(CUKERNEL, "axpy", AXPY_SIZES, "CUkernel")
    rec.add_kernel(CUFUNCTION, "axpy", AXPY_SIZES, "CUfunction")
    return rec


# -- every source ---------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """How to make ``axpy`` from one source (``make(**kw)``: keywords of
    ``foreign_kernel``), whether it launches a live handle, and the
    parameter bytes it adds after axpy's (Triton's NULL scratch pointers)."""

    make: object
    live: bool = False
    extra: tuple = ()


def _foreign(source, entry="axpy", signature=AXPY_SIG):
    import numba_cuda_launch as ncl

    return lambda **kw: ncl.foreign_kernel(source(), entry, signature, **kw)


#: axpy from each source, by the name of the source
SOURCES = {
    "cubin": Source(_foreign(lambda: cubin_of(AXPY, "axpy").code)),
    "PTX": Source(_foreign(axpy_ptx)),
    "fatbin": Source(_foreign(lambda: FATBIN)),
    "cuda.core ObjectCode": Source(_foreign(lambda: cubin_of(AXPY, "axpy"))),
    "Triton": Source(_foreign(fake_triton_axpy, None, None), extra=(bytes(8), bytes(8))),
    "cuda.core Kernel": Source(_foreign(core_kernel), live=True),
    "CuPy RawKernel": Source(_foreign(cupy_raw_kernel, None), live=True),
    "CuPy Function": Source(_foreign(cupy_function), live=True),
}
#: the sources launched from an image of ours (not a live handle)
IMAGE_SOURCES = sorted(name for name, s in SOURCES.items() if not s.live)
