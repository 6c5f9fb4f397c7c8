"""Numba's ``@cfunc`` objects and toolchain versions, read for building C
libraries (:mod:`numba_cuda_launch.interop.aot`, docs/aot.md): a ``CFunc``'s
code library (``_library``), signature (``_sig``), final LLVM module
(``inspect_llvm()``) and the triple, CPU and features its JIT compiled for;
and ``@cfunc`` objects whose code an on-disk cache of the caller's keeps
(:func:`cached_cfunc`).
"""

from dataclasses import dataclass

from numba.core import sigutils
from numba.core.ccallback import CFunc

from numba_cuda_launch.compat.versions import installed_version

__all__ = ["CFuncCode", "is_cfunc", "cfunc_code", "toolchain_versions", "cached_cfunc"]


class _CachedCFunc(CFunc):
    """A ``CFunc`` consulting *cache* (a :class:`.numba_caching.KeyedCache`),
    keeping its compile result: Numba's keeps only the code library, while
    the code reads the result's Environments (constants, Python objects) by
    address."""

    def __init__(self, pyfunc, sig, cache):
        super().__init__(pyfunc, sig, locals={}, options={})
        if cache is not None:
            self._cache = cache
        self._cres = None
        self._rebuilt = None  # compiled again, uncached, for cfunc_code

    def _compile_uncached(self):
        self._cres = super()._compile_uncached()
        return self._cres

    def compile(self):
        super().compile()
        if self._cres is not None:
            # Numba sets no Environment for a cfunc it compiles (it does for
            # one it loads): code calling Python from it reads it
            self._library.codegen.set_env(self._cres.fndesc.env_name, self._cres.environment)


def cached_cfunc(sig, pyfunc, cache):
    """``numba.cfunc(sig)(pyfunc)``, its code loaded from *cache* when it
    holds it, else compiled and saved there; *cache* None: not cached."""
    cf = _CachedCFunc(pyfunc, sigutils.normalize_signature(sig), cache)
    cf.compile()
    return cf


@dataclass(frozen=True)
class CFuncCode:
    """What a C library needs of one compiled ``@cfunc``."""

    llvm_ir: str        # the final LLVM module (the function and all it links)
    symbol: str         # the C entry point's symbol in that module
    argtypes: tuple     # Numba types of the C arguments
    restype: object     # Numba type of the C return value
    triple: str
    cpu: str            # the CPU and features Numba's JIT compiled for
    features: str
    pyfunc: object      # the Python function it was compiled from


def is_cfunc(obj):
    """True for a Numba ``@cfunc`` object."""
    from numba.core.ccallback import CFunc

    return isinstance(obj, CFunc)


def cfunc_code(cf):
    """The :class:`CFuncCode` of compiled cfunc *cf*; ValueError when its
    code came from Numba's cache (no LLVM module to rebuild from), unless
    *cf* is a :func:`cached_cfunc`, compiled again for it uncached (once:
    the same symbol for every build that takes it)."""
    library = cf._library
    if getattr(library, "_disable_inspection", False) and isinstance(cf, _CachedCFunc):
        if cf._rebuilt is None:
            cf._rebuilt = cached_cfunc(cf._sig, cf.__wrapped__, None)
        return cfunc_code(cf._rebuilt)
    if getattr(library, "_disable_inspection", False):
        raise ValueError("its code was loaded from Numba's cache (cache=True), which keeps "
                         "no LLVM module to build from: build it without cache=True")
    triple, cpu, features = library.codegen.magic_tuple()
    return CFuncCode(cf.inspect_llvm(), cf.native_name, tuple(cf._sig.args),
                     cf._sig.return_type, triple, cpu, features, cf.__wrapped__)


def toolchain_versions():
    """``{"numba", "numba-cuda", "llvmlite", "cuda"}``: the versions a build
    is made with; ``cuda`` is the NVRTC (CUDA toolkit) release that compiles
    kernel images."""
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        cuda = "%d.%d" % (major, minor)
    except Exception:  # no NVRTC: images come from another toolkit or none
        cuda = "unknown"
    versions = {d: installed_version(d) or "unknown" for d in ("numba", "numba-cuda", "llvmlite")}
    return dict(versions, cuda=cuda)
