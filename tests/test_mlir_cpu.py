"""numba-cuda-mlir kernels launched from compiled code, against the recording
driver (no GPU): numba-cuda-mlir compiles its cubin for the configured
architecture and the packed parameter bytes are checked against the layout
of numba-cuda-mlir's C++ launcher (upstream ``cext/launcher/kernel.cpp``,
``extract_cuda_array`` and the scalar extractors):

* an array: data pointer twice (allocated, aligned), offset 0, the shape, the
  strides divided by the itemsize;
* an integer, float or boolean: its value, as wide as the PTX parameter
  (the launcher stores 8 bytes and the driver reads the parameter's size);
* complex64: real and imaginary float32 in one 8-byte parameter; complex128:
  two float64 in one 16-byte parameter; float16: its 16 bits.
"""

import ctypes
import struct
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from numba import njit
from numba.core import types as nt
from numba.core.errors import TypingError

numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import graphs  # noqa: E402
from numba_cuda_launch.kernels import numba_cuda_mlir as compat_mlir  # noqa: E402
from numba_cuda_launch.testing import RecordingDriver  # noqa: E402
from support import HAVE_GPU, HAVE_NUMBA_CUDA  # noqa: E402
from support.childenv import PREAMBLE, child_env  # noqa: E402
from support.producers import CAI, CupyLikeStream, DLPackOnDevice, ProtocolStream  # noqa: E402

from numba_cuda_mlir import cuda as mcuda  # noqa: E402
from numba_cuda_mlir import types as mt  # noqa: E402

# Eager kernels compile at decoration, inside numba-cuda-mlir: with no GPU
# the architecture must be set once numba_cuda_mlir is imported.
if not HAVE_GPU:
    ncl.set_compute_capability(ncl.get_compute_capability() or (9, 0))

rng = np.random.default_rng()


@mcuda.jit
def scale(out, x, a):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i]


@mcuda.jit
def copy2d(out, x):
    i, j = mcuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[i, j]


@mcuda.jit(mt.void(mt.float64[::1], mt.int8, mt.uint16, mt.int32, mt.int64, mt.float32,
                   mt.float64, mt.boolean, mt.complex64, mt.complex128, mt.float16))
def scalars(out, a, b, c, d, e, f, g, h, k, m):
    out[0] = a + b + c + d + e + f + g + h.real + k.real + m


@mcuda.jit([mt.void(mt.CPointer(mt.float32), mt.float32),
            mt.void(mt.CPointer(mt.float64), mt.float64)])
def fill(p, v):
    p[mcuda.grid(1)] = v


@mcuda.jit
def tuples(out, t, arrs):
    out[0] = t[0] + t[1] + arrs[0][0] + arrs[1][0]


@mcuda.jit(debug=True, opt=False)
def debug_kernel(out):
    out[0] = 1


@mcuda.jit(device=True)
def device_fn(x):
    return x + 1


def layout_of(kernel_dispatcher):
    """Register the PTX parameter sizes of every compiled overload with the
    recording driver (it reads each parameter with these sizes)."""
    return {compat_mlir.kernel_entry_name(k): compat_mlir.kernel_param_sizes(k)
            for k in kernel_dispatcher.overloads.values()}


def record(dispatcher, fn, *args):
    with RecordingDriver() as rec:
        fn(*args)  # compiles (and launches with unknown layout)
        rec.layouts.update(layout_of(dispatcher))
        del rec.launches[:]
        fn(*args)
    assert len(rec.launches) == 1
    return rec.launches[0]


def q(*values):
    return [struct.pack("<q", v) for v in values]


# -- kernel_handle ---------------------------------------------------------------

def test_kernel_handle_of_an_mlir_kernel():
    """kernel_handle() gives a numba-cuda-mlir overload's image, entry point
    and parameters in numba-cuda-mlir's layout (memref descriptors)."""
    h = ncl.kernel_handle(scale, (nt.float32[::1], nt.float32[::1], nt.float32))
    memref = ["allocated", "aligned", "offset", "shape[0]", "strides[0]"]
    assert [p.name for p in h.params] == (
        ["out." + f for f in memref] + ["x." + f for f in memref] + ["a"])
    assert [p.size for p in h.params] == [8] * 10 + [4]
    assert [p.offset for p in h.params] == [8 * i for i in range(11)]
    (kernel,) = [k for k in scale.overloads.values()
                 if compat_mlir.kernel_entry_name(k) == h.entry_name]
    assert h.image == compat_mlir.kernel_image(kernel) and h.image[:4] == b"\x7fELF"
    assert h.kernel_name == "scale" and h.cooperative is False


def test_kernel_handle_of_an_mlir_device_function_says_so():
    with pytest.raises(TypeError) as info:
        ncl.kernel_handle(device_fn, (nt.int32,))
    assert str(info.value).startswith("kernel_handle('device_fn', ...): it is a CUDA device "
                                      "function")


# -- arrays --------------------------------------------------------------------

@njit
def launch_scale(o, x, n, a, stream):
    out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
    xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
    scale[(n + 127) // 128, 128, stream, 64](out, xs, a)


def test_lazy_kernel_memref_parameters():
    n = int(rng.integers(200, 5000))
    a = np.float32(rng.standard_normal())
    o, x = 0x7F0000001000, 0x7F0000100000
    launch = record(scale, launch_scale, o, x, n, a, 0x55)
    assert launch.grid == ((n + 127) // 128, 1, 1) and launch.block == (128, 1, 1)
    assert launch.sharedmem == 64 and launch.stream == 0x55 and not launch.cooperative
    assert launch.params == q(o, o, 0, n, 1) + q(x, x, 0, n, 1) + [struct.pack("<f", a)]
    # The compilation is numba-cuda-mlir's own: a Python launch reuses it.
    assert list(scale.overloads) == [(mt.float32[::1], mt.float32[::1], mt.float32)]


@njit
def launch_copy2d_views(o, x, rows, cols):
    big = numba.carray(ncl.as_voidptr(x), (rows, 2 * cols), np.float64)
    out = numba.farray(ncl.as_voidptr(o), (rows, cols), np.float64)
    copy2d[(1, 1), (rows, cols)](out, big[:, ::2])


def test_strided_and_fortran_arrays_pass_strides_in_elements():
    rows, cols = int(rng.integers(2, 9)), int(rng.integers(2, 9))
    o, x = 0x10000, 0x20000
    launch = record(copy2d, launch_copy2d_views, o, x, rows, cols)
    # farray: strides (1, rows) elements; big[:, ::2]: (2 * cols, 2) elements.
    assert launch.params == (q(o, o, 0, rows, cols, 1, rows)
                             + q(x, x, 0, rows, cols, 2 * cols, 2))
    assert (mt.float64[::1, :], mt.float64[:, :]) in copy2d.overloads


# -- scalars, pointers, tuples -------------------------------------------------

@njit
def launch_scalars(o, a, b, c, d, e, f, g, h, k, m):
    out = numba.carray(ncl.as_voidptr(o), (1,), np.float64)
    scalars[1, 1](out, a, b, c, d, e, f, g, h, k, m)


def test_scalar_parameters_follow_the_launcher():
    a, b = int(rng.integers(-128, 128)), int(rng.integers(0, 65536))
    c, d = int(rng.integers(-2**31, 2**31)), int(rng.integers(-2**63, 2**63))
    e, f = float(np.float32(rng.standard_normal())), float(rng.standard_normal())
    h = complex(np.float32(rng.standard_normal()), np.float32(rng.standard_normal()))
    k = complex(rng.standard_normal(), rng.standard_normal())
    args = (0x9000, np.int8(a), np.uint16(b), np.int32(c), np.int64(d), np.float32(e), f,
            True, np.complex64(h), k, 1.5)
    launch = record(scalars, launch_scalars, *args)
    assert launch.params == q(0x9000, 0x9000, 0, 1, 1) + [
        struct.pack("<b", a), struct.pack("<H", b), struct.pack("<i", c), struct.pack("<q", d),
        struct.pack("<f", e), struct.pack("<d", f), b"\x01",
        struct.pack("<ff", h.real, h.imag), struct.pack("<dd", k.real, k.imag),
        np.float16(1.5).tobytes()]


@njit
def launch_fill_voidptr(p, v):
    fill[4, 32](ncl.as_voidptr(p), v)


def test_eager_overloads_chosen_by_numba_rules():
    with RecordingDriver() as rec:
        rec.layouts.update(layout_of(fill))
        launch_fill_voidptr(0x4000, np.float64(0.25))
        launch_fill_voidptr(0x4000, np.float32(0.5))
    names = [compat_mlir.kernel_entry_name(k) for k in fill.overloads.values()]
    f32, f64 = sorted(names, key=lambda s: "float64" in s)
    assert [launch.kernel for launch in rec.launches] == [f64, f32]
    assert rec.launches[0].params == [struct.pack("<Q", 0x4000), struct.pack("<d", 0.25)]
    assert rec.launches[1].params == [struct.pack("<Q", 0x4000), struct.pack("<f", 0.5)]


@njit
def launch_tuples(o, a, b, n):
    out = numba.carray(ncl.as_voidptr(o), (1,), np.float32)
    xa = numba.carray(ncl.as_voidptr(a), (n,), np.float32)
    xb = numba.carray(ncl.as_voidptr(b), (n,), np.float32)
    tuples[1, 1](out, (np.float32(1.0), np.float32(2.0)), (xa, xb))


def test_tuples_flatten_into_their_items():
    n = int(rng.integers(1, 100))
    launch = record(tuples, launch_tuples, 0x100, 0x200, 0x300, n)
    assert launch.params == (q(0x100, 0x100, 0, 1, 1)
                             + [struct.pack("<f", 1.0), struct.pack("<f", 2.0)]
                             + q(0x200, 0x200, 0, n, 1) + q(0x300, 0x300, 0, n, 1))


# -- both compilers in one function ----------------------------------------------

@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="needs numba-cuda, which is not installed")
def test_numba_cuda_and_numba_cuda_mlir_kernels_in_one_function():
    from numba import cuda

    @cuda.jit
    def nc_scale(out, x, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i]

    @njit
    def launch_both(o, x, n, a):
        out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
        xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
        nc_scale[1, n](out, xs, a)
        scale[1, n](out, xs, a)

    n = 96
    with RecordingDriver() as rec:
        launch_both(0x1000, 0x2000, n, np.float32(3.0))
    assert len(rec.loads) == 2 and len(rec.launches) == 2
    nc, ml = rec.launches
    assert nc.kernel != ml.kernel
    entry = compat_mlir.kernel_entry_name(next(iter(scale.overloads.values())))
    assert ml.kernel == entry


@njit
def launch_given(k, o, x, n, a):
    out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
    xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
    k[1, 128](out, xs, a)


def test_mlir_kernels_passed_as_njit_arguments_launch_themselves():
    # (a kernel argument carries nothing: its type is the kernel)
    n, a = int(rng.integers(2, 100)), np.float32(rng.standard_normal())

    @njit
    def fill_given(k, p, v):
        k[1, 32](ncl.as_voidptr(p), v)

    with RecordingDriver() as rec:
        launch_given(scale, 0x1000, 0x2000, n, a)
        fill_given(fill, 0x3000, np.float32(2.5))
    first, second = rec.launches
    assert first.params == q(0x1000, 0x1000, 0, n, 1) + q(0x2000, 0x2000, 0, n, 1) + \
        [struct.pack("<f", a)]
    assert second.params == [struct.pack("<Q", 0x3000), struct.pack("<f", 2.5)]
    assert first.kernel != second.kernel and "scale" in first.kernel and "fill" in second.kernel
    assert [str(sig[0]) for sig in launch_given.signatures] == ["MLIRKernel(scale)"]


def test_preload_and_status_forms():
    @njit
    def preload_and_launch(o, x, n):
        out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
        xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
        cfg = scale[1, 32]
        s1 = cfg.preload(out, xs, np.float32(1))
        s2 = cfg.launch_status(out, xs, np.float32(1))
        return s1, s2

    with RecordingDriver(launch_status=700) as rec:
        assert preload_and_launch(0x1000, 0x2000, 8) == (0, 700)
    assert len(rec.functions) == 1 and len(rec.launches) == 1


# -- errors --------------------------------------------------------------------

def test_debug_kernel_refused():
    @njit
    def f(o):
        debug_kernel[1, 1](numba.carray(ncl.as_voidptr(o), (1,), np.float32))

    with pytest.raises(TypingError, match="debug_kernel.*debug=True"):
        f(0x1000)


def test_device_function_refused():
    @njit
    def f(x):
        device_fn[1, 1](x)

    with pytest.raises(TypingError, match="device_fn.*device function"):
        f(1)


@mcuda.jit(device=True)
def small_device_fn(x):
    return x


@mcuda.jit
def small_kernel(out):
    out[0] = 1


def _called_in_cpu_code(fn, *args):
    with RecordingDriver() as rec, pytest.raises(TypingError) as info:
        fn(*args)
    assert rec.launches == []
    return str(info.value).splitlines()[0]


def test_kernel_or_device_function_called_without_configuration_is_refused():
    # small bodies: Numba's CPU pipeline inlined them (their `inline` option
    # is numba-cuda-mlir's), running the kernel's code on the CPU
    @njit
    def call_device_function():
        return small_device_fn(1)

    @njit
    def call_kernel(x):
        small_kernel(x)

    @njit
    def call_argument(k, x):
        k(x)

    x = np.zeros(2, np.float32)
    assert _called_in_cpu_code(call_device_function) == (
        "'small_device_fn' is a CUDA device function (cuda.jit(device=True)): it runs only on "
        "the GPU and cannot be called from CPU code; call it from a kernel")
    expected = ("kernel 'small_kernel' is called without a launch configuration: write "
                "small_kernel[griddim, blockdim](...) (or [griddim, blockdim, stream, "
                "sharedmem]) to launch it from CPU code")
    assert _called_in_cpu_code(call_kernel, x) == expected
    assert _called_in_cpu_code(call_argument, small_kernel, x) == expected
    assert x[0] == 0


def test_untranslatable_argument_names_parameter():
    rec_dtype = np.dtype([("a", np.float32), ("b", np.int32)])

    @njit
    def f(o, n):
        arr = numba.carray(ncl.as_voidptr(o), (n,), rec_dtype)
        scale[1, 1](arr, arr, np.float32(1))

    with pytest.raises(TypingError,
                       match=r"kernel 'scale' parameter 'out' \(argument 1\).*numba-cuda-mlir"):
        f(0x1000, 4)


def test_eager_type_mismatch_names_parameter():
    @njit
    def f(o):
        scalars[1, 1](numba.carray(ncl.as_voidptr(o), (1,), np.float32),
                      1, 1, 1, 1, 1.0, 1.0, True, 1j, 1j, 1.0)

    with pytest.raises(TypingError, match=r"kernel 'scalars' parameter 'out'"):
        f(0x1000)


def test_wrong_argument_count():
    @njit
    def f(o):
        scale[1, 1](numba.carray(ncl.as_voidptr(o), (1,), np.float32))

    with pytest.raises(TypingError, match=r"kernel 'scale' takes 3 argument"):
        f(0x1000)


def test_layout_change_is_refused(monkeypatch):
    @mcuda.jit
    def fresh(out, a):
        out[0] = a

    @njit
    def f(o):
        fresh[1, 1](numba.carray(ncl.as_voidptr(o), (1,), np.float32), np.int32(1))

    real = compat_mlir.kernel_param_sizes
    monkeypatch.setattr(compat_mlir, "kernel_param_sizes",
                        lambda k: real(k)[:-1] + [8])  # as if int32 became 8 bytes
    with pytest.raises(TypingError,
                       match=r"kernel 'fresh'.*\[8, 8, 8, 8, 8, 8\] bytes.*\[8, 8, 8, 8, 8, 4\]"):
        f(0x1000)


def test_type_translation_round_trips():
    for ty in (nt.int8, nt.uint64, nt.float16, nt.float32, nt.complex128, nt.boolean,
               nt.CPointer(nt.int16), nt.voidptr, nt.float32[:, ::1], nt.int64[::1, :],
               nt.Array(nt.float64, 3, "A", readonly=True),
               nt.UniTuple(nt.float32, 3), nt.Tuple((nt.int32, nt.float64[::1]))):
        mty = compat_mlir.to_mlir_type(ty)
        assert type(mty).__module__.startswith("numba_cuda_mlir.")
        assert compat_mlir.from_mlir_type(mty) == ty
    with pytest.raises(compat_mlir.UntranslatableType):
        compat_mlir.to_mlir_type(nt.NPDatetime("s"))


@pytest.mark.slow
def test_mlir_imported_after_numba_cuda_launch():
    """A lazy kernel defined after numba_cuda_launch was imported (and with no
    GPU, the architecture set before numba_cuda_mlir was imported) still
    types, compiles and launches."""
    code = PREAMBLE + textwrap.dedent("""
        import numba, numpy as np
        import numba_cuda_launch as ncl
        from numba_cuda_launch.compat.cuda_target import gpu_available
        if not gpu_available():
            ncl.set_compute_capability((9, 0))
        from numba_cuda_mlir import cuda as mcuda
        from numba_cuda_launch.testing import RecordingDriver

        @mcuda.jit
        def k(out):
            out[0] = 7

        @numba.njit
        def f(p):
            k[1, 1](numba.carray(ncl.as_voidptr(p), (1,), np.int32))

        with RecordingDriver() as rec:
            f(0x1000)
        print(len(rec.launches), rec.launches[0].kernel)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env(), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    count, name = out.stdout.split()
    assert count == "1" and name.startswith("_Z1k")


# -- device arrays and stream objects ------------------------------------------
# The package's device-array type (numba-cuda, CuPy, PyTorch, JAX arrays, any
# CUDA Array Interface or DLPack producer): passed as the array it views, in
# numba-cuda-mlir's layout. Fake producers over host memory (the recording
# driver launches nothing).


def memref(a):
    """numba-cuda-mlir's parameters of NumPy array *a*'s memory (as a device
    array): data pointer twice, offset 0, shape, strides in elements."""
    return q(a.ctypes.data, a.ctypes.data, 0, *a.shape, *[s // a.itemsize for s in a.strides])


@njit
def launch_scale_arrays(out, x, a, stream):
    scale[1, 32, stream](out, x, a)


@njit
def launch_copy2d_arrays(out, x):
    copy2d[(1, 1), (8, 8)](out, x)


@pytest.mark.parametrize("producer", [CAI, DLPackOnDevice], ids=["cai", "dlpack"])
def test_device_arrays_pass_numba_cuda_mlirs_memref_layout(producer):
    n = int(rng.integers(4, 300))
    out, x = np.zeros(n, np.float32), rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.standard_normal())
    launch = record(scale, launch_scale_arrays, producer(out), producer(x), a, 0)
    assert launch.params == memref(out) + memref(x) + [struct.pack("<f", a)]
    assert (mt.float32[::1], mt.float32[::1], mt.float32) in scale.overloads


@pytest.mark.parametrize("make", [
    lambda: np.asfortranarray(rng.standard_normal((5, 7))),
    lambda: rng.standard_normal((6, 14))[:, ::2],
    lambda: rng.standard_normal((9, 7))[1::2],
], ids=["fortran", "column-step", "row-step"])
def test_device_array_layouts_pass_strides_in_elements(make):
    x = make()
    out = np.zeros(x.shape)
    launch = record(copy2d, launch_copy2d_arrays, CAI(out), CAI(x))
    assert launch.params == memref(out) + memref(x)
    assert launch.params[-2:] != q(*x.strides)  # elements, not numba-cuda's bytes


@pytest.mark.parametrize("stride, refused", [(6, True), (2, True), (8, False), (-4, False)])
def test_strides_that_are_not_whole_items_are_refused_at_launch(stride, refused):
    # A memref counts strides in items: a 6-byte stride of float32 items has
    # no memref form (before: launched as a stride of 1 item).
    buf = np.zeros(64, np.uint8)
    offset = 40 if stride < 0 else 0
    x = np.ndarray((4,), np.float32, buf, offset, (stride,))
    out = np.zeros(4, np.float32)

    @njit
    def status(out, x):
        return copy1d[1, 32].launch_status(out, x)

    @njit
    def raising(out, x):
        copy1d[1, 32](out, x)

    with RecordingDriver() as rec:
        assert status(CAI(out), CAI(x)) == (1 if refused else 0)
        if refused:
            with pytest.raises(ncl.CudaLaunchError) as info:
                raising(CAI(out), CAI(x))
    if not refused:
        assert rec.launches[0].params[-1] == q(stride // 4)[0]
        return
    assert rec.launches == []
    assert ("CUDA_ERROR_INVALID_VALUE (1): parameter 'x' (argument 2) has strides that are not "
            "a whole number of its 4-byte items, which numba-cuda-mlir's array parameters "
            "(memrefs, strides counted in items) cannot express") in str(info.value)


@mcuda.jit
def copy1d(out, x):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i]


def test_device_array_views_and_tuples_of_device_arrays():
    @njit
    def f(out, x, y, n):
        tuples[1, 1](out[:1], (np.float32(1.0), np.float32(2.0)), (x[2:n], y[::2]))

    n = int(rng.integers(6, 40))
    out, x, y = (np.zeros(n, np.float32) for _ in range(3))
    launch = record(tuples, f, CAI(out), CAI(x), CAI(y), n)
    assert launch.params == (memref(out[:1]) + [struct.pack("<f", 1.0), struct.pack("<f", 2.0)]
                             + memref(x[2:n]) + memref(y[::2]))


def test_readonly_device_array_compiles_a_readonly_overload():
    ro = np.ones(16, np.float32)
    out = np.zeros(16, np.float32)
    launch = record(scale, launch_scale_arrays, CAI(out), CAI(ro, readonly=True),
                    np.float32(2), 0)
    assert launch.params[5:10] == memref(ro)
    assert (mt.float32[::1], mt.Array(mt.float32, 1, "C", readonly=True), mt.float32) \
        in scale.overloads


@mcuda.jit
def writes(x):
    x[0] = 1


def test_kernel_writing_to_a_readonly_device_array_is_refused():
    @njit
    def f(x):
        writes[1, 1](x)

    with pytest.raises(TypingError) as info:
        f(CAI(np.zeros(4, np.float32), readonly=True))
    first = str(info.value).splitlines()[0]
    assert first.startswith("compiling kernel 'writes' for (x: readonly array(float32, 1d, C))")
    assert "Cannot modify readonly array" in str(info.value)


@mcuda.jit(mt.void(mt.float32[::1], mt.float32[::1]))
def eager_copy(x, out):
    out[0] = x[0]


@njit
def launch_eager_copy(x, out):
    eager_copy[1, 1](x, out)


def test_eager_kernel_takes_the_device_arrays_of_its_signature(fake_driver):
    a = np.zeros(4, np.float32)
    fake_driver.layouts.update(layout_of(eager_copy))
    launch_eager_copy(CAI(a), CAI(a))
    assert fake_driver.launches[0].params == memref(a) + memref(a)


@pytest.mark.parametrize("x, out, refused", [
    (CAI(np.zeros(4)), CAI(np.zeros(4, np.float32)),
     "parameter 'x' (argument 1): got DeviceArray(float64, 1d, C), expected array(float32, 1d, C)"),
    (CAI(np.zeros(4, np.float32)), CAI(np.zeros(8, np.float32)[::2]),
     "parameter 'out' (argument 2): got DeviceArray(float32, 1d, A), expected array(float32, 1d, C)"),
    (CAI(np.zeros(4, np.float32)), CAI(np.zeros(4, np.float32), readonly=True),
     "parameter 'out' (argument 2): got DeviceArray(float32, 1d, C, readonly), "
     "expected array(float32, 1d, C)"),
], ids=["dtype", "layout", "readonly"])
def test_eager_kernel_refuses_device_arrays_it_was_not_compiled_for(x, out, refused):
    with pytest.raises(TypingError) as info:
        launch_eager_copy(x, out)
    assert str(info.value).startswith("kernel 'eager_copy' " + refused)


@pytest.mark.parametrize("make", [CupyLikeStream, ProtocolStream, int],
                         ids=["cupy-like", "__cuda_stream__", "int"])
def test_stream_objects(make):
    a = np.zeros(8, np.float32)
    launch = record(scale, launch_scale_arrays, CAI(a), CAI(a), np.float32(1), make(0x5150))
    assert launch.stream == 0x5150


def test_launch_waits_for_a_device_arrays_producer_stream(fake_driver):
    a = np.zeros(8, np.float32)
    launch_scale_arrays(CAI(a, stream=0x99), CAI(a), np.float32(1), 0x98)
    launch_scale_arrays(CAI(a, stream=0x98), CAI(a), np.float32(1), 0x98)  # same stream
    assert [c[1] for c in fake_driver.calls if c[0] == "cuStreamSynchronize"] == [0x99]
    assert [x.stream for x in fake_driver.launches] == [0x98, 0x98]


def test_cfunc_launches_an_mlir_kernel():
    @numba.cfunc(nt.int32(nt.voidptr, nt.voidptr, nt.int64, nt.float32, nt.voidptr))
    def launcher(o, x, n, a, stream):
        out = numba.carray(o, (n,), np.float32)
        xs = numba.carray(x, (n,), np.float32)
        return scale[(n + 63) // 64, 64, stream].launch_status(out, xs, a)

    n = int(rng.integers(1, 1000))
    with RecordingDriver() as rec:
        rec.layouts.update(layout_of(scale))
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                              ctypes.c_float, ctypes.c_void_p)(launcher.address)
        assert fn(0x1000, 0x2000, n, 0.5, 0x77) == 0
    (launch,) = rec.launches
    assert launch.grid == ((n + 63) // 64, 1, 1) and launch.stream == 0x77
    assert launch.params == q(0x1000, 0x1000, 0, n, 1) + q(0x2000, 0x2000, 0, n, 1) + [
        struct.pack("<f", 0.5)]


@mcuda.jit
def grid_wide(out):
    out[0] = 1


@njit
def launch_grid_wide(o, blocks, cluster):
    out = numba.carray(ncl.as_voidptr(o), (1,), np.int32)
    if cluster:
        grid_wide[blocks, 32, 0, 0, 2](out)
    else:
        grid_wide[blocks, 32](out)


def test_cooperative_kernel_launches_cooperatively(fake_driver, monkeypatch):
    """numba-cuda-mlir marks a kernel calling declare_device(use_cooperative=True)
    code with metadata["use_cooperative"], what its launcher reads: the
    launch is cooperative (cuLaunchCooperativeKernel; with a cluster, the
    cooperative attribute of cuLaunchKernelEx)."""
    kernel = grid_wide.compile(mt.void(mt.int32[::1]))
    monkeypatch.setitem(kernel.metadata, "use_cooperative", True)
    launch_grid_wide(0x1000, 4, False)
    launch_grid_wide(0x1000, 4, True)
    plain, clustered = fake_driver.launches
    assert plain.cooperative and plain.cluster is None
    assert clustered.cooperative and clustered.cluster == (2, 1, 1)


# -- thread-block clusters -------------------------------------------------------

@njit
def launch_clustered(o, x, n, blocks, cluster, stream):
    out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
    xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
    scale[(blocks, 2), 32, stream, 16, cluster](out, xs, np.float32(2))


def test_cluster_item_launches_with_cuLaunchKernelEx():
    c = int(rng.integers(1, 5))
    blocks = c * int(rng.integers(1, 6))
    launch = record(scale, launch_clustered, 0x1000, 0x2000, 64, blocks, (c, 2, 1), 0x33)
    assert launch.cluster == (c, 2, 1) and launch.grid == (blocks, 2, 1)
    assert launch.sharedmem == 16 and launch.stream == 0x33
    assert launch.params == q(0x1000, 0x1000, 0, 64, 1) + q(0x2000, 0x2000, 0, 64, 1) + [
        struct.pack("<f", 2.0)]


def test_cluster_not_dividing_the_grid_is_refused():
    @njit
    def f(o):
        scale[5, 32, 0, 0, 2](numba.carray(ncl.as_voidptr(o), (4,), np.float32),
                              numba.carray(ncl.as_voidptr(o), (4,), np.float32),
                              np.float32(1))

    with pytest.raises(TypingError, match=r"kernel 'scale': griddim must be a multiple of the "
                       r"cluster dimensions; along x the grid has 5 blocks and the cluster 2"):
        f(0x1000)


# -- occupancy -------------------------------------------------------------------

@njit
def mlir_occupancy(o, x, block, smem):
    out = numba.carray(ncl.as_voidptr(o), (64,), np.float32)
    xs = numba.carray(ncl.as_voidptr(x), (64,), np.float32)
    cfg = scale[8, block, 0, smem]
    grid, best = cfg.max_potential_block_size(out, xs, np.float32(1))
    clusters = scale[8, block, 0, smem, 4].max_active_clusters(out, xs, np.float32(1))
    return cfg.max_active_blocks(out, xs, np.float32(1)), grid, best, clusters


def test_occupancy_queries_ask_about_the_mlir_kernel():
    block, smem = 32 * int(rng.integers(1, 33)), 256 * int(rng.integers(0, 100))
    with RecordingDriver() as rec:
        blocks, grid, best, clusters = mlir_occupancy(0x1000, 0x2000, block, smem)
    entry = compat_mlir.kernel_entry_name(scale.overloads[
        (mt.float32[::1], mt.float32[::1], mt.float32)])
    kinds = [(o.kind, o.kernel, o.block_size, o.sharedmem, o.cluster)
             for o in rec.occupancy_queries]
    assert kinds == [("max_potential_block_size", entry, 0, smem, None),
                     ("max_active_clusters", entry, block, smem, (4, 1, 1)),
                     ("max_active_blocks", entry, block, smem, None)]
    assert blocks == rec.occupancy(block, smem)
    assert clusters == rec.occupancy(block, smem) * rec.multiprocessors // 4
    assert (grid, best) == rec.occupancy_queries[0].result


# -- graphs ----------------------------------------------------------------------

@njit
def capture_and_update(out, x, y, stream):
    graphs.begin_capture(stream)
    scale[1, 32, stream](out, x, np.float32(1))
    node = graphs.last_launch(stream)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    exe.launch(stream)
    exe.update_launch(node, scale[3, 64, stream, 128], out[1:], y, np.float32(3))
    exe.launch(stream)


def test_graph_capture_and_update_launch_of_an_mlir_kernel(fake_driver):
    out, x, y = np.zeros(9, np.float32), np.ones(9, np.float32), np.ones(8, np.float32)
    fake_driver.layouts.update(layout_of(scale))
    capture_and_update(CAI(out), CAI(x), CAI(y), 0x51)
    (graph,) = fake_driver.graphs.values()
    (captured,) = graph.launches
    assert captured.params == memref(out) + memref(x) + [struct.pack("<f", 1.0)]
    ((_, node, update),) = fake_driver.node_updates
    assert node == graph.nodes[0] and update.kernel == captured.kernel
    assert update.grid == (3, 1, 1) and update.block == (64, 1, 1) and update.sharedmem == 128
    assert update.params == memref(out[1:]) + memref(y) + [struct.pack("<f", 3.0)]


# -- cache=True ------------------------------------------------------------------

CACHE_MODULE = PREAMBLE + """
import numba
from numba_cuda_launch.compat.cuda_target import gpu_available
import numba_cuda_launch as ncl
from numba_cuda_mlir import cuda as mcuda
if not gpu_available():
    ncl.set_compute_capability((9, 0))

@mcuda.jit
def k(x, a):
    x[0] = a

@numba.njit(cache=True)
def go(x, a):
    return k[1, 1].launch_status(x, a)
"""


@pytest.mark.slow
def test_cache_true_function_launching_an_mlir_kernel_loads_in_a_new_process(tmp_path):
    """The second process loads the function from Numba's cache (no
    numba-cuda-mlir compilation: the kernel has no overload there) and
    launches the cubin embedded in it, with the same parameters."""
    (tmp_path / "cached_mlir_launch.py").write_text(CACHE_MODULE)
    probe = textwrap.dedent("""
        import numpy as np
        import cached_mlir_launch as m
        from numba_cuda_launch.testing import RecordingDriver

        class CAI:  # a device-array producer over host memory
            def __init__(self, a):
                self.__cuda_array_interface__ = dict(
                    shape=a.shape, strides=None, typestr=a.dtype.str,
                    data=(a.ctypes.data, False), version=3, stream=None)

        a = np.zeros(4, np.float32)
        with RecordingDriver() as fake:
            status = m.go(CAI(a), np.float32(2.5))
        (launch,) = fake.launches
        memref = [v.to_bytes(8, "little") for v in (a.ctypes.data,) * 2 + (0, 4, 1)]
        print(status, sum(m.go.stats.cache_hits.values()), len(m.k.overloads),
              launch.params == memref + [np.float32(2.5).tobytes()])
    """)
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env=child_env(), timeout=300, cwd=tmp_path) for _ in range(2)]
    for out in runs:
        assert out.returncode == 0, out.stderr[-3000:]
    assert runs[0].stdout.split() == ["0", "0", "1", "True"]
    assert runs[1].stdout.split() == ["0", "1", "0", "True"]


@pytest.mark.slow
def test_kernel_handle_of_an_mlir_kernel_imported_after_the_architecture_was_set():
    """kernel_handle() compiles a lazy numba-cuda-mlir kernel with no GPU when
    numba_cuda_mlir was imported after set_compute_capability (no launch typed
    it first)."""
    code = PREAMBLE + textwrap.dedent("""
        import numba_cuda_launch as ncl
        from numba_cuda_launch.compat.cuda_target import gpu_available
        from numba.core import types as nt
        if not gpu_available():
            ncl.set_compute_capability((9, 0))
        from numba_cuda_mlir import cuda as mcuda

        @mcuda.jit
        def k(x, n):
            x[0] = n

        h = ncl.kernel_handle(k, (nt.float32[::1], nt.int64))
        print(len(h.params))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env(), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["6"]  # a 1-D memref (5) and n
