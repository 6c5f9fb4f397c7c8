"""Layer 0, compat: every use of numba-cuda internals (:mod:`.numba_cuda`).

Nothing here imports from the layers above (runtime, launch, interop).
"""
