/* Helpers of benchmarks/tvm_ffi_calls_cpu.py: a cuLaunchKernel that counts
 * launches and returns CUDA_SUCCESS (put in the driver table, so that a
 * call's cost is its function body's, not a driver's), a stub for the other
 * entry points, and a loop calling a
 * TVM-FFI function from C (no Python between calls). No CUDA or TVM-FFI
 * headers: the two ABIs are written out here. */
#include <stdint.h>
#include <time.h>

static int64_t launches;

int stub_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                unsigned by, unsigned bz, unsigned shmem, void *stream,
                void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz;
    (void)shmem; (void)stream; (void)params; (void)extra;
    launches++;
    return 0;
}

int64_t stub_launches(void) { return launches; }

/* cuCtxGetDevice: device 0 (the tensors' claimed device), so that the
 * function's check that it launches on the tensors' device passes; counted
 * (each call of ours asks it once; the C++ function does not check). */
static int64_t device_queries;

int stub_ctx_get_device(int *device) {
    *device = 0;
    device_queries++;
    return 0;
}

int64_t stub_device_queries(void) { return device_queries; }

/* Every other driver entry point while timing: a call is counted and fails
 * (CUDA_ERROR_NOT_SUPPORTED), so a body that asks the driver for more than
 * the launch is seen. The C calling convention lets it ignore arguments. */
static int64_t others;

int stub_other(void) {
    others++;
    return 801;
}

int64_t stub_others(void) { return others; }

typedef struct { int32_t type_index; int32_t pad; int64_t value; } TVMFFIAny;
typedef int (*tvm_ffi_fn)(void *, const TVMFFIAny *, int32_t, TVMFFIAny *);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds for `iters` calls of `fn` with `args`; *failed: the calls that
 * did not return 0. */
double bench_calls(tvm_ffi_fn fn, const TVMFFIAny *args, int32_t num_args,
                   int64_t iters, int64_t *failed) {
    TVMFFIAny result = {0, 0, 0};
    int64_t bad = 0;
    double t0 = now();
    for (int64_t i = 0; i < iters; i++) {
        bad += fn(0, args, num_args, &result) != 0;
    }
    *failed = bad;
    return now() - t0;
}
