/* A C program calling a Numba CUDA kernel through libsaxpy.so (built by
 * examples/clib/build.py): no Python, no Numba. The CUDA driver is opened
 * with dlopen here too, only to allocate and copy memory; the library binds
 * it by itself. Checks y = a*x + y against the same computed on the CPU,
 * and that the kernel wrote nothing past n elements.
 *
 *   cc -O2 -I build examples/clib/main.c -L build -lsaxpy -Wl,-rpath,build -ldl -lm -o build/saxpy
 *   build/saxpy [n]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "saxpy.h"

typedef int (*fn_t)();
static fn_t cu(void *lib, const char *name) {
    fn_t f = (fn_t)dlsym(lib, name);
    if (f == NULL) { fprintf(stderr, "libcuda lacks %s\n", name); exit(2); }
    return f;
}

#define PAD 64 /* elements past n that must stay untouched */

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000003;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (cuda == NULL) { /* nothing to check without a GPU: say so, as the examples do */
        printf("saxpy needs a GPU: no CUDA driver here (%s)\n", dlerror());
        return 0;
    }
    fn_t init = cu(cuda, "cuInit"), device_get = cu(cuda, "cuDeviceGet"),
         retain = cu(cuda, "cuDevicePrimaryCtxRetain"), set_ctx = cu(cuda, "cuCtxSetCurrent"),
         alloc = cu(cuda, "cuMemAlloc_v2"), htod = cu(cuda, "cuMemcpyHtoD_v2"),
         dtoh = cu(cuda, "cuMemcpyDtoH_v2"), release = cu(cuda, "cuMemFree_v2"),
         sync = cu(cuda, "cuCtxSynchronize");
    int dev;
    void *ctx;
    if (init(0) || device_get(&dev, 0) || retain(&ctx, dev) || set_ctx(ctx)) {
        printf("saxpy needs a GPU: the CUDA driver sees no usable device\n");
        return 0;
    }
    size_t bytes = (n + PAD) * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes), *want = malloc(bytes);
    const float a = 2.5f;
    srand(7);
    for (long i = 0; i < n + PAD; i++) {
        x[i] = (float)rand() / RAND_MAX - 0.5f;
        y[i] = i < n ? (float)rand() / RAND_MAX : NAN; /* sentinels past n */
        want[i] = i < n ? a * x[i] + y[i] : NAN;
    }
    unsigned long long dx, dy;
    if (alloc(&dx, bytes) || alloc(&dy, bytes) || htod(dx, x, bytes) || htod(dy, y, bytes))
        return 2;

    int status = saxpy_launch(NULL, (float *)dx, (float *)dy, a, n);
    if (status != 0) {
        fprintf(stderr, "launch failed: %s\n", saxpy_last_error_name());
        return 1;
    }
    if (sync() || dtoh(y, dy, bytes)) return 1;
    double worst = 0;
    long bad = 0;
    for (long i = 0; i < n + PAD; i++) {
        double err = fabs((double)y[i] - want[i]);
        if (i >= n ? !isnan(y[i]) : !(err <= 1e-6 * (1 + fabs(want[i])))) bad++;
        if (i < n && err > worst) worst = err;
    }
    release(dx);
    release(dy);
    printf("saxpy: %ld elements, %ld wrong, max error %.3g (%s)\n", n, bad, worst,
           saxpy_build_info);
    return bad != 0;
}
