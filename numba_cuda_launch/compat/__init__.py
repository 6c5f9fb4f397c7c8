"""Layer 0, compat: every use of Numba's, numba-cuda's and numba-cuda-mlir's
internals (one module each for what it reads), and every replacement of
another library's attribute, declared in :mod:`.overrides`
(docs/overrides.md). Nothing here imports from the layers above.
"""
