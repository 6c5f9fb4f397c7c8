"""PTX of CUDA C++ sources for the tests' foreign kernels, made with NVRTC
(the cu12/cu13 extras bring it; no GPU needed)."""


def nvrtc_ptx(source, options, name):
    """The PTX NVRTC makes of CUDA C++ *source* with *options*; ValueError
    with NVRTC's log if it fails."""
    from cuda.bindings import nvrtc

    _, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"%s.cu" % name.encode(), 0, [], [])
    try:
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise ValueError("NVRTC cannot compile kernel %r:\n%s"
                             % (name, log.decode(errors="replace")))
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
        return ptx
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
