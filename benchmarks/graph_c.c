/* C baselines for benchmarks/graphs.py: a chain of launches with
 * cuLaunchKernel, the same chain captured into a CUDA graph and replayed
 * with cuGraphLaunch, and cuLaunchKernelEx with a cluster attribute. Driver
 * entry points are passed in (no CUDA headers or import library needed);
 * the structures are declared here with cuda.h's layout. */
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned,
                         unsigned, unsigned, unsigned, void *, void **,
                         void **);
typedef int (*begin_capture_fn)(void *, int);
typedef int (*end_capture_fn)(void *, void **);
typedef int (*instantiate_fn)(void **, void *, unsigned long long);
typedef int (*graph_launch_fn)(void *, void *);
typedef int (*launch_ex_fn)(const void *, void *, void **, void **);

/* CUlaunchConfig and CUlaunchAttribute (cuda.h, CUDA 12 and 13). */
typedef struct {
    int id;
    char pad[4];
    union {
        unsigned cluster[3];
        int cooperative;
        char bytes[64];
        unsigned long long align;
    } value;
} launch_attribute;

typedef struct {
    unsigned grid[3], block[3], shared_mem;
    void *stream;
    launch_attribute *attrs;
    unsigned num_attrs;
} launch_config;

enum { ATTRIBUTE_CLUSTER_DIMENSION = 4, CAPTURE_MODE_THREAD_LOCAL = 1 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds for `reps` chains of `n` launches (host enqueue time). */
double chain_direct(launch_fn launch, void *kernel, void *stream, void **params,
                    unsigned grid, unsigned block, int64_t n, int64_t reps,
                    int *status) {
    int st = 0;
    double t0 = now();
    for (int64_t r = 0; r < reps; r++)
        for (int64_t i = 0; i < n; i++)
            st |= launch(kernel, grid, 1, 1, block, 1, 1, 0, stream, params, 0);
    *status = st;
    return now() - t0;
}

/* Capture the chain of `n` launches on `stream` and instantiate it. */
int chain_graph_build(begin_capture_fn begin, launch_fn launch,
                      end_capture_fn end, instantiate_fn instantiate,
                      void *kernel, void *stream, void **params, unsigned grid,
                      unsigned block, int64_t n, void **graph, void **exec) {
    int st = begin(stream, CAPTURE_MODE_THREAD_LOCAL);
    if (st) return st;
    for (int64_t i = 0; i < n; i++)
        st |= launch(kernel, grid, 1, 1, block, 1, 1, 0, stream, params, 0);
    int ended = end(stream, graph);
    if (st) return st;
    if (ended) return ended;
    return instantiate(exec, *graph, 0);
}

/* Seconds for `reps` replays of `exec` (host enqueue time). */
double chain_graph_replay(graph_launch_fn graph_launch, void *exec,
                          void *stream, int64_t reps, int *status) {
    int st = 0;
    double t0 = now();
    for (int64_t r = 0; r < reps; r++)
        st |= graph_launch(exec, stream);
    *status = st;
    return now() - t0;
}

/* Seconds for `iters` cuLaunchKernelEx launches with a cluster of
 * `cluster_x` blocks (the config built once, as a C program would). */
double cluster_loop(launch_ex_fn launch_ex, void *kernel, void *stream,
                    void **params, unsigned grid, unsigned block,
                    unsigned cluster_x, int64_t iters, int *status) {
    launch_attribute attr;
    launch_config config;
    memset(&attr, 0, sizeof attr);
    memset(&config, 0, sizeof config);
    attr.id = ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.cluster[0] = cluster_x;
    attr.value.cluster[1] = 1;
    attr.value.cluster[2] = 1;
    config.grid[0] = grid; config.grid[1] = 1; config.grid[2] = 1;
    config.block[0] = block; config.block[1] = 1; config.block[2] = 1;
    config.stream = stream;
    config.attrs = &attr;
    config.num_attrs = 1;
    int st = 0;
    double t0 = now();
    for (int64_t i = 0; i < iters; i++)
        st |= launch_ex(&config, kernel, params, 0);
    *status = st;
    return now() - t0;
}

/* Layout check against the Python side. */
unsigned launch_config_size(void) { return sizeof(launch_config); }
unsigned launch_attribute_size(void) { return sizeof(launch_attribute); }
