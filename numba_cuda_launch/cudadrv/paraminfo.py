"""The driver's view of a loaded kernel's parameters, asked from Python
through the driver table (so the recording driver answers in tests), to check
a declared signature against a kernel another library loaded
(docs/kernel-sources.md).
"""

import ctypes

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_VALUE
from numba_cuda_launch.cudadrv import driver

__all__ = ["loaded_param_sizes"]

_ENTRY = {"CUkernel": "cuKernelGetParamInfo", "CUfunction": "cuFuncGetParamInfo"}
_MAX_PARAMS = 4096  # the driver's 32 KiB parameter space holds fewer


def loaded_param_sizes(handle, kind):
    """``(status, sizes)``: the byte size of each parameter of the loaded
    kernel *handle* (an address; *kind* ``"CUkernel"`` or ``"CUfunction"``)
    in order, with status 0; or the driver's ``CUresult`` refusing the
    first query (a driver before CUDA 12.4: ``CUDA_ERROR_NOT_FOUND``) and
    None."""
    name = _ENTRY[kind]
    query = driver.prototype(name)(driver.current_functions()[name])
    offset, size = ctypes.c_uint64(), ctypes.c_uint64()
    sizes = []
    for index in range(_MAX_PARAMS):
        status = query(handle, index, ctypes.byref(offset), ctypes.byref(size))
        if status == CUDA_ERROR_INVALID_VALUE:
            break  # past the last parameter
        if status != 0:
            return status, None
        sizes.append(size.value)
    return 0, sizes
