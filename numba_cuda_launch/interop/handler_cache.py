"""The on-disk cache of :func:`~numba_cuda_launch.jax.jax_kernel` handlers: a
handler compiled once is loaded in a later process instead of compiled again
(docs/jax.md, "The handler cache").

A handler's body is a generated ``@cfunc`` whose constants Numba's own cache
cannot see, so it is kept under a key made here of everything its code
depends on: the kernel's parameter layout where the body takes the kernel's
images from its descriptors (the images are not in its code: another dtype
of the layout, or the kernel edited, loads it too), else its compiled image
(or, under the simulator, which runs the live kernel, its signature) and the
argument types; the scalars, the launch rule's code and the values it reads,
the options, this build of the package, the versions of Numba,
numba-cuda(-mlir), llvmlite and jaxlib's FFI, the launch target
(architectures, simulator) and, added by Numba, the CPU. Code that cannot be
keyed so (a kernel another library loaded, a launch rule reading an object
of this process) is compiled every time.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import types as pytypes
from typing import Any

import numpy as np
from numba.core import serialize
from numba.core import types as nt
from numba.core.dispatcher import Dispatcher

from numba_cuda_launch.compat.numba_caching import KeyedCache, _CheckedFile, cache_root
from numba_cuda_launch.compat.versions import installed_version
from numba_cuda_launch.interop import xla_ffi
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.caching import package_build

__all__ = ["ENV_VAR", "cache_dir", "clear_cache", "enabled", "handler_cache", "plan_layout",
           "rule_digest", "shared_library", "untyped_arrays"]

#: Set to ``0`` to compile every handler in every process.
ENV_VAR = "NUMBA_CUDA_LAUNCH_JAX_CACHE"
_SUBDIR = os.path.join("numba_cuda_launch", "jax")
# values a launch rule may read from its globals, keyed by their repr
_PLAIN = (bool, int, float, complex, str, bytes, type(None), np.number, np.dtype)


def enabled() -> bool:
    """Whether handlers are cached (``NUMBA_CUDA_LAUNCH_JAX_CACHE`` is not ``0``)."""
    return os.environ.get(ENV_VAR, "1").strip() not in ("0", "false", "no", "off")


def cache_dir() -> str:
    """The directory holding cached handlers: ``numba_cuda_launch/jax`` under
    ``NUMBA_CACHE_DIR`` when set, else under Numba's user-wide cache
    directory (``~/.cache/numba`` on Linux)."""
    return os.path.join(cache_root(), _SUBDIR)


def clear_cache() -> None:
    """Delete every cached handler (:func:`cache_dir`); handlers registered
    afterwards are compiled, and cached again."""
    shutil.rmtree(cache_dir(), ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _toolchain():
    versions = tuple((d, installed_version(d)) for d in (
        "numba", "numba-cuda", "numba-cuda-mlir", "llvmlite", "jaxlib"))
    return (package_build(), sys.version_info[:2], versions, xla_ffi.api_version())


def _code_digest(code, h):
    """Feed code object *code* (nested code in its constants too) to *h*."""
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            _code_digest(c, h)
        else:
            h.update(repr(c).encode())


def _global_text(value, seen, names=()):
    """How a launch rule's global *value* enters the key; None when it
    cannot be said (the rule is then not cached). A module enters with its
    attributes among *names* (those the rule's code names)."""
    if isinstance(value, _PLAIN) or (isinstance(value, tuple)
                                     and all(isinstance(v, _PLAIN) for v in value)):
        return "%s:%r" % (type(value).__name__, value)
    if isinstance(value, pytypes.ModuleType):
        parts = ["module:" + value.__name__]
        for name in names:
            if name in vars(value):
                text = _global_text(vars(value)[name], seen)
                if text is None:
                    return None
                parts.append("%s=%s" % (name, text))
        return ";".join(parts)
    if isinstance(value, Dispatcher):
        return rule_digest(value, seen)
    module = getattr(value, "__module__", None) or ""
    if callable(value) and module.split(".")[0] in ("numpy", "math", "cmath", "numba",
                                                    "builtins"):
        return "function:%s.%s" % (module, getattr(value, "__qualname__", value))
    return None


def rule_digest(rule: Any, seen: frozenset = frozenset()) -> str | None:
    """A digest of an ``@njit`` launch rule's code, closure and the globals
    it reads (``@njit`` functions among them, recursively); None when one
    of them is an object whose value cannot be keyed."""
    fn = rule.py_func
    if id(fn) in seen:
        return "recursive:" + fn.__qualname__
    seen = seen | {id(fn)}
    h = hashlib.sha256(("%s.%s" % (fn.__module__, fn.__qualname__)).encode())
    _code_digest(fn.__code__, h)
    if fn.__closure__:
        try:
            h.update(serialize.dumps(tuple(c.cell_contents for c in fn.__closure__)))
        except Exception:
            return None
    names = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, pytypes.CodeType))
    names = sorted(names)
    for name in names:
        if name in fn.__globals__:
            text = _global_text(fn.__globals__[name], seen, names)
            if text is None:
                return None
            h.update(("%s=%s;" % (name, text)).encode())
    return h.hexdigest()


def _plan_key(plan):
    """What a handler's code depends on of one launch plan; None if it
    launches a kernel another library loaded (an address of this process)."""
    if plan.live is not None:
        return None
    image = None if plan.image is None else plan.image.digest
    return (plan.source.name, plan.name, str(plan.argtypes), plan.entry_name, image,
            plan.param_sizes if plan.entry_name else (), plan.cooperative, plan.dependent,
            repr(plan.defaults))


def untyped_arrays(types):
    """*types* with each array type reduced to its rank and layout."""
    return tuple(("array", t.ndim, t.layout) if isinstance(t, nt.Array) else t for t in types)


def plan_layout(plan):
    """The parameter layout of one launch plan's overload: its parameter
    types (arrays by rank and layout), their sizes, whether it is
    cooperative, whether dependent. A handler body taking the kernel's
    images from descriptors serves the plans of one layout."""
    return untyped_arrays(plan.argtypes), plan.param_sizes, plan.cooperative, plan.dependent


def _layout_key(plan):
    """What a body taking the kernel's images from descriptors depends on
    of one launch plan: the kernel and its overload's parameter layout."""
    return (plan.source.name, plan.name, plan_layout(plan), repr(plan.defaults))


def handler_cache(name: str, plans: list, rule: Any, parts: tuple,
                  described: bool = False) -> KeyedCache | None:
    """The cache of a handler body named *name*, which launches the kernel
    of *plans* (one per rank variant), its grid and block from *rule* (an
    ``@njit`` function, or None), with *parts* (the body's options and
    layout or signature, as reprs); *described*: the body takes the
    kernel's images from its descriptors. None when it is not to be cached."""
    if not enabled():
        return None
    plan_keys = [_layout_key(p) if described else _plan_key(p) for p in plans]
    if any(k is None for k in plan_keys):
        return None
    rule_key = None
    if rule is not None:
        rule_key = rule_digest(rule)
        if rule_key is None:
            return None
    key = ("handler", name, _toolchain(), BACKEND.cache_target(), tuple(plan_keys), rule_key,
           parts)
    return KeyedCache(cache_dir(), name, key)


def shared_library(codegen: Any, build: Any) -> Any:
    """The code library of the C functions every handler calls (made by
    *build()*, finalized with object caching on), its machine code loaded
    from the cache when this build of the package made it before for this
    CPU, else made and saved. Whatever goes wrong reading or writing the
    file is a miss. Called with Numba's compiler lock held."""
    key = hashlib.sha256(repr(("shared", _toolchain(), codegen.magic_tuple())).encode()
                         ).hexdigest()
    file = _CheckedFile(cache_dir(), "shared-" + key[:24], key)
    if enabled():
        try:
            data = file.load(key)
            if data is not None:
                return codegen.unserialize_library(data)
        except Exception:  # a damaged file, an entry of another layout
            pass
    library = build()
    if enabled():
        try:
            os.makedirs(cache_dir(), exist_ok=True)
            file.save(key, library.serialize_using_object_code())
        except Exception:  # a read-only or vanished directory
            pass
    return library
