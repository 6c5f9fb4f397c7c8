"""numba-cuda-mlir kernels launched from compiled code.

A ``@cuda.jit`` kernel of numba-cuda-mlir (``from numba_cuda_mlir import
cuda``) used in CPU nopython code gets the CPU type :class:`MLIRKernel`, so
``kernel[grid, block, stream, sharedmem](args...)`` types, selects and
compiles as for numba-cuda kernels (:class:`MLIRKind` translates CPU types
to numba-cuda-mlir's own). The cubin numba-cuda-mlir builds is embedded and
loaded by the same loader as numba-cuda images, and launched with
``cuLaunchKernel`` (:class:`MLIRBackend`); the parameters follow
numba-cuda-mlir's launcher, not numba-cuda's ABI:

* an array is an MLIR memref descriptor: allocated pointer, aligned pointer
  (both the data pointer), offset (0), ``shape[ndim]``, ``strides[ndim]``
  counted in elements;
* a complex number is one parameter of its 8 or 16 bytes;
* a tuple is its items, other scalars and pointers themselves.

The parameter sizes are checked against the kernel's PTX entry point when it
is selected, so a numba-cuda-mlir release that changes its layout is refused
at typing rather than launched wrongly. Nothing here imports numba_cuda_mlir:
the type of its dispatcher is found through a virtual base class
(:class:`_MLIRDispatcherClass`) once the user has imported it.
"""

import abc

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models
from numba.core.imputils import lower_constant
from numba.extending import register_model, typeof_impl

from numba_cuda_launch.compat import numba_cuda_mlir as _mlir
from numba_cuda_launch.compat import overrides as _overrides
from numba_cuda_launch.compat.versions import SUPPORTED
from numba_cuda_launch.launch import launchconfig
from numba_cuda_launch.launch.backends import register
from numba_cuda_launch.launch.backends.driver import DriverBackend
from numba_cuda_launch.launch.kernelkind import KernelKind, register_kind
from numba_cuda_launch.launch.params import emit_param_array
from numba_cuda_launch.runtime.image import KernelImage

__all__ = ["MLIRKernel", "MLIRKind", "MLIRBackend", "mlir_param_names", "flatten_mlir_values"]

_i64 = ir.IntType(64)


class MLIRKernel(types.Type):
    """The CPU type of a numba-cuda-mlir kernel; like numba-cuda's dispatcher
    type it holds the kernel (``.dispatcher``)."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        super().__init__(name="MLIRKernel(%s)" % _mlir.dispatcher_name(dispatcher))

    @property
    def key(self):
        return self.dispatcher


register_model(MLIRKernel)(models.OpaqueModel)


class _MLIRDispatcherClass(abc.ABC):
    """Virtual base class of numba-cuda-mlir's dispatcher class: ``typeof``
    (a ``functools.singledispatch``) finds the registration below through
    it without numba_cuda_mlir being imported here."""

    @classmethod
    def __subclasshook__(cls, other):
        return True if _mlir.is_mlir_dispatcher_class(other) else NotImplemented


@typeof_impl.register(_MLIRDispatcherClass)
def _typeof_mlir_kernel(val, c):
    _overrides.install()  # numba-cuda-mlir is imported now: its no-GPU override can apply
    return MLIRKernel(val)


@lower_constant(MLIRKernel)
def _mlir_kernel_constant(context, builder, ty, pyval):
    return context.get_dummy_value()


launchconfig.add_kernel_type(MLIRKernel)


# -- parameters --------------------------------------------------------------

def mlir_param_names(name, ty):
    """Names of the parameters one argument of CPU type *ty* becomes in
    numba-cuda-mlir's layout."""
    if isinstance(ty, types.Array):
        fields = ["allocated", "aligned", "offset"]
        fields += ["shape[%d]" % i for i in range(ty.ndim)]
        fields += ["strides[%d]" % i for i in range(ty.ndim)]
        return ["%s.%s" % (name, f) for f in fields]
    if isinstance(ty, types.BaseTuple):
        out = []
        for i, t in enumerate(ty):
            out += mlir_param_names("%s[%d]" % (name, i), t)
        return out
    return [name]


def _flatten(context, builder, ty, value, out):
    if isinstance(ty, types.Array):
        ary = context.make_array(ty)(context, builder, value)
        itemsize = context.get_abi_sizeof(context.get_data_type(ty.dtype))
        out += [ary.data, ary.data, ir.Constant(_i64, 0)]
        out += cgutils.unpack_tuple(builder, ary.shape, ty.ndim)
        # memref strides count elements; Numba's count bytes.
        out += [builder.sdiv(s, ir.Constant(s.type, itemsize))
                for s in cgutils.unpack_tuple(builder, ary.strides, ty.ndim)]
    elif isinstance(ty, types.BaseTuple):
        for i, t in enumerate(ty):
            _flatten(context, builder, t, builder.extract_value(value, i), out)
    elif isinstance(ty, types.Complex) or ty == types.float16:
        out.append(value)  # {real, imag} in one parameter; float16 as its 2 bytes
    else:
        out.extend(context.get_arg_packer([ty]).as_arguments(builder, [value]))


def flatten_mlir_values(context, builder, argtypes, values):
    """Flatten argument values (of the CPU *argtypes*) into the LLVM values
    of numba-cuda-mlir's kernel parameters, one per parameter."""
    out = []
    for ty, value in zip(argtypes, values):
        _flatten(context, builder, ty, value, out)
    return out


def _layout_problem(kernel, argtypes):
    sizes = _mlir.kernel_param_sizes(kernel)
    expected = []
    for ty in argtypes:
        expected += _expected_sizes(ty)
    if sizes != expected:
        return ("its entry point takes parameters of %s bytes where this "
                "package packs %s for numba-cuda-mlir's layout (tested with "
                "numba-cuda-mlir %s to %s)" % ((sizes, expected) + SUPPORTED["numba-cuda-mlir"]))
    return None


def _expected_sizes(ty):
    if isinstance(ty, types.Array):
        return [8] * (3 + 2 * ty.ndim)
    if isinstance(ty, types.BaseTuple):
        return [s for t in ty for s in _expected_sizes(t)]
    if isinstance(ty, (types.CPointer, types.RawPointer)):
        return [8]
    if isinstance(ty, types.Boolean):
        return [1]
    return [ty.bitwidth // 8]


# -- kind and backend --------------------------------------------------------

class MLIRKind(KernelKind):
    """Selection's view of numba-cuda-mlir kernels: overloads keyed by CPU
    types translated from numba-cuda-mlir's, compiled through its
    dispatcher."""

    def claims(self, dispatcher):
        return _mlir.is_mlir_dispatcher(dispatcher)

    def name(self, dispatcher):
        return _mlir.dispatcher_name(dispatcher)

    def parameters(self, dispatcher):
        return _mlir.dispatcher_parameters(dispatcher)

    def image_problem(self, kernel):
        return None  # compiled (and checked against its PTX) when selected

    def param_names(self, dispatcher):
        return _mlir.dispatcher_param_names(dispatcher)

    def is_device_function(self, dispatcher):
        return _mlir.is_device_function(dispatcher)

    def compiled_kernels(self, dispatcher):
        return _mlir.compiled_kernels(dispatcher)

    def can_compile(self, dispatcher):
        return _mlir.can_compile(dispatcher)

    def argument_problem(self, ty):
        try:
            _mlir.to_mlir_type(ty)
        except _mlir.UntranslatableType as exc:
            return str(exc)
        return None

    def compile(self, dispatcher, argtypes):
        return _mlir.compile_kernel(dispatcher, argtypes)

    def unsupported_features(self, dispatcher, kernel):
        reasons = _mlir.unsupported_kernel_features(dispatcher, kernel)
        if not reasons:
            argtypes = [_mlir.from_mlir_type(t) for t in kernel.signature.args]
            problem = (_layout_problem(kernel, argtypes) if None not in argtypes
                       else "its parameter types have no CPU counterparts")
            if problem:
                reasons.append(problem)
        return reasons


class MLIRBackend(DriverBackend):
    """Launches numba-cuda-mlir kernels through the CUDA driver, with
    numba-cuda-mlir's parameter layout."""

    name = "numba-cuda-mlir"

    def claims(self, kernel):
        return _mlir.is_mlir_kernel(kernel)

    def image(self, kernel):
        return KernelImage(_mlir.kernel_entry_name(kernel), _mlir.kernel_image(kernel))

    def cooperative(self, kernel):
        return _mlir.kernel_is_cooperative(kernel)

    def param_types(self, kernel):
        return [ir.IntType(8 * s) for s in _mlir.kernel_param_sizes(kernel)]

    def param_array(self, context, builder, kernel, formal_types, values):
        flat = flatten_mlir_values(context, builder, formal_types, values)
        return emit_param_array(builder, flat, self.param_types(kernel), context.target_data)


register_kind(MLIRKind())
register(MLIRBackend())
