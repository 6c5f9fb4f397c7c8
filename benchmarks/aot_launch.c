/* Launch cost of a C library built by numba_cuda_launch.aot against a C
 * cuLaunchKernel loop of the same kernel image, in one C process with no
 * Python (run by benchmarks/aot_launch.py). Batches of back-to-back
 * launches on one stream, the stream idle before each; raw and library
 * batches interleaved; medians of host microseconds per launch.
 *
 *   aot_launch CUBIN ENTRY_NAME [batches]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "saxpy.h"

#define BATCH 256
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);
typedef int (*fn_t)();

static fn_t cu(void *lib, const char *name) {
    fn_t f = (fn_t)dlsym(lib, name);
    if (f == NULL) { fprintf(stderr, "libcuda lacks %s\n", name); exit(2); }
    return f;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int batches = argc > 3 ? atoi(argv[3]) : 200;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (cuda == NULL) { fprintf(stderr, "no CUDA driver\n"); return 2; }
    fn_t init = cu(cuda, "cuInit"), device_get = cu(cuda, "cuDeviceGet"),
         retain = cu(cuda, "cuDevicePrimaryCtxRetain"), set_ctx = cu(cuda, "cuCtxSetCurrent"),
         alloc = cu(cuda, "cuMemAlloc_v2"), stream_create = cu(cuda, "cuStreamCreate"),
         stream_sync = cu(cuda, "cuStreamSynchronize"),
         load = cu(cuda, "cuLibraryLoadData"), get_kernel = cu(cuda, "cuLibraryGetKernel");
    launch_fn launch = (launch_fn)cu(cuda, "cuLaunchKernel");
    int dev;
    void *ctx, *stream, *library, *kernel;
    if (init(0) || device_get(&dev, 0) || retain(&ctx, dev) || set_ctx(ctx) ||
        stream_create(&stream, 0))
        return 2;
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) return 2;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *image = malloc(size);
    if (fread(image, 1, size, f) != (size_t)size) return 2;
    fclose(f);
    if (load(&library, image, NULL, NULL, 0, NULL, NULL, 0) ||
        get_kernel(&kernel, library, argv[2]))
        return 2;

    long long n = 1 << 12;
    unsigned long long dx, dy;
    if (alloc(&dx, n * 4) || alloc(&dy, n * 4)) return 2;
    float a = 1.0f;
    void *params[] = {&dx, &dy, &a, &n};
    unsigned grid = (unsigned)((n + 255) / 256);
    double *raw = malloc(batches * sizeof(double)), *lib = malloc(batches * sizeof(double));
    int status = 0;
    for (int b = -1; b < batches; b++) { /* batch -1: warm-up (first load) */
        stream_sync(stream);
        double t0 = now();
        for (int i = 0; i < BATCH; i++)
            status |= launch(kernel, grid, 1, 1, 256, 1, 1, 0, stream, params, NULL);
        double t1 = now();
        stream_sync(stream);
        double t2 = now();
        for (int i = 0; i < BATCH; i++)
            status |= saxpy_launch(stream, (float *)dx, (float *)dy, a, n);
        double t3 = now();
        if (b >= 0) {
            raw[b] = (t1 - t0) / BATCH * 1e6;
            lib[b] = (t3 - t2) / BATCH * 1e6;
        }
    }
    stream_sync(stream);
    if (status != 0) { fprintf(stderr, "a launch failed\n"); return 1; }
    qsort(raw, batches, sizeof(double), cmp);
    qsort(lib, batches, sizeof(double), cmp);
    double r = raw[batches / 2], l = lib[batches / 2];
    printf("{\"c_cuLaunchKernel_us\": %.3f, \"library_us\": %.3f, \"ratio\": %.3f, "
           "\"batches\": %d, \"batch\": %d}\n", r, l, l / r, batches, BATCH);
    return 0;
}
