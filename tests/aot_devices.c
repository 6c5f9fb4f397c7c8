/* Two threads, one per device, calling the launchers of a library built by
 * numba_cuda_launch.aot (tests/test_devices_cpu.py) against a recording
 * driver of two devices written here: each thread makes its device's
 * primary context current (as a C caller does with cuCtxSetCurrent) and
 * launches saxpy_launch and tile_launch (100 KiB of dynamic shared memory)
 * on a stream of its device ("own"), or of the other device ("cross"),
 * LAUNCHES times each, all threads starting at once. Prints each launch
 * ("launch <thread> <kernel> <device of the launch's stream> <current
 * device>"), each kernel attribute set ("attr <kernel> <attribute> <value>
 * <device>"), the first use of a kernel in a context ("context <device>
 * <kernel>"), the library loads and unloads, and every status. A launch
 * runs in its stream's context, as the driver launches a CUkernel; more
 * dynamic shared memory than the kernel's limit on that device is refused
 * (CUDA_ERROR_INVALID_VALUE), as the driver refuses it. "current" as the
 * second argument plays a cuStreamGetCtx answering the current context
 * (the guard: a launch's device taken from the thread, not the stream), the
 * threads then running one after the other.
 *
 *   aot_devices own|cross stream|current
 *
 * Built with -DP(x)=<prefix>_##x, -include of the library's header and
 * -pthread. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVICES 2
#define LAUNCHES 50
#define PRIMARY(d) ((void *)(uintptr_t)(0xC0 + (d)))
#define STREAM(d) ((void *)(uintptr_t)(0x5000 + 0x100 * (d))) /* a stream of device d */
#define OPTIN (227 * 1024)
#define DEFAULT_LIMIT (48 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;
static __thread void *current;
static __thread int thread_index = -1;
static int cross, ctx_of_thread;
static int loads, unloads, kernels;
static char names[16][256];
static int limit[16][DEVICES];  /* kernel index, device -> max dynamic shared memory */
static int used[16][DEVICES];   /* kernel index, device -> used in that context */
static int statuses[DEVICES][2 * LAUNCHES];

static int device_of_ctx(void *ctx) { return (int)((uintptr_t)ctx - 0xC0); }
static int device_of_stream(void *s) {
    return s == NULL ? device_of_ctx(current) : (int)(((uintptr_t)s - 0x5000) / 0x100);
}
static int kernel_index(void *k) { return (int)((uintptr_t)k - 0x100000); }

static int r_ok(void) { return 0; }
static int r_unsupported(void) { return 801; }
static int r_ctx_get(void **ctx) { *ctx = current; return 0; }
static int r_ctx_set(void *ctx) { current = ctx; return 0; }
static int r_device_get(int *dev, int ordinal) { *dev = ordinal; return 0; }
static int r_retain(void **ctx, int dev) { *ctx = PRIMARY(dev); return 0; }
static int r_ctx_device(int *dev) {
    if (current == NULL) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    *dev = device_of_ctx(current);
    return 0;
}
static int r_stream_ctx(void *stream, void **ctx) {
    if (current == NULL && (stream == NULL || ctx_of_thread)) return 201;
    *ctx = ctx_of_thread ? current : PRIMARY(device_of_stream(stream));
    return 0;
}
static int r_device_count(int *n) { *n = DEVICES; return 0; }
static int r_load(void **lib, const void *image, void *a, void *b, unsigned n, void *c,
                  void *d, unsigned m) {
    (void)image; (void)a; (void)b; (void)n; (void)c; (void)d; (void)m;
    pthread_mutex_lock(&lock);
    *lib = (void *)(uintptr_t)(0x1000 + ++loads);
    pthread_mutex_unlock(&lock);
    return 0;
}
static int r_unload(void *lib) {
    (void)lib;
    pthread_mutex_lock(&lock);
    unloads++;
    pthread_mutex_unlock(&lock);
    return 0;
}
static int r_get_kernel(void **kern, void *lib, const char *name) {
    (void)lib;
    pthread_mutex_lock(&lock);
    int k = 0;
    while (k < kernels && strcmp(names[k], name) != 0) k++;
    if (k == kernels) {
        snprintf(names[k], sizeof names[k], "%s", name);
        for (int d = 0; d < DEVICES; d++) limit[k][d] = DEFAULT_LIMIT;
        kernels++;
    }
    pthread_mutex_unlock(&lock);
    *kern = (void *)(uintptr_t)(0x100000 + k);
    return 0;
}
static int r_kernel_get_attribute(int *out, int attr, void *kern, int dev) {
    if (attr == 8) { *out = limit[kernel_index(kern)][dev]; return 0; } /* max dynamic */
    if (attr == 1) { *out = 0; return 0; }                              /* static */
    return 1;
}
static int r_kernel_set_attribute(int attr, int value, void *kern, int dev) {
    if (attr != 8 || dev < 0 || dev >= DEVICES || value > OPTIN) return 1;
    pthread_mutex_lock(&lock);
    limit[kernel_index(kern)][dev] = value;
    printf("attr %s %d %d %d\n", names[kernel_index(kern)], attr, value, dev);
    pthread_mutex_unlock(&lock);
    return 0;
}
static int r_device_attribute(int *out, int attr, int dev) {
    if (dev < 0 || dev >= DEVICES) return 1;
    if (attr == 97) { *out = OPTIN; return 0; }
    if (attr == 8) { *out = DEFAULT_LIMIT; return 0; }
    return 1;
}
static int r_error_name(int status, const char **out) {
    *out = status == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR";
    return 0;
}
static int r_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shmem, void *stream, void **params, void **extra) {
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)params; (void)extra;
    if (current == NULL) return 201;
    int k = kernel_index(f), dev = device_of_stream(stream);
    if ((int)shmem > limit[k][dev]) return 1; /* CUDA_ERROR_INVALID_VALUE */
    pthread_mutex_lock(&lock);
    if (!used[k][dev]) {
        used[k][dev] = 1;
        printf("context %d %s\n", dev, names[k]);
    }
    printf("launch %d %s %d %d\n", thread_index, names[k], dev, device_of_ctx(current));
    pthread_mutex_unlock(&lock);
    return 0;
}

static void *run(void *arg) {
    int d = (int)(long)arg;
    void *stream = STREAM(cross ? DEVICES - 1 - d : d);
    thread_index = d;
    r_ctx_set(PRIMARY(d)); /* the C caller's cuCtxSetCurrent */
    pthread_barrier_wait(&start);
    for (int i = 0; i < LAUNCHES; i++) {
        statuses[d][2 * i] = saxpy_launch(stream, (float *)0x7000, (float *)0x8000, 2.5f, 1000);
        statuses[d][2 * i + 1] = tile_launch(stream, 3, 5, true, 1.25, -7, (int16_t *)0x9000,
                                             100 * 1024);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    cross = strcmp(argv[1], "cross") == 0;
    ctx_of_thread = strcmp(argv[2], "current") == 0;
    unsigned n = P(driver_entry_count)();
    void **table = calloc(n, sizeof *table);
    static const struct { const char *name; void *fn; } fake[] = {
        {"cuInit", (void *)r_ok}, {"cuLibraryUnload", (void *)r_unload},
        {"cuCtxGetCurrent", (void *)r_ctx_get}, {"cuCtxSetCurrent", (void *)r_ctx_set},
        {"cuDeviceGet", (void *)r_device_get}, {"cuDevicePrimaryCtxRetain", (void *)r_retain},
        {"cuCtxGetDevice", (void *)r_ctx_device}, {"cuStreamGetCtx", (void *)r_stream_ctx},
        {"cuDeviceGetCount", (void *)r_device_count},
        {"cuLibraryLoadData", (void *)r_load}, {"cuLibraryGetKernel", (void *)r_get_kernel},
        {"cuKernelGetAttribute", (void *)r_kernel_get_attribute},
        {"cuKernelSetAttribute", (void *)r_kernel_set_attribute},
        {"cuDeviceGetAttribute", (void *)r_device_attribute},
        {"cuGetErrorName", (void *)r_error_name}, {"cuLaunchKernel", (void *)r_launch},
    };
    for (unsigned i = 0; i < n; i++) {
        table[i] = (void *)r_unsupported;
        for (unsigned j = 0; j < sizeof fake / sizeof fake[0]; j++)
            if (!strcmp(P(driver_entry_name)(i), fake[j].name)) table[i] = fake[j].fn;
    }
    if (P(bind_driver)(table, n) != 0) return 2;
    pthread_t t[DEVICES];
    /* the guard's run is one thread after the other: its outcome
     * depends on which device's limit was raised first */
    pthread_barrier_init(&start, NULL, ctx_of_thread ? 1 : DEVICES);
    for (long d = 0; d < DEVICES; d++) {
        pthread_create(&t[d], NULL, run, (void *)d);
        if (ctx_of_thread) pthread_join(t[d], NULL);
    }
    for (int d = 0; d < DEVICES && !ctx_of_thread; d++)
        pthread_join(t[d], NULL);
    for (int d = 0; d < DEVICES; d++) {
        printf("statuses %d", d);
        for (int i = 0; i < 2 * LAUNCHES; i++) printf(" %d", statuses[d][i]);
        printf("\n");
    }
    printf("loads %d unloads %d\n", loads, unloads);
    return 0;
}
