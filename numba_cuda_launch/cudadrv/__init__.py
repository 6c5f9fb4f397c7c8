"""Layer 1, cudadrv: the driver calls compiled code makes at run time.

Driver table, contexts, kernel images, graphs, events, launch attributes,
occupancy and a recording fake driver for tests. Like numba-cuda's
``cudadrv``, it knows nothing of typing or of dispatchers
(docs/architecture.md).
"""
