"""numba-cuda's ``@cuda.jit`` kernels as a kernel source: Numba types them
itself (numba-cuda's ``CUDADispatcher`` type, given a CPU data model here);
this module reads their overloads (cubin, PTX, the features a Python launch
handles specially) and packs their arguments in numba-cuda's parameter ABI
(``_Kernel._prepare_args``). Imported only where numba-cuda is installed
(``launch/__init__.py``). docs/architecture.md, "Kernel sources".
"""

import re
import warnings
from typing import List

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import default_manager, models
from numba.core.typing.templates import signature
from numba.extending import register_model

from numba_cuda_launch.compat import numba_cuda as compat
from numba_cuda_launch.compat.numba_cuda import CUDADispatcherType
from numba_cuda_launch.kernels import CONDITION_MAX, DispatcherKernels, flat_param_names, \
    image_for_architectures, register

__all__ = ["NumbaCudaKernels", "SOURCE", "kernel_cubin", "kernel_ptx"]

# A kernel used as a global or closure variable in CPU code: numba-cuda
# registers the data model of its dispatcher type only for the CUDA target.
# The value carries nothing at run time (the kernel is known from its type).
if CUDADispatcherType not in default_manager._handlers:
    register_model(CUDADispatcherType)(models.OpaqueModel)


def kernel_cubin(kernel, cc=None) -> bytes:
    """The linked cubin of *kernel* for compute capability *cc* (``sm_XY``,
    never ``sm_XYa``), or by default for the current device (with no GPU the
    configured architecture). numba-cuda caches it, so a Python launch does
    not link it again; a failed link raises."""
    obj = kernel._codelibrary.get_cubin(cc=None if cc is None else tuple(cc))
    return bytes(getattr(obj, "code", obj))


def kernel_ptx(kernel, cc) -> str:
    """The PTX of *kernel* for *cc*, complete (the driver compiles it with
    nothing to link): NVVM's output for a kernel that links no files, the
    LTO-linked PTX for one that links files through nvJitLink. Raises
    ValueError when code it links cannot be part of PTX."""
    library = kernel._codelibrary
    cc = tuple(cc)
    linked = bool(library._linking_files) or library.needs_cudadevrt
    if not linked:
        ptx = library.get_asm_str(cc=cc)
    elif library._lto:
        with warnings.catch_warnings():
            # a file nvJitLink cannot take is left out: reported below as
            # the functions the PTX lacks
            warnings.filterwarnings("ignore", "Not adding .* not optimizable at link time")
            ptx = library.get_lto_ptx(cc=cc)
    else:
        raise ValueError("it links files without link-time optimization, so no PTX holds "
                         "all of its code")
    externs = sorted(set(_PTX_EXTERN.findall(ptx)) - _PTX_SYSTEM_CALLS)
    if externs:
        raise ValueError("its PTX calls functions it links from other files (%s), which the "
                         "driver cannot link when it compiles PTX" % ", ".join(externs))
    return ptx


# A function the PTX declares but does not define; the PTX system calls are
# the driver's own (cudaGraphSetConditional is a builtin ptxas resolves).
_PTX_EXTERN = re.compile(r"^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$]+)", re.M)
_PTX_SYSTEM_CALLS = frozenset({"vprintf", "malloc", "free", "__assertfail",
                               "cudaGraphSetConditional"})


def _unsupported_features(kernel) -> List[str]:
    """Reasons this kernel cannot be launched from compiled code, if any."""
    reasons = []
    if kernel.debug:
        reasons.append(
            "it was compiled with debug=True, whose device-side exceptions "
            "numba-cuda reads back from module globals after each Python "
            "launch; compile it without debug=True (or launch it from Python)")
    if getattr(kernel, "launch_config_sensitive", False):
        reasons.append(
            "its code depends on the launch configuration (a launch-config-"
            "sensitive kernel), which compiled code only knows at run time")
    if any(not _harmless_setup(f) for f in kernel._codelibrary._setup_functions):
        reasons.append(
            "it links code with module setup callbacks, which only "
            "numba-cuda's own module loader runs")
    if getattr(kernel, "shared_memory_carveout", None) is not None:
        reasons.append(
            "it sets shared_memory_carveout, a per-device function attribute "
            "only numba-cuda's Python launch applies")
    return reasons


def _harmless_setup(fn) -> bool:
    # numba-cuda's float16 setup callback only warns when nvJitLink is
    # missing; it does not touch the module.
    return (getattr(fn, "__name__", "") == "lto_warning_callback"
            and getattr(fn, "__module__", "").startswith("numba.cuda"))


def _image(kernel) -> bytes:
    """One cubin for the target architecture, or with a list configured a
    fatbin of a cubin for each and the lowest one's PTX
    (:func:`..image_for_architectures`)."""
    return image_for_architectures(kernel, lambda cc: kernel_cubin(kernel, cc),
                                   lambda cc: kernel_ptx(kernel, cc))


class NumbaCudaKernels(DispatcherKernels):
    """The source of numba-cuda's ``@cuda.jit`` kernels."""

    name = "numba-cuda"
    numba_type = CUDADispatcherType

    def claims(self, obj) -> bool:
        from numba.cuda.dispatcher import CUDADispatcher

        return isinstance(obj, CUDADispatcher)

    def launch_problems(self, dispatcher, kernel) -> List[str]:
        return _unsupported_features(kernel)

    def python_classes(self):
        """numba-cuda's ``Stream`` and device arrays."""
        stream = compat.stream_class()
        return (() if stream is None else (stream,), (compat.array_base_class(),),
                compat.array_classes())

    def simulation_refusal(self, dispatcher) -> str:
        return "it was made by numba-cuda's CUDA target, not its simulator"

    def entry_name(self, kernel) -> str:
        return kernel.entry_name

    def image(self, kernel) -> bytes:
        return _image(kernel)

    def live_handle(self, kernel):
        return None  # launched from its image, loaded by the package
    def cooperative(self, kernel) -> bool:
        return bool(kernel.cooperative)

    def dependent(self, kernel) -> bool:
        return False  # each launch says (cfg.dependent())

    def param_types(self, kernel):
        return list(kernel._codelibrary.get_function(kernel.entry_name).function_type.args)

    def flat_param_names(self, name, ty) -> List[str]:
        return flat_param_names(name, ty)

    def flatten(self, context, builder, argtypes, values) -> list:
        """CPU data models flatten as numba-cuda's ABI does; a float16 is its
        two bytes (its bits converted from a CPU number, or a ``half`` read
        from memory)."""
        if types.float16 not in argtypes:
            return context.get_arg_packer(argtypes).as_arguments(builder, values)
        return [v for ty, value in zip(argtypes, values)
                for v in ([value] if ty == types.float16 else
                          context.get_arg_packer([ty]).as_arguments(builder, [value]))]

    def add_kernel_functions(self, functions) -> None:
        """Typed and lowered as numba-cuda's own ``cuda.*`` functions are
        (:func:`..compat.numba_cuda.register_kernel_function`)."""
        for function in functions:
            compat.register_kernel_function(function.fn, _typer(function),
                                            _lowering(function.instruction))


# -- functions kernels call ----------------------------------------------------------

_void = ir.VoidType()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)


def _typer(function):
    def typer(*args):
        function.check(compat.kernel_compute_capability(), *args)
        return signature(types.void, *args)
    return typer


def _as_condition(builder, value, ty):
    """*value* (integer or boolean *ty*) as the condition's ``i32``: values
    outside 0..2**32-1 (negative ones too) saturate to 2**32-1, keeping
    their truth."""
    if isinstance(ty, types.Boolean):
        return builder.zext(value, _i32)
    if not ty.signed and ty.bitwidth <= 32:
        return builder.zext(value, _i32) if ty.bitwidth < 32 else value
    wide = value if ty.bitwidth == 64 else builder.sext(value, _i64)
    outside = builder.icmp_unsigned(">", wide, ir.Constant(_i64, CONDITION_MAX))  # negatives too
    return builder.select(outside, ir.Constant(_i32, CONDITION_MAX), builder.trunc(wide, _i32))


def _lowering(instruction):
    """The lowering of a kernel function: PTX *instruction*, else
    ``set_conditional`` (:class:`..KernelFunction`)."""
    if instruction is not None:
        def lower_instruction(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(_void, []), instruction, "~{memory}",
                               side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()
        return lower_instruction

    def lower_set_conditional(context, builder, sig, args):
        hty, vty = sig.args
        # a handle's type naming its kernel integer is a struct of that integer
        handle = builder.extract_value(args[0], 0) if hasattr(hty, "kernel_integer") \
            else args[0]
        # The device runtime's builtin: an extern function in the PTX that
        # ptxas resolves, with no libcudadevrt linked.
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_void, [_i64, _i32]),
                                            "cudaGraphSetConditional")
        builder.call(fn, [handle, _as_condition(builder, args[1], vty)])
        return context.get_dummy_value()
    return lower_set_conditional


#: The source of numba-cuda kernels.
SOURCE = register(NumbaCudaKernels())
