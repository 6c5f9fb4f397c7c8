/* Two threads, one per GPU, calling the launchers of a library built by
 * numba_cuda_launch.aot (tests/test_devices_gpu.py): each makes its device's
 * primary context current, creates a stream, and launches saxpy_launch
 * ROUNDS times (y = a*x + y) and tile_launch once with 100 KiB of dynamic
 * shared memory (data[0] = (int16_t)(scale * small)) on it, both threads
 * starting at once. Checks y against the same computed on the CPU (and that
 * nothing past n was written) and data[0]; prints one line per device:
 *
 *   device <d>: <n> elements, <wrong> wrong, tile <data[0]> <data[1]>, status <s>
 *
 * Built with -I<dir of the header> -include <header> -pthread -ldl -lm. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define DEVICES 2
#define ROUNDS 10
#define PAD 64 /* elements past n that must stay untouched */

typedef int (*fn_t)();
static fn_t init, device_get, retain, set_ctx, stream_create, alloc, htod, dtoh, release,
    stream_sync, stream_destroy;
static pthread_barrier_t start;
static long n;
static char lines[DEVICES][256];
static int failed;

static fn_t cu(void *lib, const char *name) {
    fn_t f = (fn_t)dlsym(lib, name);
    if (f == NULL) { fprintf(stderr, "libcuda lacks %s\n", name); exit(2); }
    return f;
}

static void *run(void *arg) {
    int d = (int)(long)arg, dev, status = 0;
    void *ctx, *stream;
    const float a = 0.5f + d;
    size_t bytes = (n + PAD) * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes), *want = malloc(bytes);
    short tile[2] = {0x7FFF, 0x7FFF};
    unsigned long long dx, dy, dt;
    unsigned seed = 7u + d;
    for (long i = 0; i < n + PAD; i++) {
        x[i] = (float)rand_r(&seed) / RAND_MAX - 0.5f;
        y[i] = i < n ? (float)rand_r(&seed) / RAND_MAX : NAN; /* sentinels past n */
        want[i] = y[i];
    }
    int setup = device_get(&dev, d) || retain(&ctx, dev) || set_ctx(ctx) ||
                stream_create(&stream, 0) || alloc(&dx, bytes) || alloc(&dy, bytes) ||
                alloc(&dt, sizeof tile) || htod(dx, x, bytes) || htod(dy, y, bytes) ||
                htod(dt, tile, sizeof tile);
    pthread_barrier_wait(&start);
    if (setup) {
        snprintf(lines[d], sizeof lines[d], "device %d: setup failed", d);
        failed = 1;
        return NULL;
    }
    for (int r = 0; r < ROUNDS && status == 0; r++)
        status = saxpy_launch(stream, (float *)dx, (float *)dy, a, n);
    if (status == 0)
        status = tile_launch(stream, 1, 1, true, 1.25, -7, (short *)dt, 100 * 1024);
    if (stream_sync(stream) || dtoh(y, dy, bytes) || dtoh(tile, dt, sizeof tile)) status = -1;
    for (int r = 0; r < ROUNDS; r++)
        for (long i = 0; i < n; i++) want[i] = a * x[i] + want[i];
    long bad = 0;
    for (long i = 0; i < n + PAD; i++) {
        double err = fabs((double)y[i] - want[i]);
        if (i >= n ? !isnan(y[i]) : !(err <= 1e-5 * (1 + fabs(want[i])))) bad++;
    }
    snprintf(lines[d], sizeof lines[d], "device %d: %ld elements, %ld wrong, tile %d %d, status %d",
             d, n, bad, tile[0], tile[1], status);
    release(dx), release(dy), release(dt), stream_destroy(stream);
    free(x), free(y), free(want);
    return NULL;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 100003;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL) { fprintf(stderr, "no CUDA driver: %s\n", dlerror()); return 2; }
    init = cu(lib, "cuInit"), device_get = cu(lib, "cuDeviceGet");
    retain = cu(lib, "cuDevicePrimaryCtxRetain"), set_ctx = cu(lib, "cuCtxSetCurrent");
    stream_create = cu(lib, "cuStreamCreate"), alloc = cu(lib, "cuMemAlloc_v2");
    htod = cu(lib, "cuMemcpyHtoD_v2"), dtoh = cu(lib, "cuMemcpyDtoH_v2");
    release = cu(lib, "cuMemFree_v2"), stream_sync = cu(lib, "cuStreamSynchronize");
    stream_destroy = cu(lib, "cuStreamDestroy_v2");
    if (init(0)) return 2;
    pthread_t t[DEVICES];
    pthread_barrier_init(&start, NULL, DEVICES);
    for (long d = 0; d < DEVICES; d++)
        pthread_create(&t[d], NULL, run, (void *)d);
    for (int d = 0; d < DEVICES; d++)
        pthread_join(t[d], NULL);
    for (int d = 0; d < DEVICES; d++)
        printf("%s\n", lines[d]);
    return failed;
}
