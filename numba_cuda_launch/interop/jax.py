"""Numba CUDA kernels inside ``jax.jit``, through XLA's typed FFI.

:func:`jax_kernel` turns a ``@cuda.jit`` kernel into a function on
``jax.Array`` values. Each call is an XLA custom call whose handler is a
nopython ``@cfunc`` generated here (no C++, no GIL): it reads the buffers,
attributes and stream from the call frame (:mod:`numba_cuda_launch.xla_ffi`)
and launches the kernel with ``kernel[grid, block, stream, sharedmem]``.

The kernel is called as ``kernel(*inputs, *outputs, *scalars)``: input and
output arrays (C-ordered views of XLA's buffers) followed by the declared
static scalars. JAX is an optional dependency (``pip install
numba-cuda-launch[jax]``), imported when this module is.
"""

import itertools
import threading

import jax
import numba
import numpy as np
from numba.core import types as nt

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.interop import xla_ffi
from numba_cuda_launch.launch.selection import select_kernel

__all__ = ["jax_kernel", "JaxKernel"]

_counter = itertools.count()
_lock = threading.Lock()
_KEEPALIVE = []  # registered handlers must outlive every executable using them


def _dim3(value, what):
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(items) <= 3:
        raise ValueError("%s must be an integer or 1-3 integers, got %r" % (what, value))
    items = tuple(int(v) for v in items)
    if any(v < 1 for v in items):
        raise ValueError("%s must be positive, got %r" % (what, value))
    return items + (1,) * (3 - len(items))


def _is_jitted(fn):
    return isinstance(fn, numba.core.dispatcher.Dispatcher)


def _spec(x):
    return jax.ShapeDtypeStruct(tuple(x.shape), np.dtype(x.dtype))


class JaxKernel:
    """A kernel callable on ``jax.Array`` values (see :func:`jax_kernel`)."""

    def __init__(self, kernel, out_shapes, launch, scalars, sharedmem,
                 input_output_aliases, vmap_method, command_buffer, name):
        if not _compat.is_kernel_dispatcher(kernel):
            raise TypeError("jax_kernel() needs a @cuda.jit kernel, got %r" % (kernel,))
        self.kernel = kernel
        self.kernel_name = _compat.dispatcher_name(kernel)
        self.out_shapes = out_shapes
        self.launch = launch
        self.scalars = dict(scalars or {})
        self.sharedmem = sharedmem
        self.input_output_aliases = dict(input_output_aliases or {})
        self.vmap_method = vmap_method
        self.command_buffer = command_buffer
        self.name = name or "numba_cuda_launch_%s" % self.kernel_name
        self._targets = {}
        self.batch_aware = vmap_method in ("expand_dims", "broadcast_all")
        if self.batch_aware and not _is_jitted(launch):
            raise ValueError(
                "kernel %r: with vmap_method=%r the kernel sees batched arrays whose "
                "shapes are only known when XLA runs it; give `launch` as an @njit "
                "function of the input shapes (and scalars), evaluated at run time"
                % (self.kernel_name, vmap_method))

    # -- trace time -----------------------------------------------------------

    def _outputs(self, in_specs, scalar_values):
        outs = self.out_shapes
        if callable(outs):
            try:
                outs = outs(*in_specs, **scalar_values)
            except TypeError as exc:
                raise TypeError("kernel %r: out_shapes rule failed for %d input(s) and "
                                "scalars %s: %s" % (self.kernel_name, len(in_specs),
                                                    sorted(scalar_values), exc)) from exc
        single = not isinstance(outs, (tuple, list))
        outs = [outs] if single else list(outs)
        return [_spec(o) for o in outs], single

    def _check_scalars(self, scalar_values):
        for name, dtype in self.scalars.items():
            if np.dtype(dtype).kind not in "biuf":
                raise TypeError("kernel %r: scalar %r must be a boolean, integer or float "
                                "dtype, got %s" % (self.kernel_name, name, np.dtype(dtype)))
        unknown = set(scalar_values) - set(self.scalars)
        missing = set(self.scalars) - set(scalar_values)
        if unknown or missing:
            raise TypeError("kernel %r: scalars %s were declared; got %s"
                            % (self.kernel_name, sorted(self.scalars), sorted(scalar_values)))

    def _check(self, in_specs, out_specs, scalar_values):
        params = _compat.dispatcher_param_names(self.kernel)
        n = len(in_specs) + len(out_specs) + len(self.scalars)
        if n != len(params):
            raise TypeError(
                "kernel %r takes %d parameters (%s); got %d inputs, %d outputs and "
                "%d scalars" % (self.kernel_name, len(params), ", ".join(params),
                                len(in_specs), len(out_specs), len(self.scalars)))
        for what, specs in (("input", in_specs), ("output", out_specs)):
            for i, s in enumerate(specs):
                if s.dtype not in xla_ffi.DTYPES:
                    raise TypeError("kernel %r %s %d: dtype %s cannot be passed to a kernel"
                                    % (self.kernel_name, what, i, s.dtype))
        for i, o in self.input_output_aliases.items():
            if not (0 <= i < len(in_specs) and 0 <= o < len(out_specs)):
                raise ValueError("kernel %r: input_output_aliases {%d: %d} names no such "
                                 "input/output" % (self.kernel_name, i, o))
            if (in_specs[i].shape, in_specs[i].dtype) != (out_specs[o].shape, out_specs[o].dtype):
                raise ValueError(
                    "kernel %r: input %d (%s%s) cannot alias output %d (%s%s): shapes and "
                    "dtypes must match" % (self.kernel_name, i, in_specs[i].dtype,
                                           list(in_specs[i].shape), o, out_specs[o].dtype,
                                           list(out_specs[o].shape)))

    def _argtypes(self, in_specs, out_specs, extra_dims=0):
        arrays = [nt.Array(numba.from_dtype(s.dtype), len(s.shape) + extra_dims, "C")
                  for s in list(in_specs) + list(out_specs)]
        return tuple(arrays) + tuple(numba.from_dtype(np.dtype(t)) for t in self.scalars.values())

    def handler(self, in_specs, out_specs):
        """The compiled FFI handler (a ``@cfunc``) for these input and output
        shape/dtype structs; compiled once per dtype-and-rank signature."""
        return self._compiled(in_specs, out_specs)[1]

    def _compiled(self, in_specs, out_specs):
        key = (tuple((len(s.shape), np.dtype(s.dtype)) for s in in_specs),
               tuple((len(s.shape), np.dtype(s.dtype)) for s in out_specs))
        with _lock:
            compiled = self._targets.get(key)
            if compiled is None:
                variants = [self._argtypes(in_specs, out_specs, extra)
                            for extra in ((0, 1) if self.batch_aware else (0,))]
                for argtypes in variants:
                    try:
                        select_kernel(self.kernel, argtypes)
                    except KernelTypingError as exc:
                        raise TypeError(
                            "%s\n(the kernel is called with the inputs, then the outputs, "
                            "then the scalars%s)" % (exc, ", with a leading batch dimension"
                                                     if argtypes is not variants[0] else "")
                        ) from None
                handler = _make_handler(self.kernel, len(in_specs), variants,
                                        list(self.scalars.items()), self.command_buffer,
                                        self.launch if _is_jitted(self.launch) else None)
                compiled = self._targets[key] = ["%s_%d" % (self.name, next(_counter)),
                                                 handler, False]
        return compiled

    def _target(self, in_specs, out_specs):
        compiled = self._compiled(in_specs, out_specs)
        with _lock:
            if not compiled[2]:
                name, handler, _ = compiled
                stages = {"execute": jax.ffi.pycapsule(handler.ctypes)}
                if self.command_buffer:
                    stages["initialize"] = stages["execute"]
                jax.ffi.register_ffi_target(name, stages, platform="CUDA", api_version=1)
                _KEEPALIVE.append(handler)
                compiled[2] = True
        return compiled[0]

    def __call__(self, *arrays, **scalar_values):
        self._check_scalars(scalar_values)
        in_specs = [_spec(a) for a in arrays]
        out_specs, single = self._outputs(in_specs, scalar_values)
        self._check(in_specs, out_specs, scalar_values)
        attrs = {"ncl_sharedmem": np.int64(self.sharedmem)}
        if not _is_jitted(self.launch):
            if callable(self.launch):
                grid, block = self.launch(*in_specs, **scalar_values)
            else:
                grid, block = self.launch
            grid, block = _dim3(grid, "grid"), _dim3(block, "block")
            attrs.update({"ncl_grid_%s" % a: np.int64(v) for a, v in zip("xyz", grid)})
            attrs.update({"ncl_block_%s" % a: np.int64(v) for a, v in zip("xyz", block)})
        for name, ty in self.scalars.items():
            attrs["ncl_s_" + name] = np.asarray(scalar_values[name], dtype=ty)[()]
        call = jax.ffi.ffi_call(
            self._target(in_specs, out_specs), out_specs,
            input_output_aliases=self.input_output_aliases or None,
            vmap_method=self.vmap_method)
        out = call(*arrays, **attrs)
        return out[0] if single else out


def jax_kernel(kernel, out_shapes, launch, *, scalars=None, sharedmem=0,
               input_output_aliases=None, vmap_method="sequential",
               command_buffer=True, name=None):
    """Wrap a ``@cuda.jit`` kernel as a function on ``jax.Array`` values.

    Parameters
    ----------
    kernel:
        the kernel; it is called as ``kernel(*inputs, *outputs, *scalars)``
        with C-ordered arrays over XLA's buffers.
    out_shapes:
        a ``jax.ShapeDtypeStruct`` (or anything with ``shape`` and ``dtype``),
        a list of them, or a function of the inputs' shape/dtype structs and
        the scalars returning one of those.
    launch:
        ``(grid, block)``, or a function of the inputs' structs and the
        scalars returning it (integers or 1-3 integer tuples), evaluated at
        trace time; or an ``@njit`` function of the input shapes (tuples)
        and the scalars (positionally), evaluated by the handler at run time
        with the shapes XLA passes (needed for batch-aware ``vmap``).
    scalars:
        ``{name: dtype}`` of static scalar parameters, passed by keyword at
        call time and to the kernel after the outputs, as XLA attributes.
    sharedmem:
        dynamic shared memory in bytes.
    input_output_aliases:
        ``{input index: output index}``: the output is written in place of
        the input (as in ``jax.ffi.ffi_call``).
    vmap_method:
        how ``jax.vmap`` handles the call (``jax.ffi.ffi_call``'s argument):
        ``"sequential"`` loops; ``"expand_dims"`` / ``"broadcast_all"`` give
        the kernel the batch as a leading dimension (a batch-aware kernel,
        compiled for both ranks; needs an ``@njit`` launch rule).
    command_buffer:
        declare the handler safe for XLA command buffers (CUDA graphs): the
        kernel image is loaded in the handler's initialize stage, before any
        capture.
    """
    return JaxKernel(kernel, out_shapes, launch, scalars, sharedmem,
                     input_output_aliases, vmap_method, command_buffer, name)


def _make_handler(kernel, n_in, variants, scalars, command_buffer, launch_rule):
    """Generate and compile the FFI handler cfunc for one signature; one
    branch per rank variant (a batch-aware kernel also takes a leading batch
    dimension), chosen by the rank of the first buffer."""
    lines = [
        "def handler(frame):",
        "    if ffi.is_metadata_query(frame):",
        "        return ffi.answer_metadata_query(frame, TRAITS, MAJOR, MINOR)",
        "    rank = ffi.buffer_rank(%s)" % ("ffi.arg_buffer(frame, 0)" if n_in
                                        else "ffi.ret_buffer(frame, 0)"),
    ]
    dtypes = {}
    for v, argtypes in enumerate(variants):
        arrays = [t for t in argtypes if isinstance(t, nt.Array)]
        lines.append("    %s rank == %d:" % ("if" if v == 0 else "elif", arrays[0].ndim))
        names = []
        for i, ty in enumerate(arrays):
            buf = "ffi.arg_buffer(frame, %d)" % i if i < n_in else \
                "ffi.ret_buffer(frame, %d)" % (i - n_in)
            lines.append("        a%d = ffi.buffer_as_array(%s, %d, DT%d)" % (i, buf, ty.ndim, i))
            dtypes["DT%d" % i] = np.dtype(str(ty.dtype)).type
            names.append("a%d" % i)
        scalar_names = []
        for j, (name, dtype) in enumerate(scalars):
            getter = "attr_float" if np.dtype(dtype).kind in "fc" else "attr_int"
            lines.append("        s%d = ST%d(ffi.%s(frame, 'ncl_s_%s'))" % (j, j, getter, name))
            scalar_names.append("s%d" % j)
        args = ", ".join(names + scalar_names)
        if launch_rule is not None:
            shapes = ", ".join("a%d.shape" % i for i in range(n_in))
            config = "LAUNCH(%s)" % ", ".join(x for x in (shapes, ", ".join(scalar_names)) if x)
            get_config = ["            grid, block = %s" % config]
        else:
            get_config = [
                "            grid = (ffi.attr_int(frame, 'ncl_grid_x'), "
                "ffi.attr_int(frame, 'ncl_grid_y'), ffi.attr_int(frame, 'ncl_grid_z'))",
                "            block = (ffi.attr_int(frame, 'ncl_block_x'), "
                "ffi.attr_int(frame, 'ncl_block_y'), ffi.attr_int(frame, 'ncl_block_z'))",
            ]
        lines += [
            "        if ffi.execution_stage(frame) != ffi.STAGE_EXECUTE:",
            "            status = kernel[1, 1].preload(%s)" % args,
            "        else:",
        ] + get_config + [
            "            shmem = ffi.attr_int(frame, 'ncl_sharedmem')",
            "            status = kernel[grid, block, ffi.stream(frame), shmem]"
            ".launch_status(%s)" % args,
        ]
    lines += [
        "    else:",
        "        return ffi.error(frame, ffi.c_string(%r))"
        % ("numba_cuda_launch: CUDA kernel '%s' got buffers of an unexpected rank"
           % _compat.dispatcher_name(kernel)),
        "    if status != 0:",
        "        return ffi.launch_error(frame, status, %r)"
        % ("numba_cuda_launch: CUDA kernel '%s'" % _compat.dispatcher_name(kernel)),
        "    return ffi.ok()",
    ]
    major, minor = xla_ffi.api_version()
    ns = {"ffi": xla_ffi, "kernel": kernel, "np": np, "MAJOR": major, "MINOR": minor,
          "LAUNCH": launch_rule,
          "TRAITS": xla_ffi.COMMAND_BUFFER_COMPATIBLE if command_buffer else 0}
    ns.update(dtypes)
    for j, (_, dtype) in enumerate(scalars):
        ns["ST%d" % j] = np.dtype(dtype).type
    exec("\n".join(lines), ns)
    return numba.cfunc(nt.voidptr(nt.voidptr))(ns["handler"])
