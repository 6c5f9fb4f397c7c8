/* A recording CUDA driver in C for libraries built by numba_cuda_launch.aot
 * (tests/test_aot_cpu.py). Built with -DP(x)=<prefix>_##x and -include of
 * the library's header. It binds itself as the library's driver table,
 * calls the launchers of tests/aot_kernels.py with the arguments given on
 * the command line and prints each launch (kernel, grid, block, shared
 * memory, stream, parameter bytes in hex) and each image load (ELF or not,
 * its first 16 bytes in hex), reading parameter sizes from argv[1]
 * ("8,8,4,8;8,8,1,1": one list per launch). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *sizes_spec;
static int launch_count, launch_status, loads;
static char kernel_names[8][512];

static int r_ok(void) { return 0; }
static int r_unsupported(void) { return 801; }
static int r_ctx_get(void **ctx) { *ctx = (void *)0xC0; return 0; }
static int r_load(void **lib, const void *image, void *a, void *b, unsigned n, void *c,
                  void *d, unsigned m) {
    (void)a; (void)b; (void)n; (void)c; (void)d; (void)m;
    loads++;
    printf("load %s ", memcmp(image, "\177ELF", 4) == 0 ? "elf" : "not-elf");
    for (int i = 0; i < 16; i++) printf("%02x", ((const unsigned char *)image)[i]);
    printf("\n");
    *lib = (void *)(uintptr_t)(0x1000 + loads);
    return 0;
}
static int r_get_kernel(void **kern, void *lib, const char *name) {
    (void)lib;
    int k = loads % 8;
    snprintf(kernel_names[k], sizeof kernel_names[k], "%s", name);
    *kern = (void *)(uintptr_t)(0x100000 + k);
    return 0;
}
static int r_error_name(int status, const char **out) {
    switch (status) {
    case 0: *out = "CUDA_SUCCESS"; return 0;
    case 1: *out = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 719: *out = "CUDA_ERROR_LAUNCH_FAILED"; return 0;
    default: *out = NULL; return 1;
    }
}
static int r_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shmem, void *stream, void **params, void **extra) {
    (void)extra;
    const char *spec = sizes_spec;
    for (int skip = launch_count; skip > 0 && spec; skip--) {
        spec = strchr(spec, ';');
        if (spec) spec++;
    }
    printf("launch %s %u %u %u %u %u %u %u %lu", kernel_names[(uintptr_t)f - 0x100000],
           gx, gy, gz, bx, by, bz, shmem, (unsigned long)(uintptr_t)stream);
    for (int i = 0; spec && *spec && *spec != ';'; i++) {
        char *end;
        long size = strtol(spec, &end, 10);
        printf(i ? "," : " ");
        for (long b = 0; b < size; b++)
            printf("%02x", ((unsigned char *)params[i])[b]);
        spec = *end == ',' ? end + 1 : end;
    }
    printf("\n");
    launch_count++;
    return launch_status;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    sizes_spec = argv[1];
    unsigned n = P(driver_entry_count)();
    void **table = calloc(n, sizeof *table);
    for (unsigned i = 0; i < n; i++) {
        const char *name = P(driver_entry_name)(i);
        table[i] = (void *)r_unsupported;
        if (!strcmp(name, "cuInit") || !strcmp(name, "cuCtxSetCurrent") ||
            !strcmp(name, "cuLibraryUnload"))
            table[i] = (void *)r_ok;
        else if (!strcmp(name, "cuCtxGetCurrent")) table[i] = (void *)r_ctx_get;
        else if (!strcmp(name, "cuLibraryLoadData")) table[i] = (void *)r_load;
        else if (!strcmp(name, "cuLibraryGetKernel")) table[i] = (void *)r_get_kernel;
        else if (!strcmp(name, "cuGetErrorName")) table[i] = (void *)r_error_name;
        else if (!strcmp(name, "cuLaunchKernel")) table[i] = (void *)r_launch;
    }
    int short_bind = P(bind_driver)(table, n - 1);
    printf("bind-short %d %s\n", short_bind, P(last_error_name)());
    printf("bind %d\n", P(bind_driver)(table, n));
    printf("abi %d\n", P(abi_version)());
    int s1 = saxpy_launch((void *)0x5000, (float *)0x7000, (float *)0x8000, 2.5f, 1000);
    int s2 = tile_launch((void *)0x6000, 3, 5, true, 1.25, -7, (int16_t *)0x9000, 96);
    int s3 = saxpy_launch((void *)0, (float *)0x7100, (float *)0x8100, -1.0f, 1);
    printf("status %d %d %d\n", s1, s2, s3);
    launch_status = 719;
    int s4 = saxpy_launch((void *)0x5000, (float *)0x7000, (float *)0x8000, 1.0f, 10);
    const char *last = P(last_error_name)();
    printf("failed %d %s %s\n", s4, last, P(error_name)(1));
    return 0;
}
