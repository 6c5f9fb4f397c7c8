"""The XLA FFI handler of one :func:`~numba_cuda_launch.jax.jax_kernel` signature: a
nopython ``@cfunc`` that reads the call frame (:mod:`.xla_ffi`) and launches the kernel
on C-ordered views of XLA's buffers, or preloads it in XLA's initialize stage. Every
handler is one function body whose constants carry what differs between signatures
(docs/jax.md, "How the handler is built").
"""

import functools

import numba
import numpy as np
from numba.core import cgutils
from numba.core import types as nt
from numba.extending import intrinsic, register_jitable

from numba_cuda_launch.interop import xla_ffi
from numba_cuda_launch.launch.halffloat import float_to_half_bits

__all__ = ["make_handler", "refusal", "kind"]


# float16 from IEEE binary16 bits: a bitcast, which needs no runtime helper
_half_from_bits = xla_ffi._make_bitcast(nt.uint16, nt.float16)


@register_jitable
def _as_half(x):
    return _half_from_bits(float_to_half_bits(x))


# -- a rank variant's constants, as a type --------------------------------------

class VariantType(nt.Dummy):
    """A rank variant's array types (inputs, then outputs), how many are inputs,
    and its scalars ``((attribute name, NumPy dtype), ...)``. An instance is a
    constant of the handler's body, typed ``TypeRef(VariantType)``."""

    def __init__(self, arrays, n_in, scalars):
        self.arrays, self.n_in, self.scalars = arrays, n_in, scalars
        super().__init__("jax_variant(%s; %d in; %s)" % (
            ", ".join(map(str, arrays)), n_in,
            ", ".join("%s %s" % (n, d) for n, d in scalars) or "no scalars"))

    @property
    def key(self):
        return self.arrays, self.n_in, self.scalars


# -- lowering calls of the accessors ----------------------------------------------

def _lower_call(context, builder, fn, argtys, args):
    """``fn(*args)`` of a jitable *fn*, its defaults for the rest: the value and its type.
    A literal argument is typed by its literal type and passed as a placeholder."""
    typingctx = context.typing_context
    fnty = typingctx.resolve_value_type(fn)
    sig = typingctx.resolve_function_type(fnty, tuple(argtys), {})
    args = list(args) + [_placeholder(context, t) for t in sig.args[len(args):]]
    return context.get_function(fnty, sig)(builder, args), sig.return_type


def _placeholder(context, ty):
    """The value of an argument whose type carries it (a literal, a class, a default)."""
    if isinstance(ty, nt.IntegerLiteral):
        return context.get_constant(ty, ty.literal_value)
    return cgutils.get_null_value(context.get_value_type(ty))


def _view(context, builder, frame, index, n_in, ty):
    """The view of type *ty* of buffer *index* (an argument below *n_in*, else a result)."""
    get, i = (xla_ffi.arg_buffer, index) if index < n_in else (xla_ffi.ret_buffer, index - n_in)
    buf, _ = _lower_call(context, builder, get, (nt.voidptr, nt.intp),
                         (frame, context.get_constant(nt.intp, i)))
    ndim, dtype = nt.IntegerLiteral(ty.ndim), nt.NumberClass(ty.dtype)
    view, _ = _lower_call(context, builder, xla_ffi.buffer_as_array, (nt.voidptr, ndim, dtype),
                          (buf, _placeholder(context, ndim), _placeholder(context, dtype)))
    return view


@intrinsic
def _buffer_views(typingctx, frame, variant):
    """``(inputs, outputs)``: tuples of views of XLA's buffers as the *variant*'s types."""
    arrays, n_in = variant.instance_type.arrays, variant.instance_type.n_in
    ins, outs = nt.Tuple(arrays[:n_in]), nt.Tuple(arrays[n_in:])

    def codegen(context, builder, sig, args):
        views = [_view(context, builder, args[0], i, n_in, ty) for i, ty in enumerate(arrays)]
        return context.make_tuple(builder, sig.return_type, [
            context.make_tuple(builder, ins, views[:n_in]),
            context.make_tuple(builder, outs, views[n_in:])])
    return nt.Tuple((ins, outs))(frame, variant), codegen


def _scalar(context, builder, frame, name, dtype):
    """Scalar attribute *name* converted to *dtype* as nopython code converts
    (float16 arrives as F32 and is made half bits without LLVM's helpers)."""
    getter = xla_ffi.attr_float if dtype.kind == "f" else xla_ffi.attr_int
    name = nt.StringLiteral(name)
    value, ty = _lower_call(context, builder, getter, (nt.voidptr, name),
                            (frame, _placeholder(context, name)))
    if dtype == np.float16:
        value, _ = _lower_call(context, builder, _as_half, (ty,), (value,))
        return value
    return context.cast(builder, value, ty, numba.from_dtype(dtype))


@intrinsic
def _scalar_values(typingctx, frame, variant):
    """The tuple of the *variant*'s scalars, read from the call's attributes."""
    scalars = variant.instance_type.scalars
    ty = nt.Tuple([numba.from_dtype(d) for _, d in scalars])

    def codegen(context, builder, sig, args):
        return context.make_tuple(builder, ty, [_scalar(context, builder, args[0], n, d)
                                                for n, d in scalars])
    return ty(frame, variant), codegen


@intrinsic
def _shapes(typingctx, arrays):
    """``tuple(a.shape for a in arrays)``."""
    shape_types = [nt.UniTuple(nt.intp, a.ndim) for a in arrays]

    def codegen(context, builder, sig, args):
        shapes = [cgutils.create_struct_proxy(a)(context, builder, value=v).shape
                  for a, v in zip(arrays, cgutils.unpack_tuple(builder, args[0]))]
        return context.make_tuple(builder, sig.return_type, shapes)
    return nt.Tuple(shape_types)(arrays), codegen


# -- the handler --------------------------------------------------------------------

# The pieces of the handler below are inlined into its IR before typing: a
# Numba function inlined so is typed with the handler and not compiled on
# its own (an inlined overload or register_jitable would be).

@numba.njit(inline="always")
def _attribute_config(frame):
    """Grid and block from the call's attributes (y and z default to 1)."""
    grid = (xla_ffi.attr_int(frame, "ncl_grid_x"), xla_ffi.attr_int(frame, "ncl_grid_y", 1),
            xla_ffi.attr_int(frame, "ncl_grid_z", 1))
    block = (xla_ffi.attr_int(frame, "ncl_block_x"), xla_ffi.attr_int(frame, "ncl_block_y", 1),
             xla_ffi.attr_int(frame, "ncl_block_z", 1))
    return grid, block


_UNIMPLEMENTED = 12  # XLA_FFI_Error_Code_UNIMPLEMENTED
_ON_CPU = ("numba_cuda_launch: jax_kernel of CUDA kernel '%s' was called on XLA:CPU; its "
           "handlers run on CUDA GPUs only. To run it on the CPU, in numba-cuda's CUDA "
           "simulator, set NUMBA_ENABLE_CUDASIM=1 before numba is imported (docs/jax.md)")
_ON_CPU_UNSIMULATED = (
    "numba_cuda_launch: jax_kernel of %s '%s' was called on XLA:CPU; its handlers "
    "run on CUDA GPUs only, and numba-cuda's CUDA simulator cannot run it (it runs "
    "numba-cuda kernels only): call it on a GPU")
_ON_CUDA = ("numba_cuda_launch: jax_kernel of CUDA kernel '%s' was called on a GPU, but the "
            "kernel is numba-cuda's CUDA simulator's (NUMBA_ENABLE_CUDASIM=1), which runs "
            "on XLA:CPU only: call it on a CPU device (JAX_PLATFORMS=cpu)")


def kind(source):
    """'numba-cuda-mlir kernel', 'foreign kernel': a kernel of compiler *source*."""
    return source if source.endswith("kernel") else source + " kernel"


@functools.lru_cache(maxsize=None)
def refusal(kernel_name, simulated, source="numba-cuda"):
    """The handler (a cfunc) of the platform a kernel cannot run on: it fails every
    call saying why. *source* names the kernel's compiler."""
    major, minor = xla_ffi.api_version()
    if simulated:
        message = _ON_CUDA % kernel_name
    elif source == "numba-cuda":
        message = _ON_CPU % kernel_name
    else:
        message = _ON_CPU_UNSIMULATED % (kind(source), kernel_name)

    def refuse(frame):
        if xla_ffi.is_metadata_query(frame):
            return xla_ffi.answer_metadata_query(frame, 0, major, minor)
        return xla_ffi.error(frame, xla_ffi.c_string(message), _UNIMPLEMENTED)
    return numba.cfunc(nt.voidptr(nt.voidptr))(refuse)


@numba.njit(inline="always")
def _launch(frame, kernel, variant, rule):
    """Preload (initialize stage) or launch *kernel* on the buffers as *variant*;
    the driver's status. *rule* (None: the attributes' grid and block) is a constant."""
    inputs, outputs = _buffer_views(frame, variant)
    scalars = _scalar_values(frame, variant)
    args = inputs + outputs + scalars
    if xla_ffi.execution_stage(frame) != xla_ffi.STAGE_EXECUTE:
        return kernel[1, 1].preload(*args)
    if rule is None:
        grid, block = _attribute_config(frame)
    else:
        grid, block = rule(*(_shapes(inputs) + scalars))
    shmem = xla_ffi.attr_int(frame, "ncl_sharedmem")
    return kernel[grid, block, xla_ffi.stream(frame), shmem].launch_status(*args)


def make_handler(kernel, kernel_name, n_in, variants, scalars, command_buffer, launch_rule):
    """Compile the FFI handler cfunc for one signature. *variants* are the kernel's
    argument types per rank variant (a batch-aware kernel's second has a leading batch
    dimension), chosen by the first buffer's rank; *scalars* ``[(name, dtype)]``; grid
    and block come from the call's attributes, or the ``@njit`` *launch_rule*."""
    major, minor = xla_ffi.api_version()
    traits = xla_ffi.COMMAND_BUFFER_COMPATIBLE if command_buffer else 0
    msg_rank = "numba_cuda_launch: CUDA kernel '%s' got buffers of an unexpected rank" \
        % kernel_name
    msg_launch = "numba_cuda_launch: CUDA kernel '%s'" % kernel_name
    attributes = tuple(("ncl_s_" + name, dtype) for name, dtype in scalars)
    arrays = [[t for t in argtypes if isinstance(t, nt.Array)]
              for argtypes in (variants[0], variants[-1])]
    unbatched, batched = (VariantType(tuple(a), n_in, attributes) for a in arrays)
    batch_aware = len(variants) > 1
    # the first buffer (XLA's first argument, else its first result) selects the variant
    first = xla_ffi.arg_buffer if n_in else xla_ffi.ret_buffer
    rank0, rank1 = (a[0].ndim for a in arrays)

    # batch_aware, the ranks and launch_rule are constants: Numba prunes the
    # branches they rule out before typing.
    def handler(frame):
        if xla_ffi.is_metadata_query(frame):
            return xla_ffi.answer_metadata_query(frame, traits, major, minor)
        rank = xla_ffi.buffer_rank(first(frame, 0))
        if rank == rank0:
            status = _launch(frame, kernel, unbatched, launch_rule)
        elif batch_aware and rank == rank1:
            status = _launch(frame, kernel, batched, launch_rule)
        else:
            return xla_ffi.error(frame, xla_ffi.c_string(msg_rank))
        if status != 0:
            return xla_ffi.launch_error(frame, status, msg_launch)
        return xla_ffi.ok()
    return numba.cfunc(nt.voidptr(nt.voidptr))(handler)
