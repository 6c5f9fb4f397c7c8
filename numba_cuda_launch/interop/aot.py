"""Compiled launchers as a C library that runs with no Python (docs/aot.md).

:func:`build` re-emits status-only ``@cfunc`` launchers (and ``jax_kernel`` FFI
handlers) as position-independent code and links them with a small C runtime
(``clib/ncl_runtime.c``) into one shared library and a C header; what would need
Python at run time is refused, naming the function. Command line: ``python -m
numba_cuda_launch.aot`` (``numba-cuda-launch-aot``).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import importlib
import inspect
import itertools
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llvmlite import binding as ll
from numba.core import types

from numba_cuda_launch import config
from numba_cuda_launch._version import __version__
from numba_cuda_launch.compat import numba_cfunc
from numba_cuda_launch.compat import cuda_target as _compat
from numba_cuda_launch.kernels.foreign import live_kernel_name
from numba_cuda_launch.cudadrv import driver, graphdevices
from numba_cuda_launch.cudadrv import launch as _driver_launch

__all__ = ["ABI_VERSION", "AotBuildError", "Library", "build", "check_library", "main"]

#: Bumped when the exported helper functions or the FFI target table change.
ABI_VERSION = 1
_RUNTIME_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clib")
_RUNTIME = "ncl_runtime.c"
# The symbols compiled launch code references in this package's process,
# defined by the C runtime instead.
_RUNTIME_SYMBOLS = {driver.TABLE_SYMBOL, _driver_launch.FLAG_SYMBOL, graphdevices.SYMBOL,
                    graphdevices.USED_SYMBOL,
                    # libtvm_ffi's, forwarded by clib/ncl_tvm_ffi.c
                    "TVMFFIEnvGetStream", "TVMFFIErrorSetRaisedFromCStr"}
_SHARED_PREFIX = "numba_cuda_launch_jax_"  # jax_handler's shared C functions
_TVM_FFI_RUNTIME = "ncl_tvm_ffi.c"
_TVM_FFI_PREFIX = "__tvm_ffi_"  # what tvm_ffi.load_module looks up
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# C (C23) and C++ (C++23) keywords: the header is included from both.
_C_KEYWORDS = frozenset(
    "auto bool break case char const constexpr continue default do double else enum extern "
    "false float for goto if inline int long nullptr register restrict return short signed "
    "sizeof static static_assert struct switch thread_local true typedef typeof typeof_unqual "
    "union unsigned void volatile while alignas alignof _Alignas _Alignof _Atomic _BitInt "
    "_Bool _Complex _Decimal128 _Decimal32 _Decimal64 _Generic _Imaginary _Noreturn "
    "_Static_assert _Thread_local "
    "and and_eq asm bitand bitor catch char8_t char16_t char32_t class co_await co_return "
    "co_yield compl concept const_cast consteval constinit decltype delete dynamic_cast "
    "explicit export friend mutable namespace new noexcept not not_eq operator or or_eq "
    "private protected public reinterpret_cast requires static_cast template this throw try "
    "typeid typename using virtual wchar_t xor xor_eq".split())
# Names C reserves for its implementation, and POSIX's type names.
_RESERVED = re.compile(r"_|.*_t\Z")
# libcuda exports only cu* names, libcudart only cuda* names (and __cuda*).
_CUDA_NAMES = re.compile(r"cu(da)?[A-Z0-9_]")
# The C runtime's names (ncl_*, NCL_* macros) and the package's own symbols.
_RUNTIME_NAMES = re.compile(r"(?i:ncl_)|numba_cuda_launch_")
# System libraries whose symbols an exported name must not take the place of.
_SYSTEM_LIBRARIES = ("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1")
_NAME_RULE = (
    "an exported name is a C identifier that is not a C or C++ keyword, a name reserved "
    "for the C implementation (_x, x_t), a macro of the headers the library is "
    "compiled with, a symbol of libc, libm, libdl, libpthread or librt, a name of the CUDA "
    "driver or runtime (cuX..., cudaX...) or one of the library's own (ncl_*, "
    "numba_cuda_launch_*, PREFIX_<helper>) (docs/aot.md, \"Exported names\")")
# Libraries a built library may need, and the symbols it may take from them:
# what the runtime and LLVM's code generation call (memcpy, libm for math).
_NEEDED_OK = {"libc.so.6", "libdl.so.2", "libm.so.6"}
_LIBC_OK = frozenset(
    "dlopen dlsym dlerror getenv strcmp strlen strstr memcpy memmove memset memcmp "
    "sched_yield __stack_chk_fail abort snprintf bcmp".split()
    # glibc's checked forms, which C compilers emit with _FORTIFY_SOURCE (on
    # by default with optimisation on Debian and Ubuntu toolchains)
    + ["__%s_chk" % n for n in ("memcpy", "memmove", "memset", "strlen")])
_LIBM_OK = re.compile(
    r"(a?(sin|cos|tan)h?|atan2|exp(2|m1)?|log(2|10|1p)?|pow|sqrt|cbrt|hypot|fmod|floor|ceil|"
    r"trunc|l?l?round|l?l?rint|nearbyint|erfc?|[lt]gamma|fabs|copysign|nextafter|ldexp|frexp|"
    r"modf|fmin|fmax|fma)f?\Z")
_C_SCALARS = {
    types.int8: "int8_t", types.int16: "int16_t", types.int32: "int32_t",
    types.int64: "int64_t", types.uint8: "uint8_t", types.uint16: "uint16_t",
    types.uint32: "uint32_t", types.uint64: "uint64_t", types.float32: "float",
    types.float64: "double", types.boolean: "bool", types.voidptr: "void *",
    types.float16: None,  # no C type by value; as a pointer it is uint16_t storage
}
_C_POINTEES = {types.float16: "uint16_t", types.complex64: "float _Complex",
               types.complex128: "double _Complex"}


# The runtime's exported helpers, each PREFIX_name (and the type PREFIX_ffi_target).
_HELPER_NAMES = ("abi_version", "build_info", "error_name", "last_error_name", "driver_problem",
                 "driver_entry_count", "driver_entry_name", "bind_driver", "check_pointers",
                 "ffi_target_count", "ffi_targets")


class AotBuildError(ValueError):
    """A C library could not be built: a function that needs Python at run
    time, a C name or type that does not fit, an output that would overwrite
    another file of the build, a CPU LLVM does not know, or no C toolchain."""


@dataclass(frozen=True)
class Library:
    """A built library: where it and its header are, and what it exports."""

    path: str
    header: str
    prefix: str
    functions: tuple[str, ...]     # exported C names of the launchers
    ffi_targets: tuple[str, ...]   # XLA FFI target names (their symbols have these names)
    build_info: str
    tvm_ffi_functions: tuple[str, ...] = ()  # exported as __tvm_ffi_<name>


@dataclass(frozen=True)
class _Export:
    cname: str        # the exported symbol
    code: object      # numba_cfunc.CFuncCode
    what: str         # how messages name it
    ffi_target: str | None = None
    command_buffer: bool = False
    tvm_ffi: str | None = None  # the TVM-FFI function's name


# -- what goes in ---------------------------------------------------------------

def _c_type(ty):
    """The C spelling of Numba type *ty* in a prototype, or None."""
    if ty in _C_SCALARS:
        return _C_SCALARS[ty]
    if isinstance(ty, types.CPointer):
        inner = _C_POINTEES.get(ty.dtype) or _c_type(ty.dtype)
        return None if inner is None else inner + ("*" if inner.endswith("*") else " *")
    return None


def _refuse(what, why):
    raise AotBuildError("%s cannot go in a C library: %s" % (what, why))


def _own_names(prefix):
    """The names the library defines besides its launchers: its helpers, their
    type, and the header's guard and version macros."""
    return ({"%s_%s" % (prefix, h) for h in _HELPER_NAMES + ("ffi_target",)}
            | {prefix.upper() + "_H", prefix.upper() + "_ABI_VERSION"})


@functools.lru_cache(maxsize=None)
def _system_libraries():
    libraries = []
    for name in _SYSTEM_LIBRARIES:
        try:
            libraries.append((name, ctypes.CDLL(name)))
        except OSError:  # not on this system (librt of a musl libc, ...)
            pass
    return tuple(libraries)


def _system_library_of(name):
    """The first of the system libraries that has symbol *name* (asked with
    ``dlsym``, so the libraries of this machine), or None."""
    for library, handle in _system_libraries():
        try:
            handle[name]
        except AttributeError:
            continue
        return library
    return None


@functools.lru_cache(maxsize=None)
def _header_macros(cc):
    """The macros defined where the library's C code is compiled (the
    compiler's own, ``<stdint.h>``, ``<stdbool.h>`` and the runtime's
    headers), asked of compiler *cc* (a tuple); empty if it cannot say (the
    link reports the compiler's problem)."""
    source = '#include <stdbool.h>\n#include <stdint.h>\n#include "%s"\n' % _RUNTIME
    try:
        done = subprocess.run(list(cc) + ["-E", "-dM", "-I", _RUNTIME_DIR, "-x", "c", "-"],
                              input=source, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"^#define (\w+)", done.stdout, re.M))


def _name_problem(cname, prefix, macros):
    """Why *cname* cannot be the exported name of a launcher, or None."""
    if not _C_NAME.match(cname):
        return "is not a C identifier (letters, digits and _, not starting with a digit)"
    if cname in _C_KEYWORDS:
        return "is a C or C++ keyword"
    if cname in _own_names(prefix):
        return "is one of the library's own names (prefix %r)" % prefix
    if _RUNTIME_NAMES.match(cname):
        return "is in the namespace of the library's C runtime (ncl_*, numba_cuda_launch_*)"
    if _RESERVED.match(cname):
        return "is reserved for the C implementation (names starting with _, and POSIX's " \
               "type names ending in _t)"
    if cname in macros:
        return "is a macro of the C headers the library is compiled with (the compiler's, " \
               "<stdint.h>, <stdbool.h>, <dlfcn.h>, <stdlib.h>, <string.h>, <sched.h>)"
    if _CUDA_NAMES.match(cname):
        return "is in the CUDA driver's or runtime's namespace (libcuda exports cuX... " \
               "names, libcudart cudaX...): exported, it would take the place of CUDA's " \
               "symbol in every process that loads the library"
    library = _system_library_of(cname)
    if library is not None:
        return "is the name of a symbol of %s: exported, it would take the place of " \
               "%s's in every process that loads the library" % (library, library)
    return None


def _launcher(cname, cf, prefix, macros):
    what = "function %r (cfunc %s)" % (cname, getattr(cf, "__qualname__", cf))
    if not numba_cfunc.is_cfunc(cf):
        _refuse("function %r" % cname, "expected a @numba.cfunc, got %s" % type(cf).__name__)
    problem = _name_problem(cname, prefix, macros)
    if problem is not None:
        _refuse(what, "%r %s; %s" % (cname, problem, _NAME_RULE))
    try:
        code = numba_cfunc.cfunc_code(cf)
    except ValueError as exc:
        _refuse(what, str(exc))
    return _Export(cname, code, what)


def _jax_exports(kernels):
    if not kernels:
        return []  # no JAX needed (it may not be installed)
    from numba_cuda_launch.interop import jax as jax_interop

    out = []
    if isinstance(kernels, jax_interop.JaxKernel):
        raise TypeError("build(): jax_kernels must be a list of jax_kernel() results, got one "
                        "jax_kernel (of %r): pass [k]" % kernels.kernel_name)
    for k in kernels:
        if not isinstance(k, jax_interop.JaxKernel):
            raise AotBuildError("jax_kernels: expected jax_kernel() results, got %s"
                                % type(k).__name__)
        if not k.target_names:
            raise AotBuildError(
                "jax kernel %r has no registered FFI targets: register the signatures to "
                "export first (k.register(*inputs, **scalars) or signatures=[...])"
                % k.kernel_name)
        for name in k.target_names:
            code = jax_interop._REGISTRY[name].handler.code()
            out.append(_Export(name, code, "FFI handler %r" % name, name, k.command_buffer))
    return out


_TVM_FFI_SIGNATURE = (types.voidptr, types.voidptr, types.int32, types.voidptr)


def _tvm_ffi_exports(functions):
    """The TVM-FFI functions to export: ``{name: tvm_ffi_kernel() result or
    cfunc int32(voidptr, voidptr, int32, voidptr)}``."""
    out: list[_Export] = []
    if functions is None:
        return out
    if not isinstance(functions, Mapping):
        raise TypeError("build(): tvm_ffi_functions must be a dict {name: tvm_ffi_kernel() "
                        "result or TVM-FFI cfunc}, got %s" % _describe(functions))
    for name, fn in functions.items():
        if not isinstance(name, str) or not _C_NAME.match(name):
            _refuse("TVM-FFI function %r" % (name,), "its name must be a C identifier (the "
                    "library exports it as %s<name>)" % _TVM_FFI_PREFIX)
        cf = getattr(fn, "cfunc", fn)
        what = "TVM-FFI function %r" % name
        if not numba_cfunc.is_cfunc(cf):
            _refuse(what, "expected a tvm_ffi_kernel() result or a @numba.cfunc, got %s"
                    % type(fn).__name__)
        try:
            code = numba_cfunc.cfunc_code(cf)
        except ValueError as exc:
            _refuse(what, str(exc))
        if tuple(code.argtypes) != _TVM_FFI_SIGNATURE or code.restype != types.int32:
            _refuse(what, "a TVM-FFI function is int32(voidptr, voidptr, int32, voidptr) "
                    "(self, args, num_args, result); this cfunc is %s(%s)"
                    % (code.restype, ", ".join(map(str, code.argtypes))))
        out.append(_Export(_TVM_FFI_PREFIX + name, code, what, tvm_ffi=name))
    return out


def _check_signature(exp):
    for i, ty in enumerate(exp.code.argtypes):
        if _c_type(ty) is None:
            _refuse(exp.what, "argument %d is %s; a C library's arguments are integers, "
                    "floats, bools and pointers (CPointer, voidptr): pass device memory as a "
                    "pointer" % (i + 1, ty))
    restype = exp.code.restype
    if restype != types.void and _c_type(restype) is None:
        _refuse(exp.what, "it returns %s; a C library's functions return an integer, "
                "float, bool, pointer or nothing (launch_status returns an int32 CUresult)"
                % restype)


# -- code -----------------------------------------------------------------------

def _target_machine(code, cpu):
    cpu_name, features = (code.cpu, code.features) if cpu in (None, "host") else (cpu, "")
    target = ll.Target.from_triple(code.triple)
    return target.create_target_machine(cpu=cpu_name, features=features, opt=3,
                                        reloc="pic", codemodel="default")


_DYNAMIC_PREFIX = "numba.dynamic.globals."  # Numba's name of a process address


def _refuse_process_addresses(exp, module):
    """Refuse a function whose code holds addresses of this process (Numba's
    dynamic globals), such as a kernel handle another library loaded."""
    # one global per use: LLVM suffixes repeats of a name (".1", ".2", ...)
    addresses = {int(g.name[len(_DYNAMIC_PREFIX):].split(".")[0], 16)
                 for g in module.global_variables if g.name.startswith(_DYNAMIC_PREFIX)}
    kernels = [k for k in map(live_kernel_name, addresses) if k is not None]
    if kernels:
        _refuse(exp.what, "it launches foreign kernel %s by the driver handle another library "
                "loaded in this process, which no other process has; make the "
                "ForeignKernel from the kernel's image (cubin, PTX, fatbin or cuda.core "
                "ObjectCode) to build a library" % ", ".join(repr(k) for k in kernels))
    if addresses:
        _refuse(exp.what, "it holds addresses of this process (%s: ctypes pointers or "
                "objects Numba refers to by address), which no other process has"
                % ", ".join("%#x" % a for a in addresses))


def _optimized_module(exp, tm):
    """The function's module with everything but its entry internal,
    optimised again so that error paths the function can never take (and
    the Python calls on them) are removed where LLVM can prove it."""
    module = ll.parse_assembly(exp.code.llvm_ir)
    _refuse_process_addresses(exp, module)
    for g in itertools.chain(module.functions, module.global_variables):
        if not g.is_declaration and g.name != exp.code.symbol:
            g.linkage = "internal"
    pb = ll.create_pass_builder(tm, ll.create_pipeline_tuning_options(3))
    pb.getModulePassManager().run(module, pb)
    return module


def _shared_modules(modules, tm):
    """``{symbol: module}``: the modules of the C functions the *modules* call by symbol (the
    checks ``jax_kernel`` handlers share, :func:`.jax_handler.shared_functions`),
    each exporting its function under that symbol, hidden by the library's
    version script."""
    declared = {f.name for m in modules for f in m.functions if f.is_declaration}
    if not any(name.startswith(_SHARED_PREFIX) for name in declared):
        return {}
    from numba_cuda_launch.interop import jax_handler

    out = {}
    for symbol, code in jax_handler.shared_code().items():
        if symbol not in declared:
            continue
        exp = _Export(symbol, code, "the handlers' shared function %s" % symbol)
        module = _optimized_module(exp, tm)
        module.get_function(code.symbol).name = symbol
        _refuse_python(exp, module)
        out[symbol] = module
    return out


def _refuse_python(exp, module, provided=()):
    """Refuse a function whose code references what only a Python process
    has (or the library does not define: *provided* are symbols it does)."""
    names = sorted(g.name for g in itertools.chain(module.functions, module.global_variables)
                   if g.is_declaration and not g.name.startswith("llvm.")
                   and g.name not in _RUNTIME_SYMBOLS and g.name not in provided)
    python = [n for n in names if n.startswith(("Py", "_Py"))]
    arrays = [n for n in names if n.startswith(("NRT_MemInfo_alloc", "NRT_MemInfo_new"))]
    helpers = [n for n in names if n.startswith(("NRT_", "numba_"))]
    other = [n for n in names if n not in python + helpers
             and n not in _LIBC_OK and not _LIBM_OK.match(n)]
    # An allocation can fail (MemoryError), so it references Python too: the
    # allocation is the cause to name.
    for symbols, why in (
            (arrays, "it allocates arrays with Numba's runtime (NRT: %s), as np.empty and "
                     "friends do in nopython code; pass memory in as pointers"),
            (python, "it calls the Python C API (%s): it raises exceptions or uses Python "
                     "objects; a launch written kernel[...](...) raises when it fails, so use "
                     "kernel[...].launch_status(...) and return the CUresult"),
            (helpers, "it calls Numba's runtime or helper library (%s), which live in "
                      "Numba's Python extensions"),
            (other, "it references %s, in neither libc, libdl nor libm")):
        if symbols:
            listed = ", ".join(symbols[:6]) + (", ..." if len(symbols) > 6 else "")
            _refuse(exp.what, why % listed)


# -- the C side -----------------------------------------------------------------

def _param_names(exp):
    try:
        names = list(inspect.signature(exp.code.pyfunc).parameters)
    except (TypeError, ValueError):
        names = []
    if len(names) != len(exp.code.argtypes):
        names = [""] * len(exp.code.argtypes)
    macros = _header_macros(tuple(_compiler()))
    return [n if _C_NAME.match(n) and n not in _C_KEYWORDS and n not in macros
            and not _RUNTIME_NAMES.match(n) and not _RESERVED.match(n)
            else "arg%d" % i for i, n in enumerate(names)]


def _decl(ctype, name):
    return ctype + name if ctype.endswith("*") else "%s %s" % (ctype, name)


def _c_string(text):
    return '"%s"' % "".join(c if c.isalnum() or c in " ._-;:,()=/+" else "\\%03o" % ord(c)
                            for c in text)


def _prototype(exp, name=None):
    params = ", ".join(_decl(_c_type(t), n)
                       for t, n in zip(exp.code.argtypes, _param_names(exp))) or "void"
    ret = "void" if exp.code.restype == types.void else _c_type(exp.code.restype)
    return _decl(ret, "%s(%s)" % (name or exp.cname, params))


def _source(exports, prefix, build_info):
    names = list(driver.ENTRY_POINTS)
    lines = [
        "/* Generated by numba-cuda-launch %s. */" % __version__,
        '#include "lib.h"',  # the header, so the compiler checks it against the definitions
        "#define NCL_PREFIX %s" % prefix, "#define NCL_ABI %d" % ABI_VERSION,
        "#define NCL_ENTRY_COUNT %du" % len(names),
        "#define NCL_GRAPH_DEVICE_SLOTS %d" % graphdevices.SLOTS,
        "#define NCL_CU_GET_ERROR_NAME %d" % names.index("cuGetErrorName"),
        "static const char *const ncl_entry_names[] = {%s};"
        % ", ".join('"%s"' % n for n in names),
        "static const unsigned char ncl_entry_optional[] = {%s};"
        % ", ".join("1" if n in driver.OPTIONAL else "0" for n in names),
        '#include "%s"' % _RUNTIME,
        '#include "%s"' % _TVM_FFI_RUNTIME,
        "const char %s_build_info[] = %s;" % (prefix, _c_string(build_info)),
    ]
    targets = []
    for i, exp in enumerate(exports):
        impl = "ncl_impl_%d" % i
        lines.append("extern %s __asm__(%s);" % (_prototype(exp, impl),
                                                  _c_string(exp.code.symbol)))
        call = "%s(%s)" % (impl, ", ".join(_param_names(exp)))
        if exp.tvm_ffi is not None:
            lines.append("int %s(void *self, const void *args, int32_t num_args, "
                         "void *result) { ncl_ensure_bound(); return %s(self, (void *)args, "
                         "num_args, result); }" % (exp.cname, impl))
            continue
        if exp.ffi_target is not None:
            wrapper = "ncl_ffi_%d" % i
            lines.append("void *%s(void *frame) __asm__(%s);"
                         % (wrapper, _c_string(exp.ffi_target)))
            lines.append("void *%s(void *frame) { ncl_ensure_bound(); return %s(frame); }"
                         % (wrapper, impl))
            targets.append("{%s, (void *)%s, %d}" % (_c_string(exp.ffi_target), wrapper,
                                                     int(exp.command_buffer)))
            continue
        if exp.code.restype == types.void:
            body = "%s;" % call
        elif exp.code.restype == types.int32:  # launch_status launchers: a CUresult
            body = "return ncl_note(%s);" % call
        else:
            body = "return %s;" % call
        lines.append("%s { ncl_ensure_bound(); %s }" % (_prototype(exp), body))
    lines += [
        "static const %s_ffi_target ncl_targets[] = {%s};"
        % (prefix, ", ".join(targets) or "{0, 0, 0}"),
        "unsigned %s_ffi_target_count(void) { return %du; }" % (prefix, len(targets)),
        "const %s_ffi_target *%s_ffi_targets(void) { return ncl_targets; }" % (prefix, prefix),
    ]
    return "\n".join(lines) + "\n"


_HELPERS = """\
/* The library's version of this header's ABI ({PU}_ABI_VERSION when they match). */
int {P}_abi_version(void);
/* Versions the library was built with (numba, numba-cuda, CUDA, target). */
extern const char {P}_build_info[];
/* The CUDA driver's name of a CUresult ("CUDA_ERROR_INVALID_VALUE"). */
const char *{P}_error_name(int status);
/* The name of the last failed CUresult a launcher returned on this thread,
   or NULL if none failed. */
const char *{P}_last_error_name(void);
/* Why libcuda.so.1 could not be bound (launches then return
   CUDA_ERROR_NO_DEVICE), or NULL. */
const char *{P}_driver_problem(void);
/* The driver table: its entry points, by name, in order. */
unsigned {P}_driver_entry_count(void);
const char *{P}_driver_entry_name(unsigned i);
/* Use these driver functions (count of them, in entry order, none NULL)
   instead of libcuda's, e.g. a recording driver in tests; 0 on success.
   Not safe while launches run on other threads. */
int {P}_bind_driver(void *const *functions, unsigned count);
/* Ask the driver about every pointer argument of every launch (refused
   with CUDA_ERROR_INVALID_VALUE when it does not know the memory); the
   environment variable NUMBA_CUDA_LAUNCH_CHECK_POINTERS=1 sets it too. */
void {P}_check_pointers(int enabled);
/* XLA FFI handlers in the library: target name, handler, and whether it is
   command-buffer compatible (register it for the initialize stage too). */
typedef struct {{ const char *name; void *handler; int command_buffer; }} {P}_ffi_target;
unsigned {P}_ffi_target_count(void);
const {P}_ffi_target *{P}_ffi_targets(void);
"""


def _header(exports, prefix, lib_name, build_info):
    guard = prefix.upper() + "_H"
    out = ["/* %s: generated by numba-cuda-launch." % lib_name,
           "   Built with %s. */" % build_info,
           "#ifndef %s" % guard, "#define %s" % guard,
           "#include <stdbool.h>", "#include <stdint.h>",
           "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
           "#define %s_ABI_VERSION %d" % (prefix.upper(), ABI_VERSION), ""]
    for exp in exports:
        if exp.tvm_ffi is not None:
            out.append("/* TVM-FFI function %r (tvm_ffi.load_module(...).%s): 0, or -1 with "
                       "the error raised in libtvm_ffi */" % (exp.tvm_ffi, exp.tvm_ffi))
            out.append("int %s(void *self, const void *args, int32_t num_args, void *result);"
                       % exp.cname)
        elif exp.ffi_target is None:
            note = ": returns the CUresult of its launch (0 on success)" \
                if exp.code.restype == types.int32 else ""
            out.append("/* %s (cfunc %s)%s */" % (exp.cname, exp.code.pyfunc.__qualname__, note))
            out.append(_prototype(exp) + ";")
    out += ["", _HELPERS.format(P=prefix, PU=prefix.upper()).rstrip(), "",
            "#ifdef __cplusplus", "}", "#endif", "#endif", ""]
    return "\n".join(out)


def _version_script(exports, prefix):
    names = [e.cname for e in exports] + ["%s_%s" % (prefix, h) for h in _HELPER_NAMES]
    return "{\n  global:\n%s\n  local: *;\n};\n" % "\n".join('    "%s";' % n for n in names)


# -- toolchain and the final check ----------------------------------------------

def _compiler():
    cc = os.environ.get("CC") or "cc"
    path = shutil.which(cc.split()[0]) if cc.strip() else None
    if path is None:
        raise AotBuildError(
            "no C compiler found (tried %s): building a C library links with the system C "
            "toolchain; install one (gcc or clang) or set CC" % (
                "CC=%r" % cc if os.environ.get("CC") else "'cc' on PATH"))
    return [path] + cc.split()[1:]


def _elf_dynamic(path):
    """(needed libraries, undefined non-weak dynamic symbols) of ELF64
    shared library *path* (little-endian)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise AotBuildError("%s is not a little-endian ELF64 file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]

    def string(sec, off):
        start = sections[sec][4] + off
        return data[start:data.index(b"\0", start)].decode()
    needed, undefined = [], []
    for _, kind, _, _, off, size, link, _, _, entsize in sections:
        if kind == 6:  # SHT_DYNAMIC: DT_NEEDED entries
            for pos in range(off, off + size, 16):
                tag, val = struct.unpack_from("<qQ", data, pos)
                if tag == 1:
                    needed.append(string(link, val))
        elif kind == 11:  # SHT_DYNSYM
            for pos in range(off + entsize, off + size, entsize):
                name, info, _, shndx = struct.unpack_from("<IBBH", data, pos)
                if shndx == 0 and name and info >> 4 != 2:  # undefined, not STB_WEAK
                    undefined.append(string(link, name))
    return needed, sorted(undefined)


def check_library(path: str | os.PathLike[str]) -> None:
    """Raise :class:`AotBuildError` unless shared library *path* needs only
    libc, libdl and libm and takes from them only the symbols this package's
    libraries use (no Python, Numba or other library at run time)."""
    needed, undefined = _elf_dynamic(path)
    bad_libs = [n for n in needed if n not in _NEEDED_OK]
    bad = [s for s in undefined if s not in _LIBC_OK and not _LIBM_OK.match(s)]
    if bad_libs or bad:
        needs = [what % ", ".join(names) for what, names in
                 (("libraries %s", bad_libs), ("symbols %s", bad)) if names]
        raise AotBuildError(
            "%s would not run without Python: it needs %s (only libc, libdl and libm are "
            "allowed)" % (path, "; ".join(needs)))


# -- build ----------------------------------------------------------------------

def _build_info(prefix, cpu):
    versions = numba_cfunc.toolchain_versions()
    cc = _compat.image_target()
    if cc and isinstance(cc[0], tuple):  # a fatbin: cubins and the lowest one's PTX
        archs = "%s + compute_%d%d PTX" % (", ".join("sm_%d%d" % c for c in cc), *cc[0])
    else:
        archs = "sm_%d%d" % cc if cc else "an unknown architecture"
    return ("%s ABI %d; numba-cuda-launch %s; numba %s; numba-cuda %s; llvmlite %s; CUDA %s; "
            "kernels for %s; CPU %s" % (
                prefix, ABI_VERSION, __version__, versions["numba"], versions["numba-cuda"],
                versions["llvmlite"], versions["cuda"], archs, cpu or "host"))


def _describe(value):
    text = repr(value)
    return "%s %s" % (type(value).__name__, text if len(text) <= 60 else text[:57] + "...")


def _path_argument(value, what, optional=False):
    if optional and value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or isinstance(os.fspath(value), bytes):
        raise TypeError("build(): %s must be a file path (a str or os.PathLike), got %s"
                        % (what, _describe(value)))
    text = os.fspath(value)
    if not text or text.endswith(os.sep):
        raise ValueError("build(): %s=%r names no file: give a file name such as "
                         "'build/libsaxpy.so'" % (what, text))
    return text


def _check_outputs(path, header, exports):
    """Refuse outputs that would overwrite each other, a directory, or a file
    the build reads: the C runtime, a Python file defining an exported
    function."""
    outputs = (("path", path), ("header", header))
    if _same_file(path, header):
        raise AotBuildError(
            "build(): header=%r is the library's path %r: writing the header would "
            "overwrite the library; give the header another name (default: the library's "
            "path with .h)" % (header, path))
    inputs = {os.path.join(_RUNTIME_DIR, _RUNTIME): "the library's C runtime"}
    for e in exports:
        try:
            source = inspect.getsourcefile(e.code.pyfunc)
        except TypeError:
            source = None
        if source and os.path.exists(source):  # not "<...>" (generated source)
            inputs.setdefault(source, "the Python source of %s" % e.what)
    for what, out in outputs:
        if os.path.isdir(out):
            raise AotBuildError("build(): %s=%r is a directory; give a file name in it"
                                % (what, out))
        for source, role in inputs.items():
            if _same_file(out, source):
                raise AotBuildError("build(): %s=%r is %s, which the build reads: writing it "
                                    "would destroy it; give another file name"
                                    % (what, out, role))


def _same_file(a, b):
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:  # one of them does not exist yet
        return False


# A function with floating-point and integer code, which LLVM compiles for a
# CPU only if the CPU can run the target's code.
_CPU_PROBE_IR = """
define double @probe(double %x, i64 %n) {
  %f = sitofp i64 %n to double
  %y = fmul double %x, %f
  ret double %y
}
"""
_CPU_PROBE = r"""
import sys
from llvmlite import binding as ll
ll.initialize_native_target()
ll.initialize_native_asmprinter()
triple, cpu, ir = sys.argv[1:4]
module = ll.parse_assembly(ir)
module.triple = triple
tm = ll.Target.from_triple(triple).create_target_machine(cpu=cpu, features="", opt=3,
                                                          reloc="pic", codemodel="default")
tm.emit_object(module)
"""


@functools.lru_cache(maxsize=None)
def _cpu_problem(triple, cpu):
    """Why LLVM cannot generate code for CPU *cpu* of *triple*, or None: asked
    of a child process, since LLVM ignores a CPU it does not know (saying so
    on stderr) and ends the process on one that cannot run the target's code."""
    done = subprocess.run([sys.executable, "-c", _CPU_PROBE, triple, cpu, _CPU_PROBE_IR],
                          capture_output=True, text=True, timeout=120)
    if "is not a recognized processor" in done.stderr:
        return "LLVM does not know this CPU for %s" % triple
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        said = [line for line in lines if "LLVM ERROR" in line or "error" in line.lower()]
        return "LLVM cannot generate %s code for it (%s)" % (
            triple, (said or lines or ["exit status %d" % done.returncode])[-1])
    return None


def _check_cpu(triple, cpu):
    """Refuse a *cpu* (``build(cpu=...)``) LLVM cannot generate code for,
    before the build's LLVM sees it."""
    if cpu in (None, "host"):
        return  # the CPU and features Numba compiled for
    problem = "it names no CPU" if not cpu.strip() else _cpu_problem(triple, cpu)
    if problem is not None:
        examples = "'x86-64', 'x86-64-v2', 'x86-64-v3', 'skylake', " \
            if triple.startswith("x86_64") else ""
        raise AotBuildError(
            "build(): cpu=%r: %s; pass an LLVM CPU name such as %s'%s' (this machine's), or "
            "'host' or None for the CPU Numba compiles for" % (
                cpu, problem, examples, ll.get_host_cpu_name()))


def build(path: str | os.PathLike[str], functions: Mapping[str, Any] | None = None, *,
          header: str | os.PathLike[str] | None = None, prefix: str | None = None,
          jax_kernels: Iterable[Any] = (), cpu: str | None = None,
          tvm_ffi_functions: Mapping[str, Any] | None = None) -> Library:
    """Build shared library *path* from compiled ``@cfunc`` launchers (docs/aot.md).

    *functions* maps each exported C name to a ``@cfunc`` (status-only:
    ``kernel[...].launch_status(...)``; arguments C scalars and pointers).
    *jax_kernels* lists ``jax_kernel()`` results whose registered FFI
    handlers are exported under their target names. *header* is the C
    header to write (default: *path* with ``.h``); *prefix* the prefix of
    the library's helper functions (default: the file name without ``lib``
    and extension); *cpu* an LLVM CPU name for the code (default: the CPU
    Numba compiled for; ``"x86-64"`` for any x86-64). *tvm_ffi_functions*
    maps names to ``tvm_ffi_kernel()`` results (or TVM-FFI cfuncs), exported
    as ``__tvm_ffi_<name>`` for ``tvm_ffi.load_module``. Links with ``$CC``
    or ``cc``. Returns a :class:`Library`; raises :class:`AotBuildError`.
    """
    if not sys.platform.startswith("linux"):
        raise AotBuildError("C libraries are built for Linux (ELF shared objects) only, "
                            "not %s" % sys.platform)
    path, header = _path_argument(path, "path"), _path_argument(header, "header", True)
    if functions is not None and not isinstance(functions, Mapping):
        raise TypeError(
            "build(): functions must be a dict {C name: cfunc}, such as {'saxpy_launch': "
            "saxpy_launch}: each cfunc is exported under the name it is given; got %s"
            % _describe(functions))
    if jax_kernels is not None and not isinstance(jax_kernels, Iterable):
        raise TypeError("build(): jax_kernels must be a list of jax_kernel() results, got %s"
                        % _describe(jax_kernels))
    if cpu is not None and not isinstance(cpu, str):
        raise TypeError("build(): cpu must be an LLVM CPU name (a str such as 'x86-64') or "
                        "None, got %s" % _describe(cpu))
    base = os.path.basename(path)
    if prefix is None:
        prefix = re.sub(r"\W", "_", re.sub(r"^lib", "", base.split(".")[0]))
    if (not isinstance(prefix, str) or not _C_NAME.match(prefix) or prefix in _C_KEYWORDS
            or _RESERVED.match(prefix) or _RUNTIME_NAMES.match(prefix + "_")):
        raise AotBuildError("prefix %r is not a C identifier that can prefix the library's "
                            "own names (not a keyword, not starting with _, not ncl): pass "
                            "prefix=" % (prefix,))
    for name in functions or {}:
        if not isinstance(name, str):
            raise TypeError("build(): functions maps C names (strings) to cfuncs; got the "
                            "key %s" % _describe(name))
    cc = _compiler()
    if not os.path.exists(os.path.join(_RUNTIME_DIR, _RUNTIME)):
        raise AotBuildError("the C runtime %s is missing from this installation (package "
                            "data of numba_cuda_launch.interop)" % os.path.join(_RUNTIME_DIR,
                                                                               _RUNTIME))
    macros = _header_macros(tuple(cc))
    exports = [_launcher(n, f, prefix, macros) for n, f in (functions or {}).items()]
    exports += _jax_exports(jax_kernels)
    exports += _tvm_ffi_exports(tvm_ffi_functions)
    if not exports:
        raise AotBuildError("nothing to build: give functions={C name: cfunc}, jax_kernels "
                            "or tvm_ffi_functions")
    symbols: dict[str, str] = {}  # symbol -> the C name it is exported as
    for e in exports:
        if e.code.symbol in symbols:
            raise AotBuildError("%s: the same cfunc is already exported as %r; a cfunc goes "
                                "in a library once" % (e.what, symbols[e.code.symbol]))
        symbols[e.code.symbol] = e.cname
    header = header or os.path.splitext(path)[0] + ".h"
    _check_outputs(path, header, exports)
    _check_cpu(exports[0].code.triple, cpu)
    for e in exports:
        _check_signature(e)
    tm = _target_machine(exports[0].code, cpu)
    modules = [_optimized_module(e, tm) for e in exports]
    shared = _shared_modules(modules, tm)
    for exp, module in zip(exports, modules):
        _refuse_python(exp, module, shared)
    modules += shared.values()
    linked = modules[0]
    for m in modules[1:]:
        linked.link_in(m)
    build_info = _build_info(prefix, cpu)
    header_text = _header(exports, prefix, base, build_info)
    with tempfile.TemporaryDirectory(prefix="ncl-aot-") as tmp:
        files = {"launchers.o": tm.emit_object(linked), "lib.h": header_text.encode(),
                 "lib.c": _source(exports, prefix, build_info).encode(),
                 "exports.map": _version_script(exports, prefix).encode()}
        for name, content in files.items():
            with open(os.path.join(tmp, name), "wb") as out:
                out.write(content)
        # Relative names and a fixed directory layout keep the output the same
        # from one build to the next.
        cmd = cc + ["-shared", "-fPIC", "-O2", "-I", _RUNTIME_DIR, "-o", "lib.so", "lib.c",
                    "launchers.o", "-Wl,--version-script=exports.map", "-Wl,--no-undefined",
                    "-Wl,-z,text", "-Wl,--as-needed", "-ldl", "-lm"]
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if done.returncode != 0:
            raise AotBuildError("linking %s failed (%s):\n%s" % (
                base, " ".join(cmd), (done.stderr or done.stdout).strip()))
        check_library(os.path.join(tmp, "lib.so"))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        shutil.copyfile(os.path.join(tmp, "lib.so"), path)
    os.makedirs(os.path.dirname(os.path.abspath(header)), exist_ok=True)
    with open(header, "w") as f:
        f.write(header_text)
    return Library(os.fspath(path), os.fspath(header), prefix,
                   tuple(e.cname for e in exports if e.ffi_target is None and e.tvm_ffi is None),
                   tuple(e.ffi_target for e in exports if e.ffi_target is not None), build_info,
                   tuple(e.tvm_ffi for e in exports if e.tvm_ffi is not None))


# -- command line ---------------------------------------------------------------

class _CommandLineError(Exception):
    """A refusal of the command line, said in one line."""


def _first_line(exc):
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return "%s: %s" % (type(exc).__name__, lines[0] if lines else "")


def _load(spec):
    """The object *spec* (``MODULE:ATTRIBUTE``) names, imported from the
    current directory; :class:`_CommandLineError` saying what is wrong."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise _CommandLineError("%r: write MODULE:ATTRIBUTE, e.g. "
                                "saxpy_launch=mymodule:saxpy_launch" % spec)
    try:
        obj = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module + ".").startswith(exc.name + "."):
            raise _CommandLineError("importing module %r failed: %s" % (module, _first_line(exc)))
        raise _CommandLineError(
            "%r: no module named %r in the current directory (%s) or on the Python path "
            "(modules are imported as `import %s`; run from the folder that has it)"
            % (spec, exc.name, os.getcwd(), module)) from None
    except Exception as exc:  # the module's own error: compiling a kernel, ...
        if _compat.no_gpu_cause(exc)[0] is not None:
            raise _CommandLineError(
                "importing module %r failed: its kernels compile for a GPU, and this machine "
                "has no usable GPU and no architecture was given: pass --cc with the "
                "GPUs' compute capability, e.g. --cc 9.0" % module) from None
        raise _CommandLineError("importing module %r failed: %s"
                                % (module, _first_line(exc))) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise _CommandLineError("%r: module %r has no attribute %r"
                                    % (spec, module, attr)) from None
    return obj


def main(argv: Sequence[str] | None = None) -> int:
    """``numba-cuda-launch-aot OUT.so NAME=module:cfunc ... [module:jax_kernel ...]``:
    0 when the library is written, 2 with a one-line error otherwise."""
    p = argparse.ArgumentParser(
        prog="numba-cuda-launch-aot",
        description="Build a C shared library from @cfunc launchers (docs/aot.md).")
    p.add_argument("output", help="the shared library to write, e.g. libsaxpy.so")
    p.add_argument("items", nargs="+", metavar="NAME=MODULE:CFUNC | MODULE:JAX_KERNEL",
                   help="a cfunc exported as C function NAME, or a jax_kernel() whose "
                        "registered FFI handlers are exported")
    p.add_argument("--header", help="the C header to write (default: OUTPUT with .h)")
    p.add_argument("--prefix", help="prefix of the library's helper functions")
    p.add_argument("--cc", metavar="X.Y", help="compute capability of the kernel images "
                   "when no GPU is present, or several separated by spaces (\"8.0 9.0\": "
                   "cubins for each and PTX for newer GPUs, with or without a GPU), as "
                   "NUMBA_CUDA_LAUNCH_CC")
    p.add_argument("--cpu", help="LLVM CPU name of the code (default: this machine's)")
    args = p.parse_args(argv)
    try:
        if args.cc:
            config.set_compute_capability(config.parse_setting(args.cc, "--cc"))
        sys.path.insert(0, os.getcwd())
        functions, kernels = {}, []
        for item in args.items:
            name, eq, spec = item.rpartition("=")
            if eq:
                if name in functions:
                    raise _CommandLineError("%r: the C name %r is given twice; each exported "
                                            "function needs its own name" % (item, name))
                functions[name] = _load(spec)
            else:
                obj = _load(spec)
                if numba_cfunc.is_cfunc(obj):
                    raise _CommandLineError(
                        "%r is a cfunc: export it under a C name, NAME=MODULE:CFUNC (e.g. "
                        "%s=%s); MODULE:ATTRIBUTE alone names a jax_kernel"
                        % (spec, spec.rpartition(":")[2].rpartition(".")[2], spec))
                kernels.append(obj)
        lib = build(args.output, functions, header=args.header, prefix=args.prefix,
                    jax_kernels=kernels, cpu=args.cpu)
    except (_CommandLineError, ValueError, TypeError) as exc:  # AotBuildError is a ValueError
        print("numba-cuda-launch-aot: %s" % exc, file=sys.stderr)
        return 2
    print("wrote %s (%d bytes) and %s" % (lib.path, os.path.getsize(lib.path), lib.header))
    return 0
