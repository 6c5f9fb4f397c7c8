/* The C runtime of a library built by numba_cuda_launch.aot (docs/aot.md).
 *
 * Compiled launch code calls the CUDA driver through one table of function
 * pointers (numba_cuda_launch_driver_table, entry points in the order of
 * numba_cuda_launch.cudadrv.driver.ENTRY_POINTS) and reads one int32 flag
 * (numba_cuda_launch_check_pointers). In Python both live in the package;
 * here they are defined (with the table of graphs' devices the graph launch
 * code keeps) and the table is bound on first use from
 * libcuda.so.1, opened with dlopen, so the library needs only libc and libdl.
 *
 * The generated file that includes this one defines NCL_PREFIX (the prefix
 * of the exported helper functions), NCL_ENTRY_COUNT, ncl_entry_names[] and
 * ncl_entry_optional[] (entry points a driver may lack), and NCL_ABI.
 */
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NCL_CAT2(a, b) a##_##b
#define NCL_CAT(a, b) NCL_CAT2(a, b)
#define NCL_API(name) NCL_CAT(NCL_PREFIX, name)

#define NCL_CUDA_ERROR_INVALID_VALUE 1
#define NCL_CUDA_ERROR_NO_DEVICE 100
#define NCL_CUDA_ERROR_NOT_FOUND 500
/* The table's entry points have the ABI their names had in CUDA 12.0 (the
 * Python side binds the same symbols by name), so cuGetProcAddress is asked
 * for that version, with the legacy default stream semantics. */
#define NCL_CUDA_VERSION 12000
#define NCL_LEGACY_STREAM 1

void *numba_cuda_launch_driver_table[NCL_ENTRY_COUNT];
int32_t numba_cuda_launch_check_pointers;
/* The devices of graphs with conditional nodes, whose replays on a stream of
 * another device are refused (numba_cuda_launch/cudadrv/graphdevices.py). */
struct { uint64_t handle; int64_t device; }
    numba_cuda_launch_graph_devices[NCL_GRAPH_DEVICE_SLOTS];
int32_t numba_cuda_launch_graph_devices_used;

typedef int (*ncl_get_proc_v2)(const char *, void **, int, uint64_t, int *);
typedef int (*ncl_get_proc_v1)(const char *, void **, int, uint64_t);

enum { NCL_UNBOUND, NCL_BINDING, NCL_BOUND };
static int ncl_state = NCL_UNBOUND;
static char ncl_problem[256];
/* initial-exec: no __tls_get_addr (ld.so) reference; the slot is 4 bytes. */
static __thread int ncl_last_status __attribute__((tls_model("initial-exec")));

/* Stand-ins when the driver cannot be bound: every call fails as with no
 * device, and entry points a driver may lack report CUDA_ERROR_NOT_FOUND
 * (the C calling convention lets a function taking none ignore arguments). */
static int ncl_no_device(void) { return NCL_CUDA_ERROR_NO_DEVICE; }
static int ncl_not_found(void) { return NCL_CUDA_ERROR_NOT_FOUND; }

static void ncl_note_problem(const char *what, const char *detail) {
    size_t n = strlen(what);
    if (n >= sizeof ncl_problem) n = sizeof ncl_problem - 1;
    memcpy(ncl_problem, what, n);
    if (detail != NULL) {
        size_t m = strlen(detail);
        if (m > sizeof ncl_problem - 1 - n) m = sizeof ncl_problem - 1 - n;
        memcpy(ncl_problem + n, detail, m);
        n += m;
    }
    ncl_problem[n] = '\0';
}

/* The address of entry point *name*: cuGetProcAddress for plain names,
 * dlsym for versioned ones (a _vN suffix names one ABI; cuGetProcAddress
 * takes base names only) and as a fallback. */
static void *ncl_lookup(void *lib, ncl_get_proc_v2 get2, ncl_get_proc_v1 get1,
                        const char *name) {
    void *fn = NULL;
    if (strstr(name, "_v") == NULL) {
        int found = 0;
        if (get2 != NULL && get2(name, &fn, NCL_CUDA_VERSION, NCL_LEGACY_STREAM, &found) != 0)
            fn = NULL;
        else if (get2 == NULL && get1 != NULL &&
                 get1(name, &fn, NCL_CUDA_VERSION, NCL_LEGACY_STREAM) != 0)
            fn = NULL;
    }
    return fn != NULL ? fn : dlsym(lib, name);
}

static void ncl_fill(void *stub) {
    for (unsigned i = 0; i < NCL_ENTRY_COUNT; i++)
        numba_cuda_launch_driver_table[i] = stub;
}

static void ncl_bind_libcuda(void) {
    const char *env = getenv("NUMBA_CUDA_LAUNCH_CHECK_POINTERS");
    numba_cuda_launch_check_pointers = env != NULL && env[0] != '\0' && strcmp(env, "0") != 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        ncl_note_problem("the CUDA driver (libcuda.so.1) could not be loaded: ", dlerror());
        ncl_fill((void *)ncl_no_device);
        return;
    }
    ncl_get_proc_v2 get2 = (ncl_get_proc_v2)dlsym(lib, "cuGetProcAddress_v2");
    ncl_get_proc_v1 get1 = (ncl_get_proc_v1)dlsym(lib, "cuGetProcAddress");
    for (unsigned i = 0; i < NCL_ENTRY_COUNT; i++) {
        void *fn = ncl_lookup(lib, get2, get1, ncl_entry_names[i]);
        if (fn == NULL && ncl_entry_optional[i])
            fn = (void *)ncl_not_found;
        if (fn == NULL) {
            ncl_note_problem("the CUDA driver lacks entry point ", ncl_entry_names[i]);
            ncl_fill((void *)ncl_no_device);
            return;
        }
        numba_cuda_launch_driver_table[i] = fn;
    }
}

/* Bind the table once; threads racing on the first call wait for the one
 * that binds (C11-style atomics: no libpthread needed). */
static void ncl_bind_once(void) {
    int expected = NCL_UNBOUND;
    if (__atomic_compare_exchange_n(&ncl_state, &expected, NCL_BINDING, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        ncl_bind_libcuda();
        __atomic_store_n(&ncl_state, NCL_BOUND, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&ncl_state, __ATOMIC_ACQUIRE) != NCL_BOUND)
        sched_yield();
}

static inline void ncl_ensure_bound(void) {
    if (__builtin_expect(__atomic_load_n(&ncl_state, __ATOMIC_ACQUIRE) != NCL_BOUND, 0))
        ncl_bind_once();
}

static inline int ncl_note(int status) {
    if (__builtin_expect(status != 0, 0))
        ncl_last_status = status;
    return status;
}

int NCL_API(abi_version)(void) { return NCL_ABI; }

unsigned NCL_API(driver_entry_count)(void) { return NCL_ENTRY_COUNT; }

const char *NCL_API(driver_entry_name)(unsigned i) {
    return i < NCL_ENTRY_COUNT ? ncl_entry_names[i] : NULL;
}

int NCL_API(bind_driver)(void *const *functions, unsigned count) {
    if (functions == NULL || count != NCL_ENTRY_COUNT)
        return ncl_note(NCL_CUDA_ERROR_INVALID_VALUE);
    for (unsigned i = 0; i < count; i++)
        if (functions[i] == NULL)
            return ncl_note(NCL_CUDA_ERROR_INVALID_VALUE);
    ncl_bind_once(); /* never overwritten later by a racing first bind */
    memcpy(numba_cuda_launch_driver_table, functions, sizeof numba_cuda_launch_driver_table);
    ncl_problem[0] = '\0';
    return 0;
}

const char *NCL_API(driver_problem)(void) {
    ncl_ensure_bound();
    return ncl_problem[0] ? ncl_problem : NULL;
}

void NCL_API(check_pointers)(int enabled) {
    ncl_ensure_bound();
    numba_cuda_launch_check_pointers = enabled != 0;
}

const char *NCL_API(error_name)(int status) {
    static const struct { int code; const char *name; } known[] = {
        {0, "CUDA_SUCCESS"}, {NCL_CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
        {NCL_CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
        {NCL_CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"}};
    ncl_ensure_bound();
    const char *name = NULL;
    int (*get_name)(int, const char **) =
        (int (*)(int, const char **))numba_cuda_launch_driver_table[NCL_CU_GET_ERROR_NAME];
    if (get_name(status, &name) == 0 && name != NULL)
        return name;
    for (unsigned i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].code == status)
            return known[i].name;
    return "CUDA_ERROR_UNKNOWN";
}

const char *NCL_API(last_error_name)(void) {
    /* The last failure returned on this thread; later successes keep it. */
    return ncl_last_status ? NCL_API(error_name)(ncl_last_status) : NULL;
}
