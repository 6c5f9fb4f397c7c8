"""Numba CUDA kernels inside ``jax.jit``, through XLA's typed FFI (docs/jax.md).

:func:`jax_kernel` makes a kernel of any compiler adapter a function on ``jax.Array``
values; each call is an XLA custom call whose handler (:mod:`.jax_handler`) launches it.
Target names derive from the kernel's definition, never a counter, so a ``jax.export``
finds them again in another process (docs/jax.md, "Exporting"); handlers are kept in an
on-disk cache across processes (:mod:`.handler_cache`; docs/jax.md, "The handler cache").
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
import threading
from collections import namedtuple
from contextlib import nullcontext
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numba
import numpy as np
from numba.core import types as nt

from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.interop import handler_cache, jax_handler, xla_ffi
from numba_cuda_launch.interop.handler_cache import cache_dir, clear_cache
from numba_cuda_launch.interop.kernel_call import (
    bind_scalars, describe as _describe, is_int as _is_int, kernel_compiler,
    launch_dims as _launch_dims, refuse_launch_rule, refuse_unlaunchable, sharedmem_problem)
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.plan import plan_launch

if TYPE_CHECKING:
    from jax.export import DisabledSafetyCheck, Exported
    from numpy.typing import DTypeLike

__all__ = ["jax_kernel", "JaxKernel", "export", "deserialize", "disabled_checks",
           "registered_targets", "missing_targets", "cache_dir", "clear_cache"]

# The contract between call sites (attribute names and meaning) and the
# handlers: part of every target name, bumped whenever that contract changes,
# so an old export never meets a handler that reads it differently.
_ABI = 1
_PREFIX = "ncl."
_lock = threading.RLock()
# Target name -> _Target, for the life of the process: XLA keeps the handler
# pointers of every executable, and one name maps to one handler.
_REGISTRY: dict[str, _Target] = {}
_BODIES: dict[Any, Any] = {}  # (kernel, rule, options, layout) -> jax_handler.HandlerBody
_Target = namedtuple("_Target", "kernel rule config handler")


def _is_jitted(fn):
    return isinstance(fn, numba.core.dispatcher.Dispatcher)


#: jax.ffi.ffi_call's vmap methods
_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized", None)


def _add_note(exc, note):
    """Add *note* to exception *exc* (shown under its message, Python 3.11+;
    older Pythons show the exception alone)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)


def _spec(x, refusal):
    """*x* (anything with a tuple ``shape`` and a ``dtype``) as a ``jax.ShapeDtypeStruct``;
    else ``TypeError(refusal())``."""
    try:
        shape, dtype = x.shape, np.dtype(x.dtype)
        if isinstance(shape, (tuple, list)):
            return jax.ShapeDtypeStruct(tuple(shape), dtype)
    except Exception:
        pass
    raise TypeError(refusal())


def _number(value):
    """(kind 'b', 'i', 'f' or 'c', value) of a number or 0-d array; None for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return "b", bool(value)
    if isinstance(value, (int, np.integer)):
        return "i", int(value)
    if isinstance(value, (float, np.floating)):
        return "f", value
    if isinstance(value, (complex, np.complexfloating)):
        return "c", value
    if isinstance(value, (np.ndarray, jax.Array)) and getattr(value, "shape", None) == ():
        return _number(np.asarray(value)[()])
    return None


def _scalar_attribute(kname, pname, dtype, value):
    """The XLA attribute for scalar *pname* of *dtype*: refused when the
    conversion would lose information (float -> integer, complex -> real, a
    number -> bool, out of range)."""
    what = "kernel %r scalar %r (%s)" % (kname, pname, dtype)
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            "%s: got a traced value; scalars are static XLA attributes fixed when the "
            "function is traced: pass a Python or NumPy number, or make it an input array"
            % what)
    number = _number(value)
    if number is None:
        raise TypeError("%s: expected a number, got %s" % (what, _describe(value)))
    kind, v = number
    if dtype.kind == "b":
        if kind != "b":
            raise TypeError("%s: expected True or False, got %s (a bool parameter takes "
                            "only a bool)" % (what, _describe(value)))
        return np.bool_(v)
    if kind == "c":
        raise TypeError("%s: got complex %r; complex -> real conversion is refused "
                        "(it drops the imaginary part)" % (what, complex(v)))
    if dtype.kind in "iu":
        if kind == "f":
            raise TypeError("%s: got float %r; float -> integer conversion is refused (it "
                            "truncates): pass an integer" % (what, float(v)))
        info = np.iinfo(dtype)
        if not info.min <= v <= info.max:
            raise ValueError("%s: %d is out of range [%d, %d]" % (what, v, info.min, info.max))
        if v >= 1 << 63:
            # jax makes no XLA attribute of a uint64 above int64's range
            # (std::bad_cast when lowering)
            raise ValueError("%s: %d cannot be passed: jax makes XLA attributes of integers up "
                             "to 2**63-1 only; pass it in an input array" % (what, v))
        return dtype.type(v)
    # float parameter: bools and integers convert (rounding), overflow is refused
    try:
        with np.errstate(over="ignore"):
            converted = np.asarray(v, dtype=np.float64).astype(dtype)[()]
            finite_in = np.isfinite(np.float64(v))
    except OverflowError:
        converted, finite_in = np.inf, True
    if finite_in and not np.isfinite(converted):
        raise ValueError("%s: %r is out of range (largest finite %s is %r)"
                         % (what, v if kind == "i" else float(v), dtype,
                            np.finfo(dtype).max.item()))
    if dtype == np.float16:
        # XLA's scalar attributes carry F32/F64 only; every float16 is exactly
        # a float32, and the handler converts it back with integer arithmetic.
        return np.float32(converted)
    return converted


def _signature_key(in_specs, out_specs):
    return tuple(tuple((len(s.shape), np.dtype(s.dtype)) for s in specs)
                 for specs in (in_specs, out_specs))


def _signature_text(key, scalar_dtypes):
    def part(items):
        return "_".join("%sr%d" % (dt.name, rank) for rank, dt in items) or "none"
    return "%s.%s.%s" % (part(key[0]), part(key[1]),
                         "_".join(d.name for d in scalar_dtypes) or "none")


class JaxKernel:
    """A kernel callable on ``jax.Array`` values (see :func:`jax_kernel`):
    the settings given there as attributes, ``scalars`` as ``{name: dtype}``."""

    kernel: Any
    kernel_name: str
    scalars: dict[str, np.dtype[Any]]
    out_shapes: Any
    launch: Any
    sharedmem: int
    input_output_aliases: dict[int, int]
    vmap_method: str
    command_buffer: bool
    name: str | None
    batch_aware: bool
    dependent: bool
    cache: bool

    def __init__(self, kernel: Any, out_shapes: Any, launch: Any,
                 scalars: Mapping[str, DTypeLike] | None, sharedmem: int,
                 input_output_aliases: Mapping[int, int] | None, vmap_method: str,
                 command_buffer: bool, name: str | None,
                 signatures: Sequence[Sequence[Any]] | None = None,
                 dependent: bool = False, cache: bool = True) -> None:
        self._compiler = compiler = kernel_compiler(kernel, "jax_kernel")
        self.kernel = kernel
        self.kernel_name = kname = compiler.kernel_name(kernel)
        refuse_unlaunchable(compiler, kernel, "jax_kernel")
        self.scalars = bind_scalars(compiler, kernel, scalars, "jax_kernel")
        if out_shapes is None:
            raise TypeError("kernel %r: out_shapes is required: a jax.ShapeDtypeStruct, a list "
                            "of them, or a function of the inputs' structs and the scalars"
                            % kname)
        self.out_shapes = out_shapes
        if launch is None or not (callable(launch) or isinstance(launch, (tuple, list))):
            raise TypeError(
                "kernel %r: launch must be (grid, block), a function of the inputs' structs "
                "and the scalars returning it, or an @njit function of the input shapes and "
                "the scalars; got %s" % (kname, _describe(launch)))
        self.launch = launch
        self._static_dims = None if callable(launch) else _launch_dims(launch, kname, "launch")
        problem = sharedmem_problem(sharedmem)
        if problem:
            raise problem[0]("kernel %r: %s" % (kname, problem[1]))
        self.sharedmem = int(sharedmem)
        if input_output_aliases is not None and not isinstance(input_output_aliases, Mapping):
            raise TypeError("kernel %r: input_output_aliases must be a dict {input index: "
                            "output index}, got %s" % (kname, _describe(input_output_aliases)))
        self.input_output_aliases = dict(input_output_aliases or {})
        if vmap_method not in _VMAP_METHODS:
            raise ValueError("kernel %r: vmap_method must be one of %s, got %s"
                             % (kname, ", ".join(repr(m) for m in _VMAP_METHODS),
                                _describe(vmap_method)))
        self.vmap_method = vmap_method
        self.command_buffer = bool(command_buffer)
        if not isinstance(dependent, (bool, np.bool_)):
            raise TypeError("kernel %r: dependent must be True or False, got %s"
                            % (kname, _describe(dependent)))
        self.dependent = bool(dependent)
        if not isinstance(cache, (bool, np.bool_)):
            raise TypeError("kernel %r: cache must be True or False, got %s"
                            % (kname, _describe(cache)))
        self.cache = bool(cache)
        if name is not None and not isinstance(name, str):
            raise TypeError("kernel %r: name must be a string, got %s" % (kname, _describe(name)))
        self.name = name
        base = name or compiler.qualified_name(kernel)
        self._base = _PREFIX + re.sub(r"[^A-Za-z0-9_.]", "_", base)
        self._rule = launch if _is_jitted(launch) else None
        self.batch_aware = vmap_method in ("expand_dims", "broadcast_all")
        if self.batch_aware and self._rule is None:
            raise ValueError(
                "kernel %r: with vmap_method=%r the kernel sees batched arrays whose "
                "shapes are only known when XLA runs it; give `launch` as an @njit "
                "function of the input shapes (and scalars), evaluated at run time"
                % (kname, vmap_method))
        rule_id = None if self._rule is None else "%s.%s" % (
            self._rule.py_func.__module__, self._rule.py_func.__qualname__)
        self._config = (_ABI, self.command_buffer, self.batch_aware, rule_id,
                        tuple(self.scalars.values())) + (("dependent",) if self.dependent else ())
        self._tag = hashlib.sha1(repr(self._config).encode()).hexdigest()[:8]
        self._targets: dict[Any, str] = {}  # signature key -> target name
        if signatures is not None:
            if not isinstance(signatures, (list, tuple)):
                raise TypeError("kernel %r: signatures must be a list of input tuples, got %s"
                                % (kname, _describe(signatures)))
            for sig in signatures:
                if not isinstance(sig, (list, tuple)):
                    raise TypeError("kernel %r: each signature is a tuple of inputs (shape/dtype "
                                    "structs), optionally ending with a dict of scalars; got %s"
                                    % (kname, _describe(sig)))
                sig = list(sig)
                values = sig.pop() if sig and isinstance(sig[-1], Mapping) else {}
                self.register(*sig, **values)

    # -- trace time -----------------------------------------------------------

    def _scalar_attrs(self, scalar_values):
        if set(scalar_values) != set(self.scalars):
            raise TypeError("kernel %r: scalars %s were declared; got %s"
                            % (self.kernel_name, sorted(self.scalars), sorted(scalar_values)))
        return {name: _scalar_attribute(self.kernel_name, name, dtype, scalar_values[name])
                for name, dtype in self.scalars.items()}

    def _inputs(self, arrays):
        return [_spec(a, lambda: (
            "kernel %r input %d: expected an array (anything with .shape and .dtype), got %s; "
            "scalars are passed by keyword (%s)"
            % (self.kernel_name, i, _describe(a),
               ", ".join("%s=..." % n for n in self.scalars) or "this kernel has none")))
            for i, a in enumerate(arrays)]

    def _check_arity(self, fn, setting, n_in):
        """Refuse a *setting* (``"launch="``) function that cannot be called as it will be."""
        jitted = _is_jitted(fn)
        try:
            sig = inspect.signature(fn.py_func if jitted else fn)
        except (TypeError, ValueError):
            return  # no signature to check (a builtin, a C function)
        names = list(self.scalars)
        try:
            if jitted:
                sig.bind(*range(n_in + len(names)))
            else:
                sig.bind(*range(n_in), **dict.fromkeys(names))
        except TypeError as exc:
            given = ("the shapes of the kernel's %d input(s), then its %d scalar(s) %s "
                     "positionally" % (n_in, len(names), names) if jitted else
                     "the shape/dtype structs of the kernel's %d input(s), then its %d "
                     "scalar(s) %s by keyword" % (n_in, len(names), names))
            raise TypeError(
                "kernel %r: the %s function %s takes %d parameter(s) %s, but it is called "
                "with %s (%s)" % (self.kernel_name, setting, getattr(fn, "__name__", fn),
                                  len(sig.parameters), sig, given, exc)) from None

    def _outputs(self, in_specs, scalar_values):
        outs = self.out_shapes
        if callable(outs):
            self._check_arity(outs, "out_shapes=", len(in_specs))
            try:
                outs = outs(*in_specs, **scalar_values)
            except TypeError as exc:
                raise TypeError("kernel %r: out_shapes rule failed for %d input(s) and "
                                "scalars %s: %s" % (self.kernel_name, len(in_specs),
                                                    sorted(scalar_values), exc)) from exc
            except Exception as exc:  # the user's own, kept: said where it came from
                _add_note(exc, "raised by the out_shapes= rule of jax_kernel of kernel %r"
                          % self.kernel_name)
                raise
        single = not isinstance(outs, (tuple, list))
        outs = [outs] if single else list(outs)
        specs = []
        for i, o in enumerate(outs):
            spec = _spec(o, lambda: (
                "kernel %r: out_shapes gave %s for output %d; expected a jax.ShapeDtypeStruct "
                "(anything with .shape and .dtype) or a list of them"
                % (self.kernel_name, _describe(o), i)))
            shape = spec.shape
            if any(not _is_int(n) and not jax.export.is_symbolic_dim(n) for n in shape):
                raise TypeError(
                    "kernel %r: out_shapes gave shape %r for output %d; extents are integers"
                    % (self.kernel_name, tuple(shape), i))
            # XLA aborts the process on a byte size beyond int64 (symbolic
            # extents are jax's to judge)
            if all(_is_int(n) for n in shape) and (any(n < 0 for n in shape) or math.prod(
                    int(n) for n in shape) * spec.dtype.itemsize >= 1 << 63):
                raise ValueError(
                    "kernel %r: out_shapes gave shape %r for output %d; extents are integers "
                    ">= 0 and an output holds less than 2**63 bytes"
                    % (self.kernel_name, tuple(shape), i))
            specs.append(spec)
        return specs, single

    def _check(self, in_specs, out_specs):
        params = self._compiler.param_names(self.kernel)
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
            if not (_is_int(i) and _is_int(o) and 0 <= i < len(in_specs)
                    and 0 <= o < len(out_specs)):
                raise ValueError("kernel %r: input_output_aliases {%r: %r} names no such "
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
        return tuple(arrays) + tuple(numba.from_dtype(t) for t in self.scalars.values())

    def _prepare(self, arrays, scalar_values):
        """The target name (registered), output structs and attributes of a call."""
        in_specs = self._inputs(arrays)
        scalar_attrs = self._scalar_attrs(scalar_values)
        out_specs, single = self._outputs(in_specs, scalar_values)
        self._check(in_specs, out_specs)
        attrs = {"ncl_sharedmem": np.int64(self.sharedmem)}
        if self._rule is None:
            if self._static_dims is not None:
                grid, block = self._static_dims
            else:
                self._check_arity(self.launch, "launch=", len(in_specs))
                try:
                    dims = self.launch(*in_specs, **scalar_values)
                except Exception as exc:  # the user's own, kept: said where it came from
                    _add_note(exc, "raised by the launch= rule of jax_kernel of kernel %r"
                              % self.kernel_name)
                    raise
                grid, block = _launch_dims(dims, self.kernel_name, "launch rule")
            attrs.update({"ncl_grid_%s" % a: np.int64(v) for a, v in zip("xyz", grid)})
            attrs.update({"ncl_block_%s" % a: np.int64(v) for a, v in zip("xyz", block)})
        attrs.update({"ncl_s_" + name: v for name, v in scalar_attrs.items()})
        return self._target(in_specs, out_specs), out_specs, single, attrs

    def handler(self, in_specs: Sequence[Any], out_specs: Sequence[Any]) -> Any:
        """The FFI handler for these input and output shape/dtype structs,
        registered once per dtype-and-rank signature: a
        :class:`~numba_cuda_launch.interop.jax_handler.Handler` (its
        ``address``, ``ctypes`` function pointer, ``body`` shared by the
        signatures of its layout, ``cache_hits``)."""
        return _REGISTRY[self._target(in_specs, out_specs)].handler

    def target_name(self, in_specs: Sequence[Any], out_specs: Sequence[Any]) -> str:
        """The FFI target name for these input and output structs (registered)."""
        return self._target(in_specs, out_specs)

    def register(self, *inputs: Any, **scalar_values: Any) -> str:
        """Compile and register the handler for calls with these inputs
        (arrays or shape/dtype structs; only dtypes and ranks matter) and
        scalars, as a call would, without tracing; returns the target name."""
        return self._prepare(inputs, scalar_values)[0]

    @property
    def target_names(self) -> list[str]:
        """Names of the FFI targets registered for this kernel so far."""
        return sorted(self._targets.values())

    def _target(self, in_specs, out_specs):
        key = _signature_key(in_specs, out_specs)
        name = self._targets.get(key)
        if name is None:
            with _lock:
                name = self._targets.get(key)
                if name is None:
                    name = self._targets[key] = self._register(key, in_specs, out_specs)
        return name

    def _register(self, key, in_specs, out_specs):
        base = "%s.%s.%s" % (self._base, _signature_text(key, self.scalars.values()), self._tag)
        name, n = base, 1
        while name in _REGISTRY:
            other = _REGISTRY[name]
            if other.kernel is self.kernel and other.rule is self._rule \
                    and other.config == self._config:
                return name  # another JaxKernel over the same kernel and options
            n += 1  # a different kernel of the same name (e.g. defined in a function)
            name = "%s.%d" % (base, n)
        if self._rule is not None:
            self._check_arity(self._rule, "launch=", len(in_specs))
        variants = [self._argtypes(in_specs, out_specs, extra)
                    for extra in ((0, 1) if self.batch_aware else (0,))]
        plans = []
        for argtypes in variants:
            try:
                plans.append(plan_launch(self.kernel, argtypes, self._compiler))
            except KernelTypingError as exc:
                raise TypeError(
                    "%s\n(the kernel is called with the inputs, then the outputs, "
                    "then the scalars%s)" % (exc, ", with a leading batch dimension"
                                             if argtypes is not variants[0] else "")
                ) from None
        # one body per layout of this kernel and these options (as targets are
        # shared by JaxKernels over the same kernel and options)
        layout = jax_handler.layout_key(variants, plans, len(in_specs))
        key = (self.kernel, self._rule, self._config, layout)
        body = _BODIES.get(key)
        if body is None:
            body = _BODIES[key] = self._make_body(name, in_specs, variants, plans, layout)
        handler = jax_handler.bind(body, name, variants, plans)
        stages = {"execute": jax.ffi.pycapsule(handler.ctypes)}
        if self.command_buffer:
            stages["initialize"] = stages["execute"]
        # A simulator kernel runs on host memory: its handler is XLA:CPU's, and
        # the other platform gets a handler saying why the call cannot run there.
        simulated = BACKEND.runs_on_host
        runs_on, refused_on = ("cpu", "CUDA") if simulated else ("CUDA", "cpu")
        jax.ffi.register_ffi_target(name, stages, platform=runs_on, api_version=1)
        refusal = jax_handler.refusal(self.kernel_name, simulated, self._compiler.name)
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(refusal.ctypes),
                                    platform=refused_on, api_version=1)
        _REGISTRY[name] = _Target(self.kernel, self._rule, self._config, handler)
        return name

    def _make_body(self, name, in_specs, variants, plans, layout):
        """The handler body of target *name*'s *layout* (:func:`.jax_handler.layout_key`,
        :func:`.jax_handler.make_body`), loaded from the handler cache when it holds it."""
        n_in, n_out = len(in_specs), len(variants[0]) - len(in_specs) - len(self.scalars)
        described = jax_handler.described_images(plans)
        cache = None
        if self.cache:
            # a body taking images from descriptors serves its layout: keyed
            # by that, every signature of it (in any process) finds it
            cache = handler_cache.handler_cache(
                self._base + ".body" if described else name, plans, self._rule,
                (self.kernel_name, n_in, str(layout),
                 str(list(self.scalars.items())), self._config), described)
        # Cached code holds no Python object of this process: where launches
        # would (the simulator's), they find the kernel by the target's name.
        with BACKEND.launches_by_name({name: self.kernel}) if cache else nullcontext():
            try:
                return jax_handler.make_body(
                    self.kernel, self.kernel_name, n_in, variants, list(self.scalars.items()),
                    self.command_buffer, self._rule, self.dependent, described, cache)
            except numba.core.errors.TypingError:
                if self._rule is not None:  # say what is wrong with the rule, if it is
                    for argtypes in variants:
                        refuse_launch_rule(
                            self._rule, [nt.UniTuple(nt.intp, t.ndim) for t in argtypes[:n_in]]
                            + list(argtypes[n_in + n_out:]),
                            self.kernel_name, "the shapes of its %d input(s) and its %d "
                            "scalar(s)" % (n_in, len(self.scalars)))
                raise

    def __call__(self, *arrays: Any, **scalar_values: Any) -> Any:
        """The outputs (one ``jax.Array``, or a list as ``out_shapes`` gives
        them) of the kernel called on *arrays* and the scalars by name."""
        name, out_specs, single, attrs = self._prepare(arrays, scalar_values)
        call = jax.ffi.ffi_call(
            name, out_specs,
            input_output_aliases=self.input_output_aliases or None,
            vmap_method=self.vmap_method)
        out = call(*arrays, **attrs)
        return out[0] if single else out

    def disabled_checks(self) -> list[DisabledSafetyCheck]:
        """``jax.export`` safety-check exemptions for this kernel's targets."""
        return _checks(self.target_names)


def jax_kernel(kernel: Any, out_shapes: Any, launch: Any, *,
               scalars: Mapping[str, DTypeLike] | None = None, sharedmem: int = 0,
               input_output_aliases: Mapping[int, int] | None = None,
               vmap_method: str = "sequential", command_buffer: bool = True,
               name: str | None = None,
               signatures: Sequence[Sequence[Any]] | None = None,
               dependent: bool = False, cache: bool = True) -> JaxKernel:
    """Wrap a kernel as a function on ``jax.Array`` values (docs/jax.md).

    Parameters
    ----------
    kernel:
        a ``@cuda.jit`` kernel of numba-cuda or numba-cuda-mlir, or a foreign kernel;
        called as ``kernel(*inputs, *outputs, *scalars)`` on C-ordered views of XLA's
        buffers, with at least one array parameter.
    out_shapes:
        a ``jax.ShapeDtypeStruct``, a list of them, or a function of the inputs'
        structs and the scalars returning one of those.
    launch:
        ``(grid, block)``; a function of the inputs' structs and the scalars
        returning it, at trace time; or an ``@njit`` function of the input shapes
        and the scalars (positionally), in the handler at run time.
    scalars:
        ``{name: dtype}`` of the kernel's last parameters, passed by keyword at
        call time as XLA attributes; a value the dtype cannot hold exactly in kind
        is refused.
    sharedmem:
        dynamic shared memory in bytes.
    input_output_aliases:
        ``{input index: output index}``, as in ``jax.ffi.ffi_call``.
    vmap_method:
        ``jax.ffi.ffi_call``'s; ``"expand_dims"``/``"broadcast_all"`` give the
        kernel the batch as a leading dimension (needs an ``@njit`` launch rule).
    command_buffer:
        declare the handler safe for XLA command buffers (CUDA graphs).
    name:
        the base of the FFI target names instead of the kernel's ``module.qualname``.
    signatures:
        calls to register now: input tuples (arrays or structs), each optionally
        ending with a dict of scalar values (see :meth:`JaxKernel.register`).
    dependent:
        launch as a programmatic dependent launch (``kernel[...].dependent()``,
        compute capability 9.0 or newer): the kernel may start while the work
        before it on XLA's stream drains, and waits for it with
        ``griddepcontrol_wait()`` (docs/graphs.md, "Dependent launches").
    cache:
        load each signature's handler from the on-disk cache when a process
        compiled it before, and save it there when compiled (docs/jax.md,
        "The handler cache"; ``NUMBA_CUDA_LAUNCH_JAX_CACHE=0`` turns it off
        for every kernel).
    """
    return JaxKernel(kernel, out_shapes, launch, scalars, sharedmem,
                     input_output_aliases, vmap_method, command_buffer, name, signatures,
                     dependent, cache)


# -- jax.export ---------------------------------------------------------------

def registered_targets() -> list[str]:
    """Names of every FFI target this package registered in this process."""
    with _lock:
        return sorted(_REGISTRY)


def _checks(names):
    from jax import export as jex

    return [jex.DisabledSafetyCheck.custom_call(n) for n in names]


def disabled_checks() -> list[DisabledSafetyCheck]:
    """``jax.export.DisabledSafetyCheck`` exemptions for every target
    registered so far (``jax.export`` refuses custom calls it does not know
    to be stable; this package's target names are stable by construction)."""
    return _checks(registered_targets())


def export(fun: Any, *, disabled_checks: Sequence[DisabledSafetyCheck] = (),
           **kwargs: Any) -> Callable[..., Exported]:
    """``jax.export.export`` for a ``jax.jit`` function calling kernels:
    ``export(jax.jit(f), platforms=...)(*args)`` traces *fun* once to
    register its kernels' targets, then exports with those targets exempted
    from the custom-call safety check (plus *disabled_checks*)."""
    if not hasattr(fun, "trace"):
        raise TypeError("export() takes a jax.jit-ed function (as jax.export.export does), "
                        "got %s" % _describe(fun))

    def exporter(*args: Any, **kw: Any) -> Exported:
        fun.trace(*args, **kw)
        checks = list(disabled_checks) + _checks(registered_targets())
        return jax.export.export(fun, disabled_checks=checks, **kwargs)(*args, **kw)
    return exporter


_TARGET_IN_MLIR = re.compile(r'(?:custom_call @|call_target_name = ")(%s[A-Za-z0-9_.]+)'
                             % re.escape(_PREFIX))


def missing_targets(exported: Exported) -> list[str]:
    """This package's FFI targets an ``Exported`` calls that are not
    registered in this process (sorted names)."""
    names = set(_TARGET_IN_MLIR.findall(exported.mlir_module()))
    with _lock:
        return sorted(names - set(_REGISTRY))


def _explain(name):
    parts = name[len(_PREFIX):].split(".")
    if len(parts) > 1 and parts[-1].isdigit():
        parts = parts[:-1]
    if len(parts) < 5:
        return name
    ins, outs, scalars = parts[-4], parts[-3], parts[-2]
    return "%s (kernel %s; inputs %s -> outputs %s; scalars %s)" % (
        name, ".".join(parts[:-4]), ins.replace("_", ", "), outs.replace("_", ", "),
        scalars.replace("_", ", "))


def deserialize(blob: bytes | bytearray) -> Exported:
    """``jax.export.deserialize(blob)``, refusing with a clear error an
    export whose kernels' targets this process has not registered (XLA
    would fail later, when compiling the call, with ``No FFI handler
    registered for ...``)."""
    exported = jax.export.deserialize(blob)
    missing = missing_targets(exported)
    if missing:
        raise RuntimeError(
            "the exported function calls numba-cuda-launch kernels not registered in this "
            "process:\n  %s\nImport the module that defines each kernel and register these "
            "signatures before deserializing: jax_kernel(..., signatures=[...]) at import, or "
            "k.register(*inputs, **scalars) (rank rN means N dimensions; see docs/jax.md)"
            % "\n  ".join(_explain(n) for n in missing))
    return exported
