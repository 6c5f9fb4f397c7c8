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

import struct
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from numba import cuda, njit
from numba.core import types as nt
from numba.core.errors import TypingError

numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch.compat import numba_cuda_mlir as compat_mlir  # noqa: E402
from numba_cuda_launch.testing import RecordingDriver  # noqa: E402
from support.childenv import PREAMBLE, child_env  # noqa: E402

from numba_cuda_mlir import cuda as mcuda  # noqa: E402
from numba_cuda_mlir import types as mt  # noqa: E402

# Eager kernels compile at decoration, inside numba-cuda-mlir: with no GPU
# the architecture must be set once numba_cuda_mlir is imported.
if not cuda.is_available():
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


def test_numba_cuda_and_numba_cuda_mlir_kernels_in_one_function():
    n = 96
    with RecordingDriver() as rec:
        launch_both(0x1000, 0x2000, n, np.float32(3.0))
    assert len(rec.loads) == 2 and len(rec.launches) == 2
    nc, ml = rec.launches
    assert nc.kernel != ml.kernel
    entry = compat_mlir.kernel_entry_name(next(iter(scale.overloads.values())))
    assert ml.kernel == entry


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
        from numba import cuda
        if not cuda.is_available():
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
