"""Kernels from other compilers: machine code, cuda.core, CuPy and Triton.

A :class:`ForeignKernel` is an image (cubin, fatbin or PTX) or a live driver
handle another library loaded, with an entry point whose C parameters are
declared as Numba types. The readers below take it from each source's public
attributes, duck-typed (nothing here imports cuda.core, CuPy or Triton), and
:data:`KERNELS` is its adapter (docs/kernel-sources.md).
"""

import inspect
import numbers
import os
import struct
from dataclasses import dataclass, field

from llvmlite import ir
from numba.core import types

from numba_cuda_launch.compat.numba_cuda import KernelAdapter, simulator_enabled, simulator_refusal
from numba_cuda_launch.compat.ptx import ptx_param_sizes

__all__ = ["SUPPORTED", "ForeignKernel", "LiveHandle", "live_kernel_name",
           "remember_live_kernel", "read_image", "image_kind", "cubin_functions",
           "from_cuda_core", "from_cupy", "from_triton", "c_parameter_problem", "c_sizes",
           "make_parameters", "KERNELS"]

#: the releases of the other compilers whose kernel objects are read here
SUPPORTED = {"cuda-core": "1.2", "cupy": "14", "triton": "3.6"}

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
    image: bytes = field(repr=False)
    kind: str  # "cubin", "fatbin" or "ptx"; None for a live handle
    source: str  # where it came from, for messages
    params: tuple  # inspect.Parameter of each C parameter
    c_types: tuple
    formal: tuple
    block: tuple = None
    sharedmem: int = 0
    handle: int = 0
    handle_kind: str = None
    owner: object = field(default=None, repr=False)

    @property
    def signature(self):
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
    name: str
    owner: object
    source: str  # for messages


_live_names = {}  # handle address -> kernel name, for messages (interop.aot)


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
    if cls != "ObjectCode":
        return None
    if obj.code_type not in ("cubin", "ptx", "fatbin"):
        raise ValueError("a cuda.core ObjectCode of type %r cannot be loaded as is; "
                         "link it to a cubin first (cuda.core.Linker)" % obj.code_type)
    return obj.code


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
    raise TypeError("Triton kernel parameter %r has type %r; launches from compiled code "
                    "take pointers, integers and fp16/fp32/fp64 scalars" % (name, ty))


def from_triton(obj):
    """``(cubin, PTX, entry, names, c_types, extras, block, sharedmem)`` of a
    Triton ``CompiledKernel``, or None if *obj* is not one. Constexpr
    parameters are compiled in; the trailing scratch pointers Triton 3.x
    adds are *extras* (passed NULL). Kernels that need more than a plain
    launch are refused with the reason."""
    if _class_name(obj, "triton") != "CompiledKernel":
        return None
    meta = obj.metadata
    name = meta.name
    for attr, what in (("global_scratch_size", "a global scratch buffer"),
                       ("profile_scratch_size", "a profiling scratch buffer")):
        if getattr(meta, attr, 0):
            raise ValueError("Triton kernel %r needs %s, which Triton's launcher allocates "
                             "per launch" % (name, what))
    for attr, what in (("launch_cooperative_grid", "a cooperative launch"),
                       ("launch_pdl", "programmatic dependent launch")):
        if getattr(meta, attr, False):
            raise ValueError("Triton kernel %r was compiled for %s, which is not done "
                             "from compiled code" % (name, what))
    if getattr(meta, "num_ctas", 1) != 1:
        raise ValueError("Triton kernel %r has num_ctas=%d (a cluster launch with a scaled "
                         "grid); compile it with num_ctas=1" % (name, meta.num_ctas))
    names, c_types = [], []
    for pname, ty in obj.src.signature.items():
        if ty == "constexpr":
            continue
        if not isinstance(ty, str) or ty.startswith(("tensordesc", "nvTmaDesc")):
            raise TypeError("Triton kernel %r parameter %r has type %r (a tuple or tensor "
                            "descriptor), which is not launched from compiled code"
                            % (name, pname, ty))
        names.append(pname)
        c_types.append(_triton_type(pname, ty))
    sizes = ptx_param_sizes(obj.asm["ptx"], name)
    extras = ("global_scratch", "profile_scratch")[:len(sizes) - len(names)] if sizes else ()
    return (bytes(obj.asm["cubin"]), obj.asm["ptx"].encode(), name, names, c_types, extras,
            (meta.num_warps * 32, 1, 1), meta.shared)


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


def _flatten(context, builder, ty, value):
    # A bool parameter is a byte; any other value is its parameter as it is (float16
    # as its 2 bytes, a pointer as its address).
    if isinstance(ty, types.Boolean):
        return [builder.zext(value, _I8)]
    return [value]


class ForeignKernels(KernelAdapter):
    """The kernel-compiler adapter of :class:`ForeignKernel`: one overload
    (the declared signature), nothing to compile, one parameter per
    argument (see docs/architecture.md)."""

    name = "foreign kernel"

    @staticmethod
    def claims(obj):
        return isinstance(obj, ForeignKernel)

    owns = claims

    @staticmethod
    def kernel_name(kernel):
        return kernel.name

    @staticmethod
    def parameters(kernel):
        return list(kernel.params)

    @staticmethod
    def param_names(kernel):
        # Trailing parameters with defaults (Triton's scratch pointers) are
        # the launch's, passed NULL; callers give the declared ones.
        return [p.name for p in kernel.params if p.default is inspect.Parameter.empty]

    @staticmethod
    def qualified_name(kernel):
        return "foreign.%s" % kernel.entry

    @staticmethod
    def compiled_kernels(kernel):
        return {kernel.formal: kernel}

    @staticmethod
    def unavailable(kernel):
        # under the simulator, arguments are host memory a real launch cannot
        # take, and there is no Python body to simulate
        if not simulator_enabled():
            return None
        if kernel.image is None:
            what = "the %s of a %s" % (kernel.handle_kind, kernel.source)
        else:
            what = "a %s image%s" % ("PTX" if kernel.kind == "ptx" else kernel.kind,
                                      "" if kernel.source == "image" else " of " + kernel.source)
        return simulator_refusal("this foreign kernel is machine code (%s) with no Python to "
                                 "simulate" % what)

    @staticmethod
    def entry_name(kernel):
        return kernel.entry

    @staticmethod
    def image(kernel):
        return kernel.image

    @staticmethod
    def live_handle(kernel):
        return (kernel.handle, kernel.handle_kind) if kernel.handle else None

    @staticmethod
    def param_types(kernel):
        return [_c_parameter(t)[1] for t in kernel.c_types]

    flatten = staticmethod(_flatten)


def make_parameters(names, extras=()):
    """``inspect.Parameter`` objects for C parameters *names*, then *extras*
    defaulting to 0 (NULL)."""
    p = inspect.Parameter
    return tuple([p(n, p.POSITIONAL_OR_KEYWORD) for n in names]
                 + [p(n, p.POSITIONAL_OR_KEYWORD, default=0) for n in extras])


#: The adapter of foreign kernels.
KERNELS = ForeignKernels()
