"""``numba.cuda`` stream objects as arguments of CPU nopython functions.

A numba-cuda ``Stream`` passed to an ``@njit`` function becomes a
:class:`CUDAStream` value holding the raw ``CUstream`` handle, usable as the
stream of ``kernel[grid, block, stream]``. Inside compiled code a raw handle
(``voidptr`` or an integer, 0 for the default stream) works as well.
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import (
    NativeValue,
    lower_cast,
    make_attribute_wrapper,
    models,
    register_model,
    typeof_impl,
    unbox,
)

__all__ = ["CUDAStream", "cuda_stream", "stream_handle_value"]


class CUDAStream(types.Type):
    """The type of a numba-cuda ``Stream`` in CPU nopython code."""

    def __init__(self):
        super().__init__(name="CUDAStream")


cuda_stream = CUDAStream()


@register_model(CUDAStream)
class CUDAStreamModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("handle", types.voidptr)])


make_attribute_wrapper(CUDAStream, "handle", "handle")


def _register_typeof():
    from numba.cuda.cudadrv import driver

    Stream = getattr(driver, "Stream", None)
    if Stream is None:  # the CUDA simulator has no driver streams
        return

    @typeof_impl.register(Stream)
    def _typeof_stream(val, c):
        return cuda_stream


_register_typeof()


@unbox(CUDAStream)
def _unbox_stream(typ, obj, c):
    # int(stream) is the raw CUstream (0 for the default stream).
    as_int = c.pyapi.number_long(obj)
    ok = cgutils.is_not_null(c.builder, as_int)
    out = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    out.handle = ir.Constant(ir.IntType(8).as_pointer(), None)
    with c.builder.if_then(ok, likely=True):
        out.handle = c.pyapi.long_as_voidptr(as_int)
        c.pyapi.decref(as_int)
    return NativeValue(out._getvalue(), is_error=c.pyapi.c_api_error())


@lower_cast(CUDAStream, types.voidptr)
def _stream_to_voidptr(context, builder, fromty, toty, val):
    return cgutils.create_struct_proxy(fromty)(context, builder, value=val).handle


#: Types accepted as the stream item of a launch configuration.
STREAM_TYPES = (types.Integer, CUDAStream, types.NoneType)


def is_stream_type(ty):
    return isinstance(ty, STREAM_TYPES) or ty == types.voidptr


def stream_handle_value(context, builder, ty, val):
    """The raw ``CUstream`` (``i8*``) of a stream value of type *ty*."""
    voidp = ir.IntType(8).as_pointer()
    if isinstance(ty, CUDAStream):
        return cgutils.create_struct_proxy(ty)(context, builder, value=val).handle
    if isinstance(ty, types.Integer):
        return builder.inttoptr(val, voidp)
    if isinstance(ty, types.NoneType):
        return ir.Constant(voidp, None)
    return builder.bitcast(val, voidp)
