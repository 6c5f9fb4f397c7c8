"""Layer 1, cudadrv: the driver calls compiled code makes at run time.

* :mod:`.driver` -- the driver table compiled code calls through;
* :mod:`.context` -- the context a launching thread uses;
* :mod:`.image` -- kernel images: their first load (one loader, for compiled
  code and for Python callers of :func:`~numba_cuda_launch.kernel_handle`);
* :mod:`.graph` -- stream capture and CUDA graph calls;
* :mod:`.launchex` -- ``cuLaunchKernelEx`` with launch attributes (clusters);
* :mod:`.occupancy` -- occupancy queries;
* :mod:`.recording` -- a recording fake driver for tests.

Like numba-cuda's ``cudadrv``, this layer knows nothing of typing or of
numba-cuda's dispatchers: it takes images and emits or makes driver calls.
"""
