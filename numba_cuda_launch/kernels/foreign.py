"""Kernels from other compilers as a kernel source: machine code (cubin,
fatbin or PTX), cuda.core, CuPy and Triton. :func:`foreign_kernel` makes a
:class:`ForeignKernel` (an image, or a live driver handle another library
loaded, with an entry point whose C parameters are declared as Numba types),
typed in CPU code as :class:`ForeignKernelType`. The readers take each
source's public attributes, duck-typed (nothing here imports cuda.core, CuPy
or Triton). docs/kernel-sources.md.
"""

from __future__ import annotations

import inspect
import keyword
import numbers
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir
from numba.core import types
from numba.core.datamodel import models
from numba.core.imputils import lower_cast, lower_constant
from numba.core.typeconv import Conversion
from numba.extending import register_model, typeof_impl

from numba_cuda_launch.compat.cuda_target import parse_kernel_signature
from numba_cuda_launch.compat.ptx import ptx_entries, ptx_param_sizes
from numba_cuda_launch.cudadrv import fatbin
from numba_cuda_launch.cudadrv.paraminfo import loaded_param_sizes
from numba_cuda_launch.errors import CUDA_ERROR_INVALID_HANDLE, error_name
from numba_cuda_launch.kernels import SOURCES, KernelSource, KernelType, register

__all__ = ["SUPPORTED", "ForeignKernel", "ForeignKernelType", "PointerParam", "SOURCE",
           "foreign_kernel", "LiveHandle", "live_kernel_name", "read_image", "image_kind",
           "cubin_functions", "c_parameter_problem", "c_sizes"]

#: the releases of the other compilers whose kernel objects are read here
SUPPORTED = {"cuda-core": "1.2", "cupy": "14", "triton": "3.6"}

_i8p = ir.IntType(8).as_pointer()
_FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian
_ELF_MAGIC = b"\x7fELF"


@dataclass(eq=False)
class ForeignKernel:
    """A kernel of another compiler, launchable as ``kernel[g, b, s, shm](args)``
    from ``@njit``/``@cfunc`` code. Build it with
    :func:`numba_cuda_launch.foreign_kernel`.

    ``c_types`` are the Numba types of the entry point's C parameters (a
    ``CPointer`` or ``voidptr`` for a pointer); ``formal`` the types a launch
    converts its arguments to. ``block``/``sharedmem`` are what the kernel
    was compiled for (Triton: ``num_warps * 32`` threads and the shared
    memory it uses), None/0 when the launch chooses.

    A kernel loaded by another library has no ``image`` (None) but a live
    ``handle``: the address of a ``CUkernel`` (``handle_kind`` "CUkernel",
    context-independent) or of a ``CUfunction`` ("CUfunction", which
    launches only where the context it was loaded in is current); ``owner``
    is the object that keeps it loaded."""

    name: str
    entry: str
    image: bytes | None = field(repr=False)
    kind: str | None  # "cubin", "fatbin" or "ptx"; None for a live handle
    source: str  # where it came from, for messages
    params: tuple[inspect.Parameter, ...]  # each C parameter
    c_types: tuple[Any, ...]  # Numba types
    formal: tuple[Any, ...]
    block: tuple[int, ...] | None = None
    sharedmem: int = 0
    handle: int = 0
    handle_kind: str | None = None
    owner: object = field(default=None, repr=False)
    #: every launch is a programmatic dependent one (Triton's ``launch_pdl``)
    dependent: bool = False

    @property
    def signature(self) -> Any:
        """The declared C signature, as a Numba signature."""
        return types.void(*self.c_types)


def image_kind(data):
    """``"cubin"``, ``"fatbin"`` or ``"ptx"`` for image bytes *data*; ValueError
    for anything else (an LTO-IR or host object cannot be loaded as is)."""
    head = bytes(data[:4])
    if head == _ELF_MAGIC:
        return "cubin"
    if head == _FATBIN_MAGIC:
        return "fatbin"
    text = bytes(data[:4096]).lstrip()
    if b".version" in text or b".target" in text or text.startswith(b"//"):
        return "ptx"
    raise ValueError("the image is not a cubin (ELF), a fatbin or PTX text (it starts "
                     "with %r)" % head)


def read_image(image):
    """``(bytes, kind)`` of *image*: bytes (a cubin, fatbin or PTX), PTX text
    (a ``str`` holding a ``.entry``), or a path (``str``/``os.PathLike``) of
    such a file. PTX is NUL-terminated, as the driver reads it."""
    if isinstance(image, str) and ".entry" in image and not os.path.isfile(image):
        data = image.encode()
    elif isinstance(image, (str, os.PathLike)):
        try:
            with open(image, "rb") as f:
                data = f.read()
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            raise ValueError("%r is neither PTX text (it has no .entry) nor a file that can "
                             "be read (%s)" % (image, exc)) from None
    elif isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
    else:
        raise TypeError("an image is bytes (cubin, fatbin or PTX), PTX text or a file "
                        "path, got %s" % type(image).__name__)
    if not data:
        raise ValueError("the image is empty (0 bytes)")
    kind = image_kind(data)
    if kind == "ptx" and not data.endswith(b"\0"):
        data += b"\0"
    return data, kind


_ELF_HEADER = struct.Struct("<16x8xQQQ4xHHHHHH")  # e_entry .. e_shstrndx of ELF64
_ELF_SECTION = struct.Struct("<IIQQQQIIQQ")
_ELF_SYMBOL = struct.Struct("<IBBHQQ")
_SHT_SYMTAB, _STT_FUNC = 2, 2


def cubin_functions(data):
    """The names of the functions a cubin (64-bit little-endian ELF bytes)
    defines in its symbol table; ValueError when it is truncated or is not
    such an ELF file."""
    if len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ValueError("the cubin is not a 64-bit little-endian ELF file of at least 64 "
                         "bytes (it is %d bytes)" % len(data))
    _, _, shoff, _, _, _, shentsize, shnum, _ = _ELF_HEADER.unpack_from(data)
    end = shoff + shentsize * shnum
    if shentsize < _ELF_SECTION.size or end > len(data):
        raise ValueError("the cubin is truncated or malformed: its section headers end at "
                         "byte %d; it has %d" % (end, len(data)))
    sections = [_ELF_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_SYMTAB:
            continue
        if link >= shnum or offset + size > len(data) or entsize < _ELF_SYMBOL.size:
            raise ValueError("the cubin is truncated or malformed: its symbol table lies "
                             "beyond its %d bytes" % len(data))
        strings = sections[link][4]
        for at in range(offset, offset + size - entsize + 1, entsize):
            name, info, _, section, _, _ = _ELF_SYMBOL.unpack_from(data, at)
            if info & 0xF == _STT_FUNC and section and strings + name < len(data):
                names.add(bytes(data[strings + name:data.find(b"\0", strings + name)]))
    return names


def _class_name(obj, package):
    """The name of *obj*'s class when *package* defines it, else None."""
    cls = type(obj)
    return cls.__name__ if cls.__module__.split(".")[0] == package else None


@dataclass(frozen=True)
class LiveHandle:
    """A kernel another library has loaded: the address of its ``CUkernel``
    or ``CUfunction`` (*kind*), its entry name if the object knows it, and
    the object that keeps it loaded (*owner*)."""

    address: int
    kind: str  # "CUkernel" or "CUfunction"
    name: str | None
    owner: object
    source: str  # for messages


_live_names: dict[int, str] = {}  # handle address -> kernel name, for messages (interop.aot)


def live_kernel_name(address):
    """The name of the live-handle kernel at *address* made in this
    process, or None."""
    return _live_names.get(address)


def remember_live_kernel(address, name):
    """Note that live-handle kernel *name* has address *address*."""
    _live_names[address] = name


def _address(obj, attr, source):
    """The driver handle ``obj.<attr>`` of a live kernel as an integer:
    TypeError when it is missing or is not an integer (cuda.bindings'
    handles convert with ``int()``, floats and strings are refused)."""
    value = getattr(obj, attr, None)
    if value is None:
        raise TypeError("the %s has no %r (its driver handle), so it holds no loaded "
                        "kernel" % (source, attr))
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (float, str, bytes, bool, numbers.Number)) or \
            not hasattr(type(value), "__int__"):
        raise TypeError("the %s's %r is %r (%s), not a driver handle (an integer address)"
                        % (source, attr, value, type(value).__name__))
    return int(value)


def _live_handle(obj, attr, kind, source):
    return LiveHandle(_address(obj, attr, source), kind, None, obj, source)


def from_cuda_core(obj):
    """The image of a cuda.core ``ObjectCode`` (its ``code``: bytes or a
    path), a :class:`LiveHandle` of a cuda.core ``Kernel`` (its
    ``handle``, a ``CUkernel``; cuda.core keeps no name for it), or None if
    *obj* is neither."""
    cls = _class_name(obj, "cuda")
    if cls == "Kernel":
        return _live_handle(obj, "handle", "CUkernel", "cuda.core Kernel")
    if cls is None or not type(obj).__module__.startswith("cuda.core"):
        return None
    if cls != "ObjectCode":
        raise TypeError("a cuda.core %s is not a kernel: pass an ObjectCode (what "
                        "Program.compile('cubin') returns) with entry=..., or the Kernel "
                        "ObjectCode.get_kernel(name) returns" % cls)
    code_type = getattr(obj, "code_type", None)
    if code_type not in ("cubin", "ptx", "fatbin"):
        raise ValueError("a cuda.core ObjectCode of type %r cannot be loaded as is; "
                         "link it to a cubin first (cuda.core.Linker)" % (code_type,))
    return getattr(obj, "code", None)


def from_cupy(obj):
    """A :class:`LiveHandle` of a CuPy ``RawKernel`` (what ``RawModule.
    get_function`` returns too: its ``kernel``, compiled or loaded by CuPy
    for the current device) or of a ``cupy.cuda.Function`` (``RawKernel.
    kernel``); None if *obj* is neither. Both are ``CUfunction`` handles
    of the context current when CuPy loaded them (the device's primary
    context). Cooperative kernels are refused."""
    cls = _class_name(obj, "cupy")
    if cls is None:
        return None
    if cls == "Function":
        return _live_handle(obj, "ptr", "CUfunction", "CuPy Function")
    if cls != "RawKernel":
        raise TypeError(
            "a CuPy %s is not a kernel: pass a cupy.RawKernel (RawModule.get_function("
            "name) returns one) or its .kernel (a cupy.cuda.Function)" % cls)
    if getattr(obj, "enable_cooperative_groups", False):
        raise ValueError("CuPy RawKernel %r enables cooperative groups, which need a "
                         "cooperative launch; launches of foreign kernels from compiled code "
                         "are plain ones" % obj.name)
    function = getattr(obj, "kernel", None)
    if function is None:
        raise TypeError("the CuPy RawKernel %r has no 'kernel' attribute (its "
                        "cupy.cuda.Function), so it holds no loaded kernel"
                        % (getattr(obj, "name", None),))
    return LiveHandle(_address(function, "ptr", "CuPy RawKernel's kernel"), "CUfunction",
                      getattr(obj, "name", None), obj, "CuPy RawKernel")


# Triton's own names of parameter types (backends/nvidia/driver.py:ty_to_cpp).
_TRITON_TYPES = {
    "i1": types.int8, "i8": types.int8, "i16": types.int16, "i32": types.int32,
    "i64": types.int64, "u1": types.uint8, "u8": types.uint8, "u16": types.uint16,
    "u32": types.uint32, "u64": types.uint64, "fp16": types.float16,
    "fp32": types.float32, "f32": types.float32, "fp64": types.float64,
}
_TRITON_POINTEES = dict(_TRITON_TYPES, bf16=types.uint16, fp8e4nv=types.uint8,
                        fp8e5=types.uint8)


def _triton_type(name, ty):
    if ty.startswith("*"):
        pointee = _TRITON_POINTEES.get(ty.lstrip("*k"))
        return types.voidptr if pointee is None else types.CPointer(pointee)
    if ty in _TRITON_TYPES:
        return _TRITON_TYPES[ty]
    raise TypeError("parameter %r has Triton type %r; launches from compiled code take "
                    "pointers, integers and fp16/fp32/fp64 scalars" % (name, ty))


#: the most shared memory any GPU gives one block so far (compute capability
#: 9.0 and 10.0: 227 KiB, ``CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN``)
MAX_BLOCK_SHARED = 227 * 1024
_TRITON_MAKE = ("pass the CompiledKernel that triton.compile(...), a launch of the @triton.jit "
                "function or its .warmup(...) returns, compiled for an NVIDIA GPU")


def _triton_field(meta, field, default=None, lowest=None, highest=None):
    """Field *field* of a Triton kernel's metadata *meta* (*default* when it
    is missing and a default is given): TypeError when it is missing or not
    an integer (a bool for the ``launch_*`` flags), ValueError when it lies
    outside *lowest*..*highest*."""
    value = getattr(meta, field, default)
    if value is None:
        raise TypeError("the Triton kernel's metadata has no %r; %s" % (field, _TRITON_MAKE))
    if isinstance(default, bool):
        if not isinstance(value, (bool, numbers.Integral)):
            raise TypeError("the Triton kernel's metadata.%s is %r (%s), not a bool"
                            % (field, value, type(value).__name__))
        return bool(value)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError("the Triton kernel's metadata.%s is %r (%s), not an integer"
                        % (field, value, type(value).__name__))
    value = int(value)
    if lowest is not None and not lowest <= value <= highest:
        raise ValueError("the Triton kernel's metadata.%s is %d; it must be %d..%s"
                         % (field, value, lowest, "2**32-1" if highest == 2**32 - 1
                            else highest))
    return value


def _triton_asm(obj, key, kind):
    """``obj.asm[key]``: the Triton kernel's *key* (cubin or PTX), checked
    to be of *kind* (bytes or str)."""
    asm = getattr(obj, "asm", None)
    if asm is None or not hasattr(asm, "get"):
        raise TypeError("the Triton kernel has no 'asm' (its compiled forms); %s" % _TRITON_MAKE)
    value = asm.get(key)
    if value is None:
        raise ValueError("the Triton kernel has no %s (its asm holds %s): only kernels "
                         "compiled for an NVIDIA GPU launch; %s"
                         % (key, ", ".join(sorted(map(str, asm))) or "nothing", _TRITON_MAKE))
    if kind is bytes and isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if kind is str and isinstance(value, str):
        return value
    raise TypeError("the Triton kernel's asm[%r] is %s, not %s"
                    % (key, type(value).__name__, "bytes" if kind is bytes else "PTX text"))


def _triton_signature(obj):
    """``(names, c_types)`` of a Triton kernel's non-constexpr parameters,
    from its ``src.signature`` (a dict: name -> Triton type)."""
    signature = getattr(getattr(obj, "src", None), "signature", None)
    if signature is None:
        raise TypeError("the Triton kernel has no src.signature (the types of its "
                        "parameters); %s" % _TRITON_MAKE)
    if not isinstance(signature, dict):
        raise TypeError("the Triton kernel's src.signature is a %s (%r); Triton's signature "
                        "is a dict of parameter names to types, e.g. {'x': '*fp32', "
                        "'n': 'i32', 'BLOCK': 'constexpr'}" % (type(signature).__name__,
                                                               signature))
    names, c_types = [], []
    for pname, ty in signature.items():
        if not isinstance(pname, str) or not pname.isidentifier():
            raise TypeError("the Triton kernel's src.signature names a parameter %r; "
                            "parameter names are Python identifiers" % (pname,))
        if ty == "constexpr":
            continue
        if not isinstance(ty, str) or ty.startswith(("tensordesc", "nvTmaDesc")):
            raise TypeError("parameter %r has type %r (a tuple or tensor descriptor), "
                            "which is not launched from compiled code" % (pname, ty))
        names.append(pname)
        c_types.append(_triton_type(pname, ty))
    return names, c_types


def triton_name(obj):
    """The entry name of a Triton ``CompiledKernel`` (its
    ``metadata.name``); None when it has none."""
    name = getattr(getattr(obj, "metadata", None), "name", None)
    return name if isinstance(name, str) and name else None


def from_triton(obj):
    """``(cubin, PTX, entry, names, c_types, extras, block, sharedmem,
    dependent)`` of a Triton ``CompiledKernel``, or None if *obj* is not one
    (*dependent*: compiled with ``launch_pdl``, each launch a programmatic
    dependent one). Constexpr
    parameters are compiled in; the trailing scratch pointers Triton 3.x
    adds are *extras* (passed NULL). TypeError or ValueError naming the
    field that is missing or out of range, or saying why a kernel needs
    more than a plain launch."""
    cls = _class_name(obj, "triton")
    if cls is None:
        return None
    if cls != "CompiledKernel":
        raise TypeError("a Triton %s is not a compiled kernel; %s" % (cls, _TRITON_MAKE))
    meta = getattr(obj, "metadata", None)
    if meta is None:
        raise TypeError("the Triton kernel has no metadata; %s" % _TRITON_MAKE)
    name = triton_name(obj)
    if name is None:
        raise TypeError("the Triton kernel's metadata.name (its entry point) is %r, not a "
                        "name; %s" % (getattr(meta, "name", None), _TRITON_MAKE))
    for attr, what in (("global_scratch_size", "a global scratch buffer"),
                       ("profile_scratch_size", "a profiling scratch buffer")):
        if _triton_field(meta, attr, 0):
            raise ValueError("the Triton kernel needs %s, which Triton's launcher allocates "
                             "per launch" % what)
    if _triton_field(meta, "launch_cooperative_grid", False):
        raise ValueError("the Triton kernel was compiled for a cooperative launch, which is "
                         "not done from compiled code")
    # compiled for programmatic dependent launch: each launch is a dependent one,
    # as Triton's own launcher makes it
    dependent = bool(_triton_field(meta, "launch_pdl", False))
    num_ctas = _triton_field(meta, "num_ctas", 1, 1, 2**31 - 1)
    if num_ctas != 1:
        raise ValueError("the Triton kernel has num_ctas=%d (a cluster launch with a scaled "
                         "grid); compile it with num_ctas=1" % num_ctas)
    # Triton takes num_warps as a power of two; 32 warps are 1024 threads,
    # the most a block has.
    num_warps = _triton_field(meta, "num_warps")
    if not 1 <= num_warps <= 32 or num_warps & (num_warps - 1):
        raise ValueError("the Triton kernel's metadata.num_warps is %d; Triton's num_warps "
                         "is a power of two, 1..32 (blocks of num_warps * 32 threads, at "
                         "most 1024)" % num_warps)
    shared = _triton_field(meta, "shared", None, 0, 2**32 - 1)
    if shared > MAX_BLOCK_SHARED:
        raise ValueError("the Triton kernel's metadata.shared is %d bytes; no GPU gives a "
                         "block more than %d bytes of shared memory (227 KiB): compile it "
                         "with smaller blocks or fewer stages" % (shared, MAX_BLOCK_SHARED))
    names, c_types = _triton_signature(obj)
    cubin, ptx = _triton_asm(obj, "cubin", bytes), _triton_asm(obj, "ptx", str)
    sizes = ptx_param_sizes(ptx, name)
    extras = ("global_scratch", "profile_scratch")[:max(0, len(sizes) - len(names))] \
        if sizes else ()
    return (cubin, ptx.encode(), name, names, c_types, extras, (num_warps * 32, 1, 1), shared,
            dependent)


_C_SCALARS = (types.Integer, types.Float, types.Boolean)


def c_parameter_problem(ty):
    """Why Numba type *ty* cannot be a declared C parameter, or None: C
    parameters are pointers (``CPointer``, ``voidptr``), integers of every
    width, float16 (its bits), float32, float64 and bool."""
    if ty == types.voidptr or isinstance(ty, types.CPointer):
        return None
    if isinstance(ty, _C_SCALARS):
        return None
    if isinstance(ty, types.Array):
        return ("an array is not a C parameter; declare the data pointer, "
                "CPointer(%s), and pass the array" % ty.dtype)
    return ("%s is not a C parameter type here (structs and complex numbers by value "
            "are not packed: pass them through device memory); declare pointers, "
            "integers, float16/32/64 or bool" % ty)


_I8 = ir.IntType(8)


def _c_parameter(ty):
    """``(size in bytes, LLVM type)`` of a C parameter of declared type *ty*."""
    if not isinstance(ty, _C_SCALARS):
        return 8, _I8.as_pointer()
    if isinstance(ty, types.Boolean):
        return 1, _I8
    if ty == types.float32:
        return 4, ir.FloatType()
    if ty == types.float64:
        return 8, ir.DoubleType()
    return ty.bitwidth // 8, ir.IntType(ty.bitwidth)  # integers, float16 as its bits


def c_sizes(c_types):
    """The byte sizes of parameters of declared C types *c_types*."""
    return [_c_parameter(t)[0] for t in c_types]


class ForeignKernels(KernelSource):
    """The source of :class:`ForeignKernel`: one overload (the declared
    signature), nothing to compile, one parameter per argument."""

    name = "foreign kernel"

    def claims(self, obj):
        return isinstance(obj, ForeignKernel)

    def kernel_name(self, kernel):
        return kernel.name

    def parameters(self, kernel):
        return list(kernel.params)

    def param_names(self, kernel):
        # Trailing parameters with defaults (Triton's scratch pointers) are
        # the launch's, passed NULL; callers give the declared ones.
        return [p.name for p in kernel.params if p.default is inspect.Parameter.empty]

    def qualified_name(self, kernel):
        return "foreign.%s" % kernel.entry

    def compiled_kernels(self, kernel):
        return {kernel.formal: kernel}

    def simulation_refusal(self, kernel):
        if kernel.image is None:
            what = "the %s of a %s" % (kernel.handle_kind, kernel.source)
        else:
            what = "a %s image%s" % ("PTX" if kernel.kind == "ptx" else kernel.kind,
                                      "" if kernel.source == "image" else " of " + kernel.source)
        return "this foreign kernel is machine code (%s) with no Python to simulate" % what

    def entry_name(self, kernel):
        return kernel.entry

    def image(self, kernel):
        return kernel.image

    def live_handle(self, kernel):
        return (kernel.handle, kernel.handle_kind) if kernel.handle else None

    def dependent(self, kernel):
        return kernel.dependent

    def param_types(self, kernel):
        return [_c_parameter(t)[1] for t in kernel.c_types]

    def flatten(self, context, builder, argtypes, values):
        # A bool parameter is a byte; any other value is its parameter as it
        # is (float16 as its 2 bytes, a pointer as its address).
        return [builder.zext(value, _I8) if isinstance(ty, types.Boolean) else value
                for ty, value in zip(argtypes, values)]


def make_parameters(names, extras=()):
    """``inspect.Parameter`` objects for C parameters *names*, then *extras*
    defaulting to 0 (NULL)."""
    p = inspect.Parameter
    return tuple([p(n, p.POSITIONAL_OR_KEYWORD) for n in names]
                 + [p(n, p.POSITIONAL_OR_KEYWORD, default=0) for n in extras])


#: The source of foreign kernels.
SOURCE = register(ForeignKernels())


class PointerParam(types.Type):
    """A kernel's C pointer parameter (``dtype*``; *dtype* None for ``void*``)
    as a launch's formal type: arrays of *dtype* (their data pointer),
    ``CPointer(dtype)``, ``voidptr`` and integer addresses convert to it."""

    #: constant integers given for it must be 64-bit addresses (selection.py)
    address_bits = 64

    def __init__(self, dtype):
        self.dtype = dtype
        super().__init__(name="%s* (address)" % ("void" if dtype is None else dtype))

    def can_convert_from(self, typingctx, other):
        if isinstance(other, types.Integer) or other == types.voidptr:
            return Conversion.unsafe
        if isinstance(other, (types.Array, types.CPointer)) and \
                (self.dtype is None or other.dtype == self.dtype):
            return Conversion.safe
        return None


register_model(PointerParam)(models.OpaqueModel)


@lower_cast(types.Array, PointerParam)
def _array_address(context, builder, fromty, toty, val):
    return builder.bitcast(context.make_array(fromty)(context, builder, val).data, _i8p)


@lower_cast(types.CPointer, PointerParam)
@lower_cast(types.RawPointer, PointerParam)
def _pointer_address(context, builder, fromty, toty, val):
    return builder.bitcast(val, _i8p)


@lower_cast(types.Integer, PointerParam)
def _integer_address(context, builder, fromty, toty, val):
    return builder.inttoptr(val, _i8p)


@lower_constant(PointerParam)
def _constant_address(context, builder, ty, pyval):
    return ir.Constant(ir.IntType(64), int(pyval)).inttoptr(_i8p)


class ForeignKernelType(KernelType):
    """The CPU type of a :class:`ForeignKernel`."""

    source = SOURCE

    def __init__(self, kernel):
        super().__init__(kernel, "ForeignKernel(%s)" % kernel.name)


@typeof_impl.register(ForeignKernel)
def _typeof_foreign_kernel(val, c):
    return ForeignKernelType(val)


def _formal(ty):
    if ty == types.voidptr:
        return PointerParam(None)
    if isinstance(ty, types.CPointer):
        return PointerParam(ty.dtype)
    return ty


def _declared(what, signature, names):
    """The C parameter types of *signature* and their names."""
    argtypes = parse_kernel_signature(
        signature, "foreign_kernel(%s)" % what,
        "foreign_kernel(%s): signature %r does not parse as a Numba signature such as "
        "'void(CPointer(float32), float32, int64)'" % (what, signature))
    argtypes = [types.unliteral(t) for t in argtypes]  # IntegerLiteral(3): an int64
    names = _param_names(what, names, len(argtypes))
    for name, ty in zip(names, argtypes):
        problem = c_parameter_problem(ty)
        if problem:
            raise TypeError("foreign_kernel(%s): parameter %r: %s" % (what, name, problem))
    return list(argtypes), names


def _param_names(what, names, count):
    """The *count* parameter names given as *names* (None: ``arg0``, ...),
    checked: a list or tuple of distinct Python identifiers."""
    if names is None:
        return ["arg%d" % i for i in range(count)]
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise TypeError("foreign_kernel(%s): param_names must be a list of %d names, one per "
                        "parameter, got %s %r" % (what, count, type(names).__name__, names))
    if len(names) != count:
        raise TypeError("foreign_kernel(%s): %d parameter names for %d parameters (%r)"
                        % (what, len(names), count, list(names)))
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise TypeError("foreign_kernel(%s): param_names must be Python identifiers (they "
                            "name the parameters in messages and jax_kernel scalars); got %r"
                            % (what, name))
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise TypeError("foreign_kernel(%s): param_names names %s more than once"
                        % (what, ", ".join(repr(n) for n in repeated)))
    return list(names)


def _check_entry_name(what, entry):
    """Refuse an entry that is not a kernel name (a str without NUL); None
    passes (a loaded kernel's entry is optional)."""
    if entry is None:
        return
    if not isinstance(entry, str) or not entry or "\0" in entry:
        raise TypeError("foreign_kernel(%s): entry must be the entry point's name (its "
                        "extern \"C\" name, a str), got %s %r"
                        % (what, type(entry).__name__, entry))


def _check_entry(data, kind, entry, c_types, extras=()):
    """Refuse a signature the image contradicts: PTX declares its parameters'
    sizes; a cubin names its entry points in its symbol table."""
    if kind == "ptx":
        text = data.rstrip(b"\0").decode(errors="replace")
        try:
            sizes = ptx_param_sizes(text, entry)
        except ValueError as exc:  # a parameter declaration it cannot read
            raise ValueError("foreign_kernel(%s): the PTX's %s" % (entry, exc)) from None
        if sizes is None:
            entries = ptx_entries(text)
            raise ValueError("foreign_kernel(%s): the PTX has no entry %r (%s)" % (
                entry, entry, "its entry points: " + ", ".join(entries) if entries else
                "it declares no .entry outside comments"))
        expected = c_sizes(c_types) + [8] * len(extras)
        if sizes != expected:
            raise ValueError(
                "foreign_kernel(%s): entry %r takes parameters of %s bytes; the signature "
                "declares %s" % (entry, entry, sizes, expected))
    elif kind == "cubin":
        try:
            found = entry.encode() in cubin_functions(data)
        except ValueError as exc:  # a malformed cubin, an entry UTF-8 cannot encode
            raise ValueError("foreign_kernel(%s): source: %s" % (entry, exc)) from None
        if not found:
            raise ValueError("foreign_kernel(%s): the cubin has no entry %r" % (entry, entry))
    elif kind == "fatbin":
        truncated = fatbin.truncation(data)
        if truncated:
            raise ValueError("foreign_kernel(%s): the fatbin is truncated: %s" % (entry, truncated))


def _check_loaded(what, live, c_types, names):
    """Refuse a signature the driver's view of a loaded kernel's parameters
    contradicts (a driver before CUDA 12.4, or no driver: not checked)."""
    status, sizes = loaded_param_sizes(live.address, live.kind)
    if status == CUDA_ERROR_INVALID_HANDLE:
        raise ValueError("foreign_kernel(%s): the driver does not know the %s %#x of the %s "
                         "(%s)" % (what, live.kind, live.address, live.source,
                                   error_name(status)))
    if sizes is None:
        return
    declared = c_sizes(c_types)
    if len(sizes) != len(declared):
        raise ValueError("foreign_kernel(%s): the kernel takes %d parameters (%s bytes); the "
                         "signature declares %d (%s bytes)"
                         % (what, len(sizes), sizes, len(declared), declared))
    for name, ty, want, got in zip(names, c_types, declared, sizes):
        if want != got:
            raise ValueError("foreign_kernel(%s): parameter %r is declared %s (%d bytes); the "
                             "kernel's takes %d bytes" % (what, name, ty, want, got))


def foreign_kernel(source: Any, entry: str | None = None, signature: Any = None, *,
                   param_names: Sequence[str] | None = None) -> ForeignKernel:
    """A kernel of another compiler, launchable from ``@njit``/``@cfunc`` code
    as ``kernel[grid, block, stream, sharedmem](args...)``.

    *source*: a cubin, fatbin or PTX image (bytes, PTX text or a file path)
    or a cuda.core ``ObjectCode``, with *entry* (the ``extern "C"`` name);
    a cuda.core ``Kernel``, a CuPy ``RawKernel`` or ``cupy.cuda.Function``
    (their loaded handle is launched; *entry* optional); a Triton
    ``CompiledKernel`` (its signature, block and shared memory come with
    it). *signature* is a Numba signature of the C parameters, e.g.
    ``"void(CPointer(float32), float32, int64)"``; *param_names* names them
    in messages. Raises TypeError or ValueError naming what does not fit
    (docs/kernel-sources.md)."""
    what = _display_name(source, entry)
    try:
        triton = from_triton(source)
        found = None
        if triton is None:
            found = from_cuda_core(source)  # an image may be empty bytes: not "or"
            if found is None:
                found = from_cupy(source)
    except (TypeError, ValueError) as exc:
        raise type(exc)("foreign_kernel(%s): %s" % (what, exc)) from None
    if triton is not None:
        return _from_triton(triton, entry, signature, param_names)
    if isinstance(found, LiveHandle):
        return _from_live(found, entry, signature, param_names)
    for other in SOURCES:
        if other.claims(source):
            raise TypeError("foreign_kernel(%s): this is a %s already, launched as it is "
                            "(kernel[griddim, blockdim](args...)); foreign_kernel() takes "
                            "the kernels of other compilers"
                            % (what, "ForeignKernel" if isinstance(source, ForeignKernel)
                               else other.name + " kernel"))
    origin = "image"
    if found is not None:
        source, origin = found, "cuda.core ObjectCode"
    if entry is None:
        raise TypeError("foreign_kernel(%s): give the entry point's name (entry=...)" % what)
    _check_entry_name(what, entry)
    _require_signature(entry, signature)
    try:
        data, kind = read_image(source)
    except (TypeError, ValueError) as exc:
        raise type(exc)("foreign_kernel(%s): source: %s" % (entry, exc)) from None
    c_types, names = _declared(entry, signature, param_names)
    _check_entry(data, kind, entry, c_types)
    return _build(entry, data, kind, origin, names, c_types)


def _display_name(source, entry):
    """What messages call the kernel made from *source*: its name, else
    *entry*, else the class of *source*."""
    for name in (triton_name(source), getattr(source, "name", None), entry):
        if isinstance(name, str) and name:
            return name
    return type(source).__name__


def _from_triton(triton, entry, signature, param_names):
    """The ForeignKernel of a Triton kernel read by :func:`from_triton`."""
    image, ptx, name, names, c_types, extras, block, shared, dependent = triton
    if signature is not None:
        raise TypeError("foreign_kernel(%s): a Triton kernel declares its own signature "
                        "(src.signature); leave signature out" % name)
    if param_names is not None:  # other names than its signature's, checked alike
        names = _param_names(name, param_names, len(names))
    if entry is not None and entry != name:
        raise ValueError("foreign_kernel(%s): entry %r given, but the Triton kernel's entry "
                         "point is %r (its metadata.name); leave entry out"
                         % (name, entry, name))
    _check_entry(ptx, "ptx", name, c_types, extras)
    return _build(name, image, "cubin", "Triton", names, c_types, extras, block=block,
                  sharedmem=shared, dependent=dependent)


def _require_signature(what, signature):
    if signature is None:
        raise TypeError("foreign_kernel(%s): give the C signature of the entry point as a "
                        "Numba signature, e.g. signature='void(CPointer(float32), int64)'"
                        % what)


def _from_live(live, entry, signature, param_names):
    """The ForeignKernel of a kernel another library loaded (*live*)."""
    _check_entry_name(entry or live.source, entry)
    name = entry or live.name or "%s %#x" % (live.source, live.address)
    if not live.address:
        raise ValueError("foreign_kernel(%s): the %s holds no loaded kernel (its %s is NULL)"
                         % (name, live.source, live.kind))
    if not 0 < live.address < 1 << 64:
        raise ValueError("foreign_kernel(%s): the %s's %s is %d, not an address (addresses "
                         "are 1..2**64-1)" % (name, live.source, live.kind, live.address))
    _require_signature(name, signature)
    c_types, names = _declared(name, signature, param_names)
    _check_loaded(name, live, c_types, names)
    remember_live_kernel(live.address, name)
    return _build(name, None, None, live.source, names, c_types, handle=live.address,
                  handle_kind=live.kind, owner=live.owner)


def _build(entry, data, kind, origin, names, c_types, extras=(), **more):
    c_types = tuple(c_types) + (types.voidptr,) * len(extras)
    return ForeignKernel(
        name=entry, entry=entry, image=data, kind=kind, source=origin,
        params=make_parameters(names, extras), c_types=c_types,
        formal=tuple(_formal(t) for t in c_types), **more)
