// A C++ program calling a TVM-FFI function of a library built by
// numba_cuda_launch.aot (tests/test_tvm_ffi_gpu.py): loads it with
// tvm::ffi::Module::LoadFromFile (no Python), calls "axpy" on DLTensor
// pointers (TVM-FFI type index 7) over cudaMalloc'ed memory on a stream set
// in the TVM-FFI environment, checks the result on the host, then calls it
// with a float64 tensor and prints the error. Prints "ok <max error>" and
// "refused: <message>".
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>  // DLTensor* arguments (TypeTraits<DLTensor*>)
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  namespace ffi = tvm::ffi;
  if (argc < 2) return 2;
  ffi::Module mod = ffi::Module::LoadFromFile(argv[1]);
  ffi::Function axpy = mod->GetFunction("axpy").value();
  const int64_t n = 100000;
  std::vector<float> x(n), y(n), out(n, NAN);
  for (int64_t i = 0; i < n; ++i) { x[i] = 0.001f * i; y[i] = 1.0f - 0.002f * i; }
  float *dx, *dy, *dout;
  cudaMalloc(&dx, n * 4); cudaMalloc(&dy, n * 4); cudaMalloc(&dout, n * 4);
  cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dout, out.data(), n * 4, cudaMemcpyHostToDevice);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  TVMFFIEnvSetStream(kDLCUDA, 0, stream, nullptr);
  int64_t shape[1] = {n};
  DLTensor tx{dx, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor ty{dy, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor tout{dout, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  axpy(&tx, &ty, &tout, 2.5);
  cudaStreamSynchronize(stream);
  cudaMemcpy(out.data(), dout, n * 4, cudaMemcpyDeviceToHost);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(out[i] - (2.5f * x[i] + y[i])));
  std::printf("ok %g\n", worst);
  DLTensor bad{dy, {kDLCUDA, 0}, 1, {kDLFloat, 64, 1}, shape, nullptr, 0};
  try {
    axpy(&tx, &bad, &tout, 2.5);
    std::printf("not refused\n");
  } catch (const ffi::Error& e) {
    std::printf("refused: %s: %s\n", e.kind().c_str(), e.message().c_str());
  }
  return 0;
}
