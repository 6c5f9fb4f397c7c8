/* C baseline: cuLaunchKernel in a loop, with the driver entry point passed
 * in (so no CUDA headers or import library are needed to build it). */
#include <stdint.h>
#include <time.h>

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned,
                         unsigned, unsigned, unsigned, void *, void **,
                         void **);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds for `iters` back-to-back launches (host enqueue time). */
double bench_launch(launch_fn launch, void *kernel,
                    void *stream, void **params, unsigned grid,
                    unsigned block, int64_t iters, int *status) {
    double t0 = now();
    int st = 0;
    for (int64_t i = 0; i < iters; i++) {
        st |= launch(kernel, grid, 1, 1, block, 1, 1, 0, stream, params, 0);
    }
    *status = st;
    return now() - t0;
}
