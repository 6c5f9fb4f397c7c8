"""Reading PTX text: the entry points it declares and the byte sizes of one
entry point's parameters, which the numba-cuda-mlir adapter and foreign
kernels check their packed parameters against (docs/kernel-sources.md,
docs/numba-cuda-mlir.md). Comments (``//`` and ``/* */``) are not PTX: an
entry point commented out is not one.
"""

import re

__all__ = ["ptx_param_sizes", "ptx_entries", "strip_comments"]

_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)", re.S)
# a string literal (kept: a .file path may hold "//"), or a comment
_LEXEMES = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)
_TYPE = re.compile(r"\.[bsuf](8|16|32|64)$")
_COUNT = re.compile(r"\[(\d+)\]$")


def strip_comments(ptx: str) -> str:
    """*ptx* with its comments replaced by a space (line breaks kept)."""
    pieces, last = [], 0
    for m in _LEXEMES.finditer(ptx):
        text = m.group(0)
        if not text.startswith('"'):  # a comment
            pieces += [ptx[last:m.start()], " " + "\n" * text.count("\n")]
            last = m.end()
    pieces.append(ptx[last:])
    return "".join(pieces)


def ptx_entries(ptx: str) -> list:
    """The names of the entry points (``.entry``) *ptx* declares, in order."""
    return [m.group(1) for m in _ENTRY.finditer(strip_comments(ptx))]


def ptx_param_sizes(ptx, name):
    """The byte sizes of the parameters of entry *name* in *ptx* (text),
    read from its ``.entry`` declaration; None if it has no such entry.
    ValueError naming the declaration when one is not a ``.param`` of a
    sized type (``.b8`` .. ``.f64``, an optional ``[count]``)."""
    for match in _ENTRY.finditer(strip_comments(ptx)):
        if match.group(1) != name:
            continue
        sizes = []
        for decl in match.group(2).split(","):
            tokens = decl.split()
            if not tokens:
                continue
            kinds = list(filter(_TYPE.match, tokens[1:-1]))
            if tokens[0] != ".param" or not kinds:
                raise ValueError("entry %r declares a parameter %r whose size cannot be "
                                 "read (expected '.param .<type> name' with a type .b8 .. "
                                 ".f64, as compilers write it)" % (name, " ".join(tokens)))
            count = _COUNT.search(tokens[-1])
            sizes.append(int(_TYPE.match(kinds[0]).group(1)) // 8 *
                         (int(count.group(1)) if count else 1))
        return sizes
    return None
