"""Kernels of other compilers (cubin, fatbin or PTX images, cuda.core, CuPy,
Triton) as CPU nopython values: :func:`foreign_kernel` makes a
:class:`~numba_cuda_launch.compat.foreign_kernels.ForeignKernel`, typed as
:class:`ForeignKernelType`, launched through its adapter
(:mod:`..compat.foreign_kernels`). See docs/kernel-sources.md.
"""

import keyword

from llvmlite import ir
from numba.core import types
from numba.core.datamodel import models
from numba.core.imputils import lower_cast, lower_constant
from numba.core.typeconv import Conversion
from numba.extending import register_model, typeof_impl

from numba_cuda_launch.compat import foreign_kernels as _fk
from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.compat.ptx import ptx_param_sizes
from numba_cuda_launch.cudadrv import fatbin
from numba_cuda_launch.cudadrv.paraminfo import loaded_param_sizes
from numba_cuda_launch.errors import CUDA_ERROR_INVALID_HANDLE, error_name
from numba_cuda_launch.launch import launchconfig
from numba_cuda_launch.launch.devicearray import DeviceArray, as_array_type

__all__ = ["ForeignKernelType", "PointerParam", "foreign_kernel"]

_i8p = ir.IntType(8).as_pointer()


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


@lower_cast(DeviceArray, PointerParam)
def _device_array_address(context, builder, fromty, toty, val):
    array_ty = as_array_type(fromty)
    return _array_address(context, builder, array_ty, toty,
                          context.cast(builder, val, fromty, array_ty))


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


class ForeignKernelType(launchconfig.KernelType):
    """The CPU type of a :class:`ForeignKernel`."""

    def __init__(self, kernel):
        super().__init__(kernel, "ForeignKernel(%s)" % kernel.name)


@typeof_impl.register(_fk.ForeignKernel)
def _typeof_foreign_kernel(val, c):
    return ForeignKernelType(val)


launchconfig.add_kernel_type(ForeignKernelType)


def _formal(ty):
    if ty == types.voidptr:
        return PointerParam(None)
    if isinstance(ty, types.CPointer):
        return PointerParam(ty.dtype)
    return ty


def _declared(what, signature, names):
    """The C parameter types of *signature* and their names."""
    argtypes = _compat.parse_kernel_signature(
        signature, "foreign_kernel(%s)" % what,
        "foreign_kernel(%s): signature %r does not parse as a Numba signature such as "
        "'void(CPointer(float32), float32, int64)'" % (what, signature))
    argtypes = [types.unliteral(t) for t in argtypes]  # IntegerLiteral(3): an int64
    names = _param_names(what, names, len(argtypes))
    for name, ty in zip(names, argtypes):
        problem = _fk.c_parameter_problem(ty)
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
        sizes = ptx_param_sizes(data.rstrip(b"\0").decode(errors="replace"), entry)
        if sizes is None:
            raise ValueError("foreign_kernel(%s): the PTX has no entry %r" % (entry, entry))
        expected = _fk.c_sizes(c_types) + [8] * len(extras)
        if sizes != expected:
            raise ValueError(
                "foreign_kernel(%s): entry %r takes parameters of %s bytes; the signature "
                "declares %s" % (entry, entry, sizes, expected))
    elif kind == "cubin":
        try:
            found = entry.encode() in _fk.cubin_functions(data)
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
    declared = _fk.c_sizes(c_types)
    if len(sizes) != len(declared):
        raise ValueError("foreign_kernel(%s): the kernel takes %d parameters (%s bytes); the "
                         "signature declares %d (%s bytes)"
                         % (what, len(sizes), sizes, len(declared), declared))
    for name, ty, want, got in zip(names, c_types, declared, sizes):
        if want != got:
            raise ValueError("foreign_kernel(%s): parameter %r is declared %s (%d bytes); the "
                             "kernel's takes %d bytes" % (what, name, ty, want, got))


def foreign_kernel(source, entry=None, signature=None, *, param_names=None):
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
    what = getattr(source, "name", None) or (entry if isinstance(entry, str) and entry
                                             else type(source).__name__)
    triton = _fk.from_triton(source)
    if triton is not None:
        image, ptx, entry, names, c_types, extras, block, shared = triton
        if signature is not None:
            raise TypeError("foreign_kernel(%s): a Triton kernel declares its own signature"
                            % entry)
        _check_entry(ptx, "ptx", entry, c_types, extras)
        return _build(entry, image, "cubin", "Triton", names, c_types, extras,
                      block=block, sharedmem=shared)
    try:
        found = _fk.from_cuda_core(source)  # an image may be empty bytes: not "or"
        if found is None:
            found = _fk.from_cupy(source)
    except (TypeError, ValueError) as exc:
        raise type(exc)("foreign_kernel(%s): %s" % (what, exc)) from None
    if isinstance(found, _fk.LiveHandle):
        return _from_live(found, entry, signature, param_names)
    origin = "image"
    if found is not None:
        source, origin = found, "cuda.core ObjectCode"
    if entry is None:
        raise TypeError("foreign_kernel(%s): give the entry point's name (entry=...)" % what)
    _check_entry_name(what, entry)
    _require_signature(entry, signature)
    try:
        data, kind = _fk.read_image(source)
    except (TypeError, ValueError) as exc:
        raise type(exc)("foreign_kernel(%s): source: %s" % (entry, exc)) from None
    c_types, names = _declared(entry, signature, param_names)
    _check_entry(data, kind, entry, c_types)
    return _build(entry, data, kind, origin, names, c_types)


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
    _fk.remember_live_kernel(live.address, name)
    return _build(name, None, None, live.source, names, c_types, handle=live.address,
                  handle_kind=live.kind, owner=live.owner)


def _build(entry, data, kind, origin, names, c_types, extras=(), **more):
    c_types = tuple(c_types) + (types.voidptr,) * len(extras)
    return _fk.ForeignKernel(
        name=entry, entry=entry, image=data, kind=kind, source=origin,
        params=_fk.make_parameters(names, extras), c_types=c_types,
        formal=tuple(_formal(t) for t in c_types), **more)
