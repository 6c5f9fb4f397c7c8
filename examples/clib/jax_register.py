"""Register the XLA FFI handlers of a library built by numba_cuda_launch.aot
with JAX, in a process that does not import Numba (or this package).

    lib, names = register_library("./libsaxpy.so", "saxpy")
    exported = jax.export.deserialize(open("saxpy.jax", "rb").read())
    out = exported.call(x, y)

The library exports a table of its handlers (``PREFIX_ffi_targets``: target
name, handler address, command-buffer flag); each is given to
``jax.ffi.register_ffi_target`` in a PyCapsule, as jaxlib's own handlers
are. Keep ``lib`` alive as long as JAX may call the handlers.
"""

import ctypes

import jax


class _Target(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("handler", ctypes.c_void_p),
                ("command_buffer", ctypes.c_int)]


_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype = ctypes.py_object
_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def register_library(path, prefix, platform="CUDA"):
    """Load the library at *path* (helper prefix *prefix*) and register each
    of its FFI targets for *platform*; returns the library and the names."""
    lib = ctypes.CDLL(path)
    count = getattr(lib, prefix + "_ffi_target_count")()
    targets = getattr(lib, prefix + "_ffi_targets")
    targets.restype = ctypes.POINTER(_Target)
    names = []
    for t in targets()[:count]:
        handler = _capsule(t.handler, None, None)
        # A command-buffer compatible handler loads its image in the
        # initialize stage, before any CUDA graph capture.
        stages = {"execute": handler, "initialize": handler} if t.command_buffer else handler
        jax.ffi.register_ffi_target(t.name.decode(), stages, platform=platform, api_version=1)
        names.append(t.name.decode())
    return lib, names


if __name__ == "__main__":
    print("examples/clib/jax_register.py is a module: import register_library from it "
          "(docs/aot.md, \"JAX: the FFI handlers in the library\")")
