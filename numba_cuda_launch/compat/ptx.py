"""Reading PTX text: the byte sizes of an entry point's parameters, which the
numba-cuda-mlir adapter and foreign kernels check their packed parameters
against (docs/kernel-sources.md, docs/numba-cuda-mlir.md).
"""

import re

__all__ = ["ptx_param_sizes"]

_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)", re.S)
_WIDTH = {"8": 1, "16": 2, "32": 4, "64": 8}


def ptx_param_sizes(ptx, name):
    """The byte sizes of the parameters of entry *name* in *ptx* (text),
    read from its ``.entry`` declaration; None if it has no such entry."""
    for match in _ENTRY.finditer(ptx):
        if match.group(1) != name:
            continue
        sizes = []
        for decl in filter(None, (d.strip() for d in match.group(2).split(","))):
            tokens = decl.split()
            kind = tokens[3] if tokens[1] == ".align" else tokens[1]
            count = re.search(r"\[(\d+)\]$", tokens[-1])
            sizes.append(_WIDTH[kind[2:]] * (int(count.group(1)) if count else 1))
        return sizes
    return None
