"""Numba's on-disk cache (``cache=True``) and code that launches kernels.

Such code depends on the launch target it was built for (the simulator, the
architecture of its images), which Numba's cache key lacks: lowering adds a
check to the code library, pickled into the compile result's
``reload_init`` (as Numba does for parfors); a check that finds another
target raises :class:`LaunchTargetChanged`, a cache miss. (Under the
simulator the index key has one item more: :mod:`.simulator`.)

A cache file that cannot be read (truncated, garbage, written by another
version) or written (a read-only or removed directory) is a miss, never an
error (the overrides below, installed by :mod:`.overrides`).
:class:`KeyedCache` keeps code Numba cannot key itself (``jax_kernel``
handlers, docs/jax.md, "The handler cache") under a key its caller makes.
"""

import functools
import hashlib
import os
import pickle
import re

import numba
from numba.core import compiler
from numba.core.caching import IndexDataCacheFile
from numba.core.runtime import rtsys
from numba.misc.appdirs import AppDirs

__all__ = ["LaunchTargetChanged", "target_checking_load_overload", "checks_carrying_reduce",
           "add_reload_checks", "has_reload_checks", "CHECKS", "tolerant_load_index",
           "tolerant_load", "tolerant_save", "tolerant_save_overload", "cache_root",
           "KeyedCache", "sources_digest", "package_build", "build_keyed_index_key"]


class LaunchTargetChanged(Exception):
    """Cached launch code was built for another launch target."""


#: The attribute of Numba's code libraries holding their checks (declared in
#: :mod:`.overrides`).
CHECKS = "_numba_cuda_launch_reload_checks"
_RELOAD_INIT = 7  # index of reload_init in CompileResult._reduce()'s tuple


def target_checking_load_overload(original):
    """``Cache.load_overload``: :class:`LaunchTargetChanged` raised while
    Numba loads a cached overload is a cache miss instead of an error; a
    loaded overload's checks are put back on its library, for callers
    linking it."""
    def load_overload(self, sig, target_context):
        try:
            cres = original(self, sig, target_context)
        except LaunchTargetChanged:
            return None
        return _carrying_checks(cres)
    return load_overload


def _carrying_checks(cres):
    """*cres* (loaded, or None) with its checks put back on its library."""
    if cres is not None:
        ours = {c for c in (getattr(cres, "reload_init", None) or ()) if _is_ours(c)}
        if ours:
            _checks_of(cres.library).update(ours)
    return cres


def checks_carrying_reduce(original):
    """``CompileResult._reduce``: the checks of the library and of the
    libraries it links to are added to the pickled ``reload_init``."""
    def _reduce(self):
        data = original(self)
        checks = _library_checks(self.library, set())
        if not checks:
            return data
        reload_init = list(data[_RELOAD_INIT] or ())
        reload_init += [c for c in checks if c not in reload_init]
        return data[:_RELOAD_INIT] + (reload_init,) + data[_RELOAD_INIT + 1:]
    return _reduce


def _library_checks(library, seen):
    """The checks of *library* and of the libraries it links to (*seen*:
    ids of the libraries already visited), in the order found."""
    checks, stack = [], [library]
    while stack:
        lib = stack.pop()
        if id(lib) in seen:
            continue
        seen.add(id(lib))
        checks += [c for c in getattr(lib, CHECKS, ()) if c not in checks]
        stack.extend(reversed(getattr(lib, "_linking_libraries", ())))
    return checks


def add_reload_checks(context, checks):
    """Register *checks* (picklable, hashable callables) to run when the
    function being lowered in *context* is loaded from Numba's cache."""
    _checks_of(context.active_code_library).update(checks)


def _checks_of(library):
    checks = getattr(library, CHECKS, None)
    if checks is None:
        checks = set()
        setattr(library, CHECKS, checks)
    return checks


def _is_ours(check):
    module = getattr(type(check), "__module__", "") or ""
    return module.startswith(("numba_cuda_launch", "numba.cuda.cpu_launch"))


def has_reload_checks(cres):
    """Whether compile result *cres* carries checks of this package (it, or
    a function it calls, launches kernels or calls the driver), compiled now
    or loaded from the cache."""
    if _library_checks(cres.library, set()):
        return True
    return any(_is_ours(c) for c in (getattr(cres, "reload_init", None) or ()))


# -- this build of the package -------------------------------------------------

def sources_digest(root):
    """A digest of the ``.py`` and ``.c`` files under *root* (names and bytes)."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith((".py", ".c")):
                path = os.path.join(dirpath, name)
                digest.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read())
    return digest.hexdigest()[:20]


@functools.lru_cache(maxsize=None)
def package_build():
    """This build of the package: the digest of its sources, read once."""
    return sources_digest(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_PACKAGE = __name__.split(".")[0]


def build_keyed_index_key(original):
    """``Cache._index_key``: the package's own cached functions (the XLA
    frame readers, ``cache=True``) are keyed by the package's build too:
    their code holds constants and calls of other modules, which Numba's
    key (the function's source file and bytecode) does not see."""
    def _index_key(self, sig, codegen):
        key = original(self, sig, codegen)
        module = getattr(self._py_func, "__module__", None) or ""
        if module.split(".")[0] == _PACKAGE:
            return key + (package_build(),)
        return key
    return _index_key


# -- files that cannot be read or written -----------------------------------

def tolerant_load_index(original):
    """``IndexDataCacheFile._load_index``: an index that cannot be read or
    unpickled (truncated, garbage, its directory removed) is empty."""
    def _load_index(self):
        try:
            return original(self)
        except Exception:
            return {}
    return _load_index


def tolerant_load(original):
    """``IndexDataCacheFile.load``: an entry whose data cannot be read or
    unpickled is a miss (Numba catches only ``OSError`` there)."""
    def load(self, key):
        try:
            return original(self, key)
        except Exception:
            return None
    return load


def tolerant_save(original):
    """``IndexDataCacheFile.save``: each entry's data file is named after
    its key, so that two processes saving different entries at once never
    write one file each believes its own (Numba numbers them in the order
    it finds them free, read from an index another process may be
    rewriting)."""
    def save(self, key, data):
        overloads = self._load_index()
        name = "%s.%s.nbc" % (self._index_name[:-len(".nbi")],
                              hashlib.sha256(repr(key).encode()).hexdigest()[:16])
        if overloads.get(key) != name:
            overloads[key] = name
            self._save_index(overloads)
        self._save_data(name, data)
    return save


def tolerant_save_overload(original):
    """``Cache.save_overload``: a cache directory that cannot be written
    (read-only, removed and not creatable again) leaves the code uncached
    instead of failing the compilation."""
    def save_overload(self, sig, data):
        try:
            original(self, sig, data)
        except OSError:
            pass
    return save_overload


# -- code cached under an explicit key ----------------------------------------

def cache_root():
    """Where Numba caches code it cannot keep beside its source:
    ``NUMBA_CACHE_DIR`` when set, else the user's cache directory."""
    return numba.config.CACHE_DIR or AppDirs(appname="numba", appauthor=False).user_cache_dir


class _CheckedFile(IndexDataCacheFile):
    """An index and data files whose data begins with its own digest: a data
    file cut short or changed is refused before it is unpickled."""

    def _save_data(self, name, data):
        data = self._dump(data)
        with self._open_for_write(self._data_path(name)) as f:
            f.write(hashlib.sha256(data).digest() + data)

    def _load_data(self, name):
        with open(self._data_path(name), "rb") as f:
            blob = f.read()
        digest, data = blob[:32], blob[32:]
        if hashlib.sha256(data).digest() != digest:
            raise ValueError("cache file %s is damaged" % name)
        return pickle.loads(data)


class KeyedCache:
    """The on-disk cache of one compiled ``CFunc`` (the ``_cache`` a
    :class:`~numba.core.ccallback.CFunc` consults) in *directory*, under
    *key* (a tuple whose ``repr`` says everything the code depends on
    besides the signature and the CPU, which Numba adds). Whatever goes
    wrong reading or writing it is a miss: the code is compiled."""

    def __init__(self, directory, name, key):
        self.directory = directory
        self.key = hashlib.sha256(repr(key).encode()).hexdigest()
        base = "%s-%s" % (re.sub(r"[^A-Za-z0-9_.]", "_", name)[:80], self.key[:24])
        self._file = _CheckedFile(directory, base, self.key)
        self.hits = 0
        # the compile result loaded: the code reads its Environments
        # (constants, Python objects) by address, so it lives as long as
        # the CFunc holding this cache
        self.result = None

    def _index_key(self, sig, codegen):
        return sig, codegen.magic_tuple(), self.key

    def load_overload(self, sig, target_context):
        """The cached compile result, or None. Numba refreshes the target
        context first, whose first filling of its typing and lowering
        registries costs a process about a second; loading code needs only
        the runtime (NRT) those registries initialize."""
        rtsys.initialize(target_context)
        try:
            data = self._file.load(self._index_key(sig, target_context.codegen()))
            if data is None:
                return None
            key, payload = data
            if key != self.key:
                return None
            cres = compiler.CompileResult._rebuild(target_context, *payload)
        except Exception:  # LaunchTargetChanged, an entry of another layout
            return None
        self.hits += 1
        self.result = cres
        return _carrying_checks(cres)

    def save_overload(self, sig, cres):
        """Save *cres* unless it holds what a file cannot (lifted code,
        addresses of this process)."""
        if any(not x.can_cache for x in cres.lifted) or cres.library.has_dynamic_globals:
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
            self._file.save(self._index_key(sig, cres.codegen), (self.key, cres._reduce()))
        except OSError:
            pass
