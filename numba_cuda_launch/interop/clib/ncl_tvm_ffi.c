/* The two libtvm_ffi functions a TVM-FFI function of a library built by
 * numba_cuda_launch.aot calls (docs/tvm-ffi.md, "In a C library").
 *
 * Compiled code calls TVMFFIEnvGetStream and TVMFFIErrorSetRaisedFromCStr by
 * name; here they are hidden forwarders (not exported, so they never take the
 * place of libtvm_ffi's) to the functions of the libtvm_ffi the process has
 * loaded, found on first call: in the global scope (tvm_ffi in Python loads
 * it RTLD_GLOBAL; a C++ program links it), else the already loaded
 * libtvm_ffi.so. The library so needs no libtvm_ffi to load, only to be
 * called through TVM-FFI. Without one the stream is NULL (the default stream)
 * and an error cannot be raised: the function still returns -1.
 */
#ifndef RTLD_DEFAULT
#define RTLD_DEFAULT ((void *)0)
#endif

static void *ncl_tvm_ffi_symbol(const char *name) {
  void *fn = dlsym(RTLD_DEFAULT, name);
  if (fn == NULL) {
    void *lib = dlopen("libtvm_ffi.so", RTLD_NOW | RTLD_NOLOAD);
    if (lib != NULL) fn = dlsym(lib, name);
  }
  return fn;
}

typedef void *(*ncl_get_stream_fn)(int32_t, int32_t);
typedef void (*ncl_set_raised_fn)(const char *, const char *);
static ncl_get_stream_fn ncl_get_stream;
static ncl_set_raised_fn ncl_set_raised;

__attribute__((visibility("hidden"))) void *TVMFFIEnvGetStream(int32_t device_type,
                                                              int32_t device_id) {
  ncl_get_stream_fn fn = __atomic_load_n(&ncl_get_stream, __ATOMIC_ACQUIRE);
  if (fn == NULL) {
    fn = (ncl_get_stream_fn)ncl_tvm_ffi_symbol("TVMFFIEnvGetStream");
    if (fn == NULL) return NULL;
    __atomic_store_n(&ncl_get_stream, fn, __ATOMIC_RELEASE);
  }
  return fn(device_type, device_id);
}

__attribute__((visibility("hidden"))) void TVMFFIErrorSetRaisedFromCStr(const char *kind,
                                                                       const char *message) {
  ncl_set_raised_fn fn = __atomic_load_n(&ncl_set_raised, __ATOMIC_ACQUIRE);
  if (fn == NULL) {
    fn = (ncl_set_raised_fn)ncl_tvm_ffi_symbol("TVMFFIErrorSetRaisedFromCStr");
    if (fn == NULL) return;
    __atomic_store_n(&ncl_set_raised, fn, __ATOMIC_RELEASE);
  }
  fn(kind, message);
}
