"""Whether an address can be handed to a kernel: device memory, or host
memory the device can reach (mapped/pinned, managed).

Only the driver can tell (``cuPointerGetAttribute`` fails for memory it does
not know). Launches ask it for arrays carrying a Numba meminfo and, in the
checked mode, for every array and pointer argument: a process-wide switch
compiled (and cached) code reads at each launch (README.md, "What you can
write").
"""

import ctypes
import os

from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.context import emit_ensure_context

__all__ = ["check_pointers", "pointer_checks_enabled", "emit_checked_mode",
           "emit_is_device_accessible"]

_FLAG_SYMBOL = "numba_cuda_launch_check_pointers"
_flag = ctypes.c_int32(1 if os.environ.get("NUMBA_CUDA_LAUNCH_CHECK_POINTERS", "0")
                       not in ("", "0") else 0)
llvm_binding.add_symbol(_FLAG_SYMBOL, ctypes.addressof(_flag))

_i32 = ir.IntType(32)
_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2


def check_pointers(enabled=True):
    """Turn the checked mode on (or off): every launch from compiled code
    then asks the driver whether each array's data and each pointer argument
    is memory the device can reach, and refuses the launch
    (``CUDA_ERROR_INVALID_VALUE``) otherwise. Costs one driver query per
    array or pointer argument per launch."""
    _flag.value = 1 if enabled else 0


def pointer_checks_enabled():
    """True while the checked mode is on."""
    return bool(_flag.value)


def emit_checked_mode(builder):
    """Emit reading the checked-mode switch (an ``i1``)."""
    gv = builder.module.globals.get(_FLAG_SYMBOL)
    if gv is None:
        gv = ir.GlobalVariable(builder.module, _i32, _FLAG_SYMBOL)
        gv.linkage = "external"
    return builder.icmp_signed("!=", builder.load(gv), ir.Constant(_i32, 0))


def emit_is_device_accessible(builder, address):
    """Emit the driver query for *address* (``i8*``); an ``i1``, true when
    the driver knows the memory (device, managed, or mapped host memory)."""
    emit_ensure_context(builder)
    out = cgutils.alloca_once(builder, _i32)
    status = driver.call(builder, "cuPointerGetAttribute", [
        builder.bitcast(out, ir.IntType(8).as_pointer()),
        ir.Constant(_i32, _CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
        builder.ptrtoint(address, ir.IntType(64))])
    return builder.icmp_signed("==", status, ir.Constant(_i32, 0))
