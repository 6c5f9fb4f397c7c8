"""numba-cuda-mlir's ``@cuda.jit`` kernels as a kernel source: their CPU type
(:class:`MLIRKernel`) and ``typeof``, the translation of CPU types to
numba-cuda-mlir's own copy of Numba's (by kind and name), and the parameter
layout of its C++ launcher, checked against each kernel's PTX. Nothing here
imports numba_cuda_mlir: its modules are taken from ``sys.modules`` once the
user imported it. docs/numba-cuda-mlir.md.
"""

import abc
import functools
import sys
import threading
import weakref
from typing import Any, List, Optional

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import typeof_impl

from numba_cuda_launch.compat import numba_cuda_mlir as compat
from numba_cuda_launch.compat.ptx import ptx_param_sizes
from numba_cuda_launch.compat.versions import SUPPORTED
from numba_cuda_launch.compat.overrides import replaced
from numba_cuda_launch.kernels import CONDITION_MAX, DispatcherKernels, KernelType, \
    flat_param_names, image_for_architectures, register

__all__ = ["MLIRKernel", "SOURCE", "UntranslatableType", "is_mlir_dispatcher_class",
           "to_mlir_type", "from_mlir_type", "kernel_param_sizes"]


class UntranslatableType(TypeError):
    """A CPU type with no numba-cuda-mlir kernel parameter counterpart."""


def _module(name):
    return sys.modules.get("numba_cuda_mlir." + name)


def is_mlir_dispatcher_class(cls):
    """True for numba-cuda-mlir's ``@cuda.jit`` dispatcher class (or a
    subclass), without importing numba-cuda-mlir."""
    descriptor = _module("descriptor")
    return descriptor is not None and issubclass(cls, descriptor.MLIRDispatcher)


# -- types -------------------------------------------------------------------

_SCALARS = (types.Boolean, types.Integer, types.Float, types.Complex)


# The translations are kept (types are immutable, interned values): a launch
# site's types are translated once per process, not at each use.

@functools.lru_cache(maxsize=None)
def to_mlir_type(ty):
    """numba-cuda-mlir's type for a CPU kernel argument type *ty*: scalars,
    pointers, arrays of scalars and tuples of these; a type naming its
    ``kernel_integer`` (a conditional handle) as that integer. Raises
    :class:`UntranslatableType` saying why for anything else."""
    mt = sys.modules["numba_cuda_mlir.types"]
    ty = getattr(ty, "kernel_integer", ty)  # a value passed as its integer (a conditional handle)
    if isinstance(ty, types.Boolean):
        return mt.boolean
    if isinstance(ty, _SCALARS):
        return getattr(mt, ty.name)
    if ty == types.voidptr:
        return mt.voidptr
    if isinstance(ty, types.CPointer):
        return mt.CPointer(to_mlir_type(ty.dtype))
    if isinstance(ty, types.Array):
        if not isinstance(ty.dtype, _SCALARS):
            raise UntranslatableType(
                "arrays of %s are not translated to numba-cuda-mlir (only arrays "
                "of booleans, integers, floats and complex numbers)" % ty.dtype)
        return mt.Array(to_mlir_type(ty.dtype), ty.ndim, ty.layout,
                        readonly=not ty.mutable, aligned=ty.aligned)
    if isinstance(ty, types.UniTuple):
        return mt.UniTuple(to_mlir_type(ty.dtype), ty.count)
    if isinstance(ty, types.Tuple):
        return mt.Tuple(tuple(to_mlir_type(t) for t in ty.types))
    raise UntranslatableType(
        "%s has no numba-cuda-mlir counterpart here; numba-cuda-mlir kernels "
        "launched from compiled code take booleans, integers, floats, complex "
        "numbers, pointers, arrays of these over device memory and tuples of "
        "these" % ty)


@functools.lru_cache(maxsize=None)
def from_mlir_type(mty):
    """The CPU type of a numba-cuda-mlir parameter type, or None."""
    mt = sys.modules["numba_cuda_mlir.types"]
    if isinstance(mty, mt.Boolean):
        return types.boolean
    if isinstance(mty, (mt.Integer, mt.Float, mt.Complex)):
        return getattr(types, mty.name, None)
    if mty == mt.voidptr:
        return types.voidptr
    if isinstance(mty, mt.CPointer):
        dtype = from_mlir_type(mty.dtype)
        return None if dtype is None else types.CPointer(dtype)
    if isinstance(mty, mt.Array):
        dtype = from_mlir_type(mty.dtype)
        if dtype is None or not isinstance(dtype, _SCALARS):
            return None
        return types.Array(dtype, mty.ndim, mty.layout, readonly=not mty.mutable,
                           aligned=mty.aligned)
    if isinstance(mty, mt.BaseTuple):
        items = [from_mlir_type(t) for t in mty]
        return None if None in items else types.BaseTuple.from_types(items)
    return None


# -- kernels -----------------------------------------------------------------

def kernel_image(kernel):
    """The kernel's linked cubin (bytes), what the C++ launcher loads."""
    return bytes(kernel.metadata["cubin"])


def kernel_entry_name(kernel):
    return kernel.metadata["func_name"]


#: overload -> its dispatcher (an image for several architectures compiles
#: the function again, once per architecture)
_DISPATCHERS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
_PARAM_SIZES: "weakref.WeakKeyDictionary[Any, Optional[List[int]]]" = \
    weakref.WeakKeyDictionary()


def kernel_param_sizes(kernel):
    """The byte sizes of the kernel entry point's parameters, read once
    from its PTX ``.entry`` declaration; None if the PTX is not available."""
    if kernel not in _PARAM_SIZES:
        try:
            ptx = kernel.ptx
        except Exception:
            ptx = None
        _PARAM_SIZES[kernel] = ptx_param_sizes(ptx, kernel.metadata["func_name"]) \
            if isinstance(ptx, str) else None
    return _PARAM_SIZES[kernel]


def unsupported_kernel_features(dispatcher, kernel):
    """Reasons this numba-cuda-mlir kernel cannot be launched from compiled
    code, if any: what its Python launch does besides ``cuLaunchKernel``."""
    reasons = []
    options = dispatcher.targetoptions
    if options.get("debug"):
        reasons.append(
            "it was compiled with debug=True, whose device-side exceptions "
            "numba-cuda-mlir's launcher reads back (__numba_cuda_mlir_error_code) "
            "after each Python launch; compile it without debug=True")
    if options.get("extensions"):
        reasons.append(
            "it has argument extensions (extensions=...), which rewrite the "
            "arguments of each Python launch")
    if options.get("shared_memory_carveout") is not None:
        reasons.append(
            "it sets shared_memory_carveout, a function attribute only "
            "numba-cuda-mlir's own module load applies")
    # filled from link= items and from what lowering discovers
    # (MLIRDispatcher._propagate_compile_callbacks)
    if getattr(dispatcher, "_module_setup_callbacks", None) \
            or getattr(dispatcher, "_module_teardown_callbacks", None):
        reasons.append(
            "it links code with module setup/teardown callbacks, which only "
            "numba-cuda-mlir's launcher runs")
    if getattr(dispatcher, "_requires_launch_config", False) \
            or getattr(dispatcher, "_literal_arg_positions", ()):
        reasons.append(
            "it is specialised per launch (on the launch configuration or on "
            "argument values), which compiled code only knows at run time")
    if any(_module("descriptor").get_constant_args(dispatcher.py_func)):
        reasons.append(
            "it has compile-time constant parameters, compiled per value")
    if kernel.metadata.get("needs_nrt"):
        reasons.append(
            "it uses numba-cuda-mlir's device runtime (NRT), which its launcher "
            "sets up")
    return reasons


_ARCH_LOCK = threading.Lock()


def compile_for_architecture(dispatcher, signature, cc):
    """The overload of *dispatcher* for numba-cuda-mlir *signature*,
    compiled for compute capability *cc* alone: a dispatcher of the same
    function and options for chip ``sm_XY``, compiled while numba-cuda-mlir
    takes *cc* for the device's (it links for the device's architecture when
    that is newer than the chip's). numba-cuda-mlir 0.6 builds one cubin per
    dispatcher and has no option for several (docs/numba-cuda-mlir.md)."""
    options = dict(dispatcher.targetoptions, chip="sm_%d%d" % tuple(cc))
    with _ARCH_LOCK, replaced("numba_cuda_mlir.tools", "_cached_cc", tuple(cc)):
        return type(dispatcher)(dispatcher.py_func, options).compile(signature)


# -- parameters --------------------------------------------------------------
# The layout of numba-cuda-mlir's launcher: an array is an MLIR memref
# descriptor (allocated pointer, aligned pointer, offset 0, shape[ndim],
# strides[ndim] counted in elements), a complex number one parameter of its
# 8 or 16 bytes, a tuple its items, other scalars and pointers themselves.

def flatten_values(context, builder, argtypes, values):
    """The LLVM values of the parameters arguments *values* (of CPU types
    *argtypes*) become, one per parameter, in order (a tuple's items in
    place of the tuple)."""
    out = []
    pending = list(zip(argtypes, values))[::-1]  # a stack: tuples push their items
    while pending:
        ty, value = pending.pop()
        if isinstance(ty, types.Array):
            ary = context.make_array(ty)(context, builder, value)
            # memref strides count elements; Numba's count bytes. The array's
            # own item size: a jax_kernel handler body shared by signatures
            # of one layout views buffers of any dtype (docs/jax.md).
            out += [ary.data, ary.data, ir.Constant(ir.IntType(64), 0)]
            out += cgutils.unpack_tuple(builder, ary.shape, ty.ndim)
            for stride in cgutils.unpack_tuple(builder, ary.strides, ty.ndim):
                out.append(builder.sdiv(stride, ary.itemsize))
        elif isinstance(ty, types.BaseTuple):
            pending += [(t, builder.extract_value(value, i)) for i, t in enumerate(ty)][::-1]
        elif isinstance(ty, types.Complex) or ty == types.float16:
            out.append(value)  # {real, imag} in one parameter; float16 as its 2 bytes
        else:
            out += context.get_arg_packer([ty]).as_arguments(builder, [value])
    return out


def emit_argument_checks(context, builder, guards, ty, value, where):
    """Refuse (through *guards*, before the launch) an array argument of
    CPU type *ty* whose strides are not whole elements: a memref counts
    strides in elements, so a byte stride such as 6 for float32 items has
    no memref form (the division would launch another stride). Only arrays
    of layout ``A`` can have such strides."""
    if isinstance(ty, types.BaseTuple):
        for i, t in enumerate(ty):
            emit_argument_checks(context, builder, guards, t, builder.extract_value(value, i),
                                 "%s[%d]" % (where, i))
        return
    if not isinstance(ty, types.Array) or ty.layout != "A" or ty.ndim == 0:
        return
    itemsize = context.get_abi_sizeof(context.get_data_type(ty.dtype))
    if itemsize == 1:
        return

    def bad():  # the array's own item size (a jax_kernel body's views, docs/jax.md)
        ary = context.make_array(ty)(context, builder, value)
        rests = [builder.srem(s, ary.itemsize)
                 for s in cgutils.unpack_tuple(builder, ary.strides, ty.ndim)]
        return builder.icmp_signed("!=", functools.reduce(builder.or_, rests),
                                   ir.Constant(rests[0].type, 0))
    guards.check(bad, "%s has strides that are not a whole number of its %d-byte items, which "
                 "numba-cuda-mlir's array parameters (memrefs, strides counted in items) cannot "
                 "express" % (where, itemsize))


@functools.lru_cache(maxsize=None)
def _expected_sizes(ty):
    if isinstance(ty, types.Array):
        return (8,) * (3 + 2 * ty.ndim)
    if isinstance(ty, types.BaseTuple):
        return tuple(s for t in ty for s in _expected_sizes(t))
    if isinstance(ty, (types.CPointer, types.RawPointer)):
        return (8,)
    if isinstance(ty, types.Boolean):
        return (1,)
    return (ty.bitwidth // 8,)


def _layout_problem(kernel):
    """Why the kernel's PTX entry point does not take the parameters packed
    for its types, or None: a release that changes the layout is refused at
    typing rather than launched wrongly."""
    sizes = kernel_param_sizes(kernel)
    if sizes is None:
        return "its PTX is not available, so its parameter layout cannot be checked"
    argtypes = [from_mlir_type(t) for t in kernel.signature.args]
    if None in argtypes:
        return "its parameter types have no CPU counterparts"
    expected = [s for ty in argtypes for s in _expected_sizes(ty)]
    if sizes != expected:
        return ("its entry point takes parameters of %s bytes where this "
                "package packs %s for numba-cuda-mlir's layout (tested with "
                "numba-cuda-mlir %s to %s)" % ((sizes, expected) + SUPPORTED["numba-cuda-mlir"]))
    return None


class NumbaCudaMLIRKernels(DispatcherKernels):
    """The source of numba-cuda-mlir's ``@cuda.jit`` kernels: overloads keyed
    by CPU types translated from numba-cuda-mlir's, launched with its
    launcher's parameter layout."""

    name = "numba-cuda-mlir"

    def claims(self, obj):
        return is_mlir_dispatcher_class(type(obj))

    def compiled_kernels(self, dispatcher):
        """{CPU argument types: kernel} for the overloads compiled so far
        whose parameter types all have CPU counterparts."""
        out = {}
        for argtypes, cres in list(dispatcher.overloads.items()):
            cpu = tuple(map(from_mlir_type, argtypes))
            if None not in cpu:
                out[cpu] = cres
                _DISPATCHERS[cres] = dispatcher
        return out

    def compile(self, dispatcher, argtypes):
        """The kernel for CPU *argtypes*, compiled or taken from the
        dispatcher's overloads as ``kernel.compile(sig)`` does."""
        mt = _module("types")
        kernel = dispatcher.compile(mt.void(*[to_mlir_type(t) for t in argtypes]))
        _DISPATCHERS[kernel] = dispatcher
        return kernel

    def argument_problem(self, ty):
        try:
            to_mlir_type(ty)
        except UntranslatableType as exc:
            return str(exc)
        return None

    def simulation_refusal(self, dispatcher):
        return "numba-cuda-mlir has no simulator"

    def launch_problems(self, dispatcher, kernel):
        reasons = unsupported_kernel_features(dispatcher, kernel)
        problem = None if reasons else _layout_problem(kernel)
        if problem:
            reasons.append(problem)
        return reasons

    def entry_name(self, kernel):
        return kernel_entry_name(kernel)

    def image(self, kernel):
        """Its cubin, or with a list of architectures configured a fatbin of
        a cubin for each and the lowest one's PTX, each compiled by a
        dispatcher for that architecture alone."""
        dispatcher = _DISPATCHERS.get(kernel)

        def overload(cc):
            if cc is None:
                return kernel
            if dispatcher is None:
                raise ValueError("its dispatcher is not known here (an overload compiled "
                                 "before numba_cuda_launch saw the kernel)")
            return compile_for_architecture(dispatcher, kernel.signature, cc)
        return image_for_architectures(kernel, lambda cc: kernel_image(overload(cc)),
                                       lambda cc: overload(cc).ptx)

    def cooperative(self, kernel):
        # what the dispatcher hands its launcher (descriptor.MLIRDispatcher._compile)
        return bool(kernel.metadata.get("use_cooperative", False))

    def param_types(self, kernel):
        # read when the layout was checked (launch_problems), else now
        sizes = _PARAM_SIZES.get(kernel) or kernel_param_sizes(kernel)
        return [ir.IntType(8 * s) for s in sizes]

    def flat_param_names(self, name, ty):
        return flat_param_names(name, ty, ("allocated", "aligned", "offset"), complex_parts=())

    def flatten(self, context, builder, argtypes, values):
        return flatten_values(context, builder, argtypes, values)

    emit_argument_checks = staticmethod(emit_argument_checks)

    def add_kernel_functions(self, functions):
        """Overloads in numba-cuda-mlir's extension registries, registered
        when it makes its typing context (:func:`..compat.numba_cuda_mlir.extend`)."""
        compat.extend(lambda: _register_kernel_functions(functions))


# -- functions kernels call ----------------------------------------------------------



def _cpu_types(mlir_types):
    """numba-cuda-mlir's argument types as CPU types (an untranslatable one
    as it is: the checks name it)."""
    return [from_mlir_type(t) or t for t in mlir_types]


def _register_kernel_functions(functions):
    for function in functions:
        if function.instruction is not None:
            compat.register_asm_function(function.fn, _asm_check(function),
                                         function.instruction)
        else:
            _register_set_conditional(function)


def _asm_check(function):
    def check(*args):
        function.check(compat.kernel_compute_capability(), *_cpu_types(args))
    return check


def _register_set_conditional(function):
    declared: list = []  # cudaGraphSetConditional, declared when a kernel first calls it

    @compat.overload(function.fn)
    def _set_conditional(handle, value):
        hty, vty = _cpu_types((handle, value))
        function.check(None, hty, vty)
        if not declared:
            declared.append(compat.declare_device("cudaGraphSetConditional",
                                                  "void(uint64, uint32)"))
        set_value = declared[0]
        if isinstance(vty, types.Boolean) or (not vty.signed and vty.bitwidth <= 32):
            def impl(handle, value):
                set_value(np.uint64(handle), np.uint32(value))
        else:
            def impl(handle, value):
                # outside 0..2**32-1 (negatives wrap above it): 2**32-1, true
                wide = np.uint64(value)
                set_value(np.uint64(handle), np.uint32(wide) if wide <= np.uint64(CONDITION_MAX)
                          else np.uint32(CONDITION_MAX))
        return impl


#: The source of numba-cuda-mlir kernels.
SOURCE = register(NumbaCudaMLIRKernels())


class MLIRKernel(KernelType):
    """The CPU type of a numba-cuda-mlir kernel."""

    source = SOURCE

    def __init__(self, dispatcher):
        super().__init__(dispatcher, "MLIRKernel(%s)" % dispatcher.py_func.__name__)


class _MLIRDispatcherClass(abc.ABC):
    """Virtual base class of numba-cuda-mlir's dispatcher class: ``typeof``
    (a ``functools.singledispatch``) finds the registration below through
    it without numba_cuda_mlir being imported here."""

    @classmethod
    def __subclasshook__(cls, other):
        return True if is_mlir_dispatcher_class(other) else NotImplemented


@typeof_impl.register(_MLIRDispatcherClass)
def _typeof_mlir_kernel(val, c):
    return MLIRKernel(val)
