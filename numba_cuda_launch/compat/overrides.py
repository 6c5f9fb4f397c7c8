"""Every replacement of a Numba, numba-cuda or numba-cuda-mlir attribute, and
every attribute stored on another library's objects, declared in one place
and installed by :func:`install` (docs/overrides.md, generated from these
declarations by :func:`markdown_table`; tests/test_overrides.py checks both).
"""

import contextlib
import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, Tuple

from numba.core import types

from numba_cuda_launch.compat import import_hooks as _hooks
from numba_cuda_launch.compat import numba_caching as _caching
from numba_cuda_launch.compat import numba_cuda_mlir as _mlir
from numba_cuda_launch.compat import numba_dispatcher as _nd
from numba_cuda_launch.compat import numba_float16 as _f16
from numba_cuda_launch.compat import simulator as _sim
from numba_cuda_launch.compat.versions import has_numba_cuda, has_numba_cuda_mlir, numba_cuda_imported

__all__ = ["Override", "InstanceAttribute", "OVERRIDES", "INSTANCE_ATTRIBUTES", "install",
           "installed", "replaced", "set_instance_attribute", "markdown_table"]

_NUMBA = "numba 0.62.1, 0.65.1, 0.68.1"
_NUMBA_CUDA = "numba-cuda 0.26.0, 0.28.2, 0.30.4"
_MLIR = "numba-cuda-mlir 0.6.0"
_NUMBA_68 = "numba 0.68.1"
_LLVMLITE = "the llvmlite of numba 0.62.1, 0.65.1, 0.68.1 (0.50 with 0.68.1)"


def _always():
    return True


def _numba_cuda_target():
    """numba-cuda is imported and its CUDA target (not the simulator) is on."""
    return numba_cuda_imported() and _sim.disabled()


def _numba_cuda_simulator():
    return numba_cuda_imported() and _sim.enabled()


def _mlir_imported():
    return "numba_cuda_mlir" in sys.modules


def _boxing_imported():
    return "numba.core.boxing" in sys.modules


# numba-cuda's replacements, named rather than imported: compat/numba_cuda.py
# imports numba.cuda, which only an installation with numba-cuda may do.
_NC = "numba_cuda_launch.compat.numba_cuda:"


@dataclass(frozen=True)
class Override:
    """One replacement: ``owner`` is ``"module"`` or ``"module:object.path"``;
    ``attribute`` the attribute replaced, or for an entry of a mapping or of
    a ``functools.singledispatch`` function (``key`` given) how the key is
    spelt. With ``wraps`` the installed value is ``replacement(original)``,
    else ``replacement`` itself; a ``"module:name"`` string names a
    replacement in a module imported only when it is installed. Installed
    only once ``when()`` is true."""

    owner: str
    attribute: str
    replacement: Any  # a callable, or "module:name" of one
    checked: str
    why: str
    wraps: bool = True
    when: Callable[[], bool] = _always
    key: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class InstanceAttribute:
    """An attribute this package stores on objects of *owner*, another
    library's class (the instances' ``__dict__``)."""

    owner: str
    attribute: str
    checked: str
    why: str


def _index_key(original):
    return _caching.build_keyed_index_key(_sim.separating_index_key(original))


OVERRIDES = (
    Override("numba.core.dispatcher:Dispatcher", "typeof_pyval", _nd._fast_typeof_pyval, _NUMBA,
             "registered classes (device arrays, streams) are typed by exact class at every "
             "call, before `typeof()`'s single dispatch", wraps=False,
             when=lambda: _nd.AVAILABLE),
    Override("numba.core.dispatcher:Dispatcher", "_compile_for_args",
             _nd._compile_for_args_learning, _NUMBA,
             "learns routers for device arrays whose `_numba_type_` misleads Numba's C typing; "
             "names the argument that cannot be a device array", wraps=False,
             when=lambda: _nd.AVAILABLE),
    Override("numba.core.dispatcher:Dispatcher", "add_overload", _nd._add_overload_routed,
             _NUMBA, "an overload whose C typecodes a router took becomes that router's host; "
             "host-array positions of code using CUDA are guarded", wraps=False,
             when=lambda: _nd.AVAILABLE),
    Override("numba.core.dispatcher:Dispatcher", "_reset_overloads",
             _nd._reset_overloads_dropping_routes, _NUMBA,
             "routers go with the overloads they route to", wraps=False,
             when=lambda: _nd.AVAILABLE),
    Override("numba.core.dispatcher:_FunctionCompiler", "compile",
             _nd._function_compile_leading, _NUMBA,
             "a typing error's first line says what is wrong, before Numba's pipeline headers",
             wraps=False, when=lambda: _nd._function_compile is not None),
    Override("numba.core.typeinfer:TypeInferer", "typeof_const", _nd.explaining_typeof_const,
             _NUMBA, "a constant no Numba type holds (`2**64`) given as a launch configuration "
             "item or a kernel argument is refused naming the kernel and the item, not with "
             "Numba's `Int value is too large`"),
    Override("numba.core.caching:Cache", "load_overload", _caching.target_checking_load_overload,
             _NUMBA, "cached launch code built for another launch target is a cache miss"),
    Override("numba.core.caching:Cache", "save_overload", _caching.tolerant_save_overload,
             _NUMBA_68, "a cache directory that cannot be written (read-only, removed) leaves the "
             "code uncached instead of failing the compilation"),
    Override("numba.core.caching:IndexDataCacheFile", "_load_index",
             _caching.tolerant_load_index, _NUMBA_68, "an index that cannot be read (truncated, "
             "garbage, its directory removed) is empty: a miss, not `UnpicklingError`/`EOFError`"),
    Override("numba.core.caching:IndexDataCacheFile", "load", _caching.tolerant_load, _NUMBA_68,
             "a data file that cannot be read or unpickled is a miss"),
    Override("numba.core.caching:IndexDataCacheFile", "save", _caching.tolerant_save, _NUMBA_68,
             "each entry's data file is named after its key: two processes saving different "
             "entries at once never write one file each takes for its own"),
    Override("numba.core.caching:Cache", "_index_key", _index_key, _NUMBA,
             "under the simulator, cached code is an entry of its own: it never replaces the "
             "entry of code built for a GPU; the package's own cached functions are keyed by "
             "its build (checked on numba 0.68.1)"),
    Override("numba.core.compiler:CompileResult", "_reduce", _caching.checks_carrying_reduce,
             _NUMBA, "the launch-target checks of linked libraries are pickled with the code"),
    Override("numba.core.datamodel:default_manager._handlers", "[types.Float]",
             _f16.float_or_half_model, _NUMBA,
             "float16 gets a storage-only CPU model (pointers and arrays of device data)",
             key=types.Float),
    Override("numba.core.pythonapi:_boxers.functions", "[types.Float]", _f16.half_refusing,
             _NUMBA, "boxing a float16 value is refused with a sentence, not an "
             "`AssertionError` (once `numba.core.boxing`, which registers the float boxer, is "
             "imported: at a first compilation)", key=types.Float, when=_boxing_imported),
    Override("numba.core.pythonapi:_unboxers.functions", "[types.Float]", _f16.half_refusing,
             _NUMBA, "unboxing a float16 value is refused with a sentence, not an "
             "`AssertionError` (as above)", key=types.Float, when=_boxing_imported),
    Override("numba.core.typing.typeof:typeof_impl", "[object]", _nd.typing_unknown_objects,
             _NUMBA, "device arrays and stream objects of unregistered classes are typed before "
             "Numba's buffer-protocol attempt, which some of them refuse with an error",
             key=object),
    Override("numba.cuda.dispatcher", "get_current_device", _NC + "deviceless_get_current_device",
             _NUMBA_CUDA, "with no GPU, kernels are compiled for the configured compute "
             "capability; the no-driver error says how to configure one",
             when=_numba_cuda_target),
    Override("numba.cuda.codegen:CUDACodeLibrary", "_ensure_cc", _NC + "deviceless_ensure_cc",
             _NUMBA_CUDA, "with no GPU, PTX and cubins are built for the configured "
             "compute capability", when=_numba_cuda_target),
    Override("numba.cuda.dispatcher:_Kernel", "__init__", _NC + "toolkit_hinting_kernel_init",
             _NUMBA_CUDA, "a kernel that cannot compile for want of NVVM, NVRTC or nvJitLink "
             "says which extra installs them", when=_numba_cuda_target),
    Override("numba.cuda.dispatcher:_Kernel", "bind", _NC + "deviceless_bind", _NUMBA_CUDA,
             "with no GPU there is no context to load a module into", when=_numba_cuda_target),
    Override("numba.cuda.types.ext_types:CUDADispatcher", "get_call_type",
             _NC + "refusing_get_call_type",
             _NUMBA_CUDA, "calling a kernel without a launch configuration in CPU code is a "
             "typing error saying what to write, not a lowering failure",
             when=_numba_cuda_target),
    Override("numba.cuda", "jit", _sim.signature_recording_jit, _NUMBA_CUDA,
             "under the simulator, kernels keep the signatures they were declared with "
             "(overload choice and `voidptr` typing as on a GPU)",
             when=_numba_cuda_simulator),
    Override("numba.cuda.simulator.kernel:FakeCUDAKernel", "__getitem__",
             _sim.configuring_getitem, _NUMBA_CUDA,
             "under the simulator, `kernel[g, b, stream]` keeps its stream (the simulator "
             "drops it), so that a launch from Python on a stream recording a graph is "
             "recorded", when=_numba_cuda_simulator),
    Override("numba.cuda.simulator.kernel:FakeCUDAKernel", "__call__", _sim.recording_call,
             _NUMBA_CUDA, "under the simulator, a launch from Python on a stream recording "
             "a graph is recorded, not run, and one given a `ConditionalHandle` on a stream "
             "recording none is refused, as launches from compiled code are",
             when=_numba_cuda_simulator),
    Override("numba_cuda_mlir.descriptor:MLIRTypingContext", "load_additional_registries",
             _mlir.registering_load_additional_registries, _MLIR,
             "the kernel functions (`set_conditional`, `griddepcontrol_*`) are registered in its "
             "extension registries when it makes its typing context, not at import",
             when=_mlir_imported),
    Override("numba.core.untyped_passes:InlineInlinables", "_do_work",
             _nd.not_inlining_mlir_kernels, _NUMBA_68, "a numba-cuda-mlir kernel or device "
             "function called in CPU code is not inlined there (its `inline` option is for "
             "its own pipeline): the call is refused saying what to write, not run on the CPU",
             when=_mlir_imported),
    Override("numba_cuda_mlir.tools", "_cached_cc", _mlir.configured_cc, _MLIR,
             "with no GPU, numba-cuda-mlir compiles for the configured compute capability "
             "(it asks the device on every compilation); while a kernel is compiled for one "
             "of several architectures, that one (`replaced`)", when=_mlir.deviceless_cc_wanted),
)

INSTANCE_ATTRIBUTES = (
    InstanceAttribute("numba.core.codegen:CodeLibrary", _caching.CHECKS, _NUMBA,
                      "the launch-target checks of code that launches kernels, pickled "
                      "with it by the `_reduce` override"),
    InstanceAttribute("numba.cuda.cudadrv.devicearray:DeviceNDArray", "_numba_cuda_launch_fields",
                      _NUMBA_CUDA, "an array's stream and fields, read by compiled unboxing "
                      "without a call back into Python (its memory, shape and strides never "
                      "change)"),
    InstanceAttribute("numba.core.dispatcher:Dispatcher", "_ncl_routes", _NUMBA,
                      "the dispatcher's routers, dropped with its overloads"),
    InstanceAttribute("llvmlite.ir:Function", "_ncl_slots", _LLVMLITE,
                      "per-function stack slots of the function being lowered (the producer "
                      "streams its launches already waited for)"),
)

_INSTANCE_NAMES = frozenset(a.attribute for a in INSTANCE_ATTRIBUTES)
_INSTALLED: Dict[Tuple[str, str], Tuple[Any, Any]] = {}


def _resolve(owner):
    module, _, path = owner.partition(":")
    obj = sys.modules.get(module) or importlib.import_module(module)
    for name in filter(None, path.split(".")):
        obj = getattr(obj, name)
    return obj


def _slot(o):
    """``(read, write)`` of the value *o* replaces."""
    container = _resolve(o.owner)
    if o.key is None:
        return (lambda: getattr(container, o.attribute),
                lambda value: setattr(container, o.attribute, value))
    if hasattr(container, "register") and hasattr(container, "dispatch"):  # singledispatch
        return lambda: container.dispatch(o.key), lambda value: container.register(o.key)(value)
    return lambda: container[o.key], lambda value: container.__setitem__(o.key, value)


def _install_one(o):
    read, write = _slot(o)
    original = read()
    replacement = _resolve(o.replacement) if isinstance(o.replacement, str) else o.replacement
    value = replacement(original) if o.wraps else replacement
    write(value)
    _INSTALLED[(o.owner, o.attribute)] = (original, value)


def install() -> None:
    """Install every declared override whose condition holds and that is not
    installed yet (each is installed at most once per process); those of
    numba-cuda and numba-cuda-mlir once they are imported (before any kernel
    of theirs compiles), Numba's boxers once they are."""
    for o in OVERRIDES:
        if (o.owner, o.attribute) not in _INSTALLED and o.when():
            _install_one(o)
    _hooks.when_imported("numba.core.boxing", install)
    if has_numba_cuda():
        _hooks.when_imported("numba.cuda", install)
    if has_numba_cuda_mlir():
        _hooks.when_imported("numba_cuda_mlir", install)


@contextlib.contextmanager
def replaced(owner: str, attribute: str, value: Any) -> Iterator[None]:
    """For the duration of the block, *value* replaces *attribute* of
    *owner*, a declared :class:`Override`'s (KeyError otherwise), and the
    value before is put back after it."""
    if not any(o.owner == owner and o.attribute == attribute for o in OVERRIDES):
        raise KeyError("%s:%s is not a declared override (compat/overrides.py)"
                       % (owner, attribute))
    container = _resolve(owner)
    saved = getattr(container, attribute)
    setattr(container, attribute, value)
    try:
        yield
    finally:
        setattr(container, attribute, saved)


def installed() -> Dict[Tuple[str, str], Tuple[Any, Any]]:
    """``{(owner, attribute): (original, installed value)}`` so far."""
    return dict(_INSTALLED)


def set_instance_attribute(obj: Any, name: str, value: Any) -> None:
    """Store *value* as *name* in *obj*'s ``__dict__``; *name* must be a
    declared :class:`InstanceAttribute` (KeyError otherwise)."""
    if name not in _INSTANCE_NAMES:
        raise KeyError("%r is not a declared instance attribute (compat/overrides.py)" % name)
    obj.__dict__[name] = value


def markdown_table() -> str:
    """The tables of docs/overrides.md, generated from the declarations."""
    rows = ["| Owner | Attribute | Checked on | Why |", "|---|---|---|---|"]
    rows += ["| `%s` | `%s` | %s | %s |" % (o.owner, o.attribute, o.checked, o.why)
             for o in OVERRIDES]
    rows += ["", "| Class | Instance attribute | Checked on | Why |", "|---|---|---|---|"]
    rows += ["| `%s` | `%s` | %s | %s |" % (a.owner, a.attribute, a.checked, a.why)
             for a in INSTANCE_ATTRIBUTES]
    return "\n".join(rows) + "\n"

