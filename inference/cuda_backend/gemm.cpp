// cuBLASLt calls behind gemm.h. Compiled by the host compiler against the
// CUDA toolkit's cublasLt.h (or the CPU emulator's, which implements exactly
// the calls made here, with their layouts, transposes and epilogue).
//
// The library is loaded when the first GEMM context is made, not when the
// program starts: it is over half a gigabyte of GPU code, and a process that
// runs on the CPU (or under a limit on address space) must not map it.
#include "inference/cuda_backend/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <string>
#include <utility>

namespace cubeforge::cuda {
namespace {

#define CUBEFORGE_CUBLASLT_FUNCTIONS(X)                                                                   \
  X(cublasLtGetStatusString) X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)            \
  X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)     \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

// The entry points this file calls, resolved once.
struct CublasLt {
#define CUBEFORGE_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  CUBEFORGE_CUBLASLT_FUNCTIONS(CUBEFORGE_CUBLASLT_MEMBER)
#undef CUBEFORGE_CUBLASLT_MEMBER
};

Result<CublasLt> load_cublaslt() {
  CublasLt api;
#if defined(CUBEFORGE_CUDA_EMULATED)
#define CUBEFORGE_CUBLASLT_BIND(name) api.name = &::name;
  CUBEFORGE_CUBLASLT_FUNCTIONS(CUBEFORGE_CUBLASLT_BIND)
#undef CUBEFORGE_CUBLASLT_BIND
#else
  const std::string library = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    return make_error(ErrorCode::kUnsupported, "cannot load cuBLASLt (" + library + "): " +
                                                   std::string(why ? why : "unknown reason") +
                                                   "; install the CUDA " + std::to_string(CUBLAS_VER_MAJOR) +
                                                   " libraries, or run on the CPU");
  }
#define CUBEFORGE_CUBLASLT_BIND(name)                                                               \
  api.name = reinterpret_cast<decltype(api.name)>(::dlsym(handle, #name));                          \
  if (!api.name) return make_error(ErrorCode::kUnsupported, library + " has no " #name "; it is too old");
  CUBEFORGE_CUBLASLT_FUNCTIONS(CUBEFORGE_CUBLASLT_BIND)
#undef CUBEFORGE_CUBLASLT_BIND
#endif
  return api;
}

// The loaded library; kept for the life of the process once loaded.
Result<const CublasLt*> cublaslt() {
  static const Result<CublasLt> loaded = load_cublaslt();
  if (!loaded.ok()) return make_error(loaded.error().code, loaded.error().message);
  return &*loaded;
}

// Only reached once a context exists, so the library is loaded.
const CublasLt& api() { return **cublaslt(); }

Status lt_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  return make_error(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
                    std::string("cuBLASLt ") + what + ": " + api().cublasLtGetStatusString(status));
}

// Owners of the descriptors one call creates.
struct MatmulDescriptors {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~MatmulDescriptors() {
    if (preference) api().cublasLtMatmulPreferenceDestroy(preference);
    if (d) api().cublasLtMatrixLayoutDestroy(d);
    if (b) api().cublasLtMatrixLayoutDestroy(b);
    if (a) api().cublasLtMatrixLayoutDestroy(a);
    if (operation) api().cublasLtMatmulDescDestroy(operation);
  }
};

cublasLtHandle_t lt(cublasLtContext* handle) { return reinterpret_cast<cublasLtHandle_t>(handle); }

}  // namespace

Status load_gemm_library() { return cublaslt().ok() ? ok_status() : cublaslt().take_error(); }

Result<GemmContext> GemmContext::create(std::size_t workspace_bytes) {
  CUBEFORGE_TRY(load_gemm_library());
  GemmContext context;
  cublasLtHandle_t handle = nullptr;
  CUBEFORGE_TRY(lt_status(api().cublasLtCreate(&handle), "create"));
  context.handle_ = reinterpret_cast<cublasLtContext*>(handle);
  CUBEFORGE_ASSIGN_OR_RETURN(context.workspace_,
                             DeviceBuffer<unsigned char>::allocate(workspace_bytes, "cuBLASLt workspace"));
  return Result<GemmContext>(std::move(context));
}

GemmContext::GemmContext(GemmContext&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), workspace_(std::move(other.workspace_)) {}

GemmContext& GemmContext::operator=(GemmContext&& other) noexcept {
  if (this != &other) {
    if (handle_) api().cublasLtDestroy(lt(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
    workspace_ = std::move(other.workspace_);
  }
  return *this;
}

GemmContext::~GemmContext() {
  if (handle_) api().cublasLtDestroy(lt(handle_));
}

Status GemmContext::linear_rows(const LinearRowsArgs& args, Stream stream) {
  const std::string where = "linear_rows: ";
  if (!handle_) return make_error(ErrorCode::kInternal, where + "no cuBLASLt handle");
  if (!args.input || !args.weight || !args.output) return make_error(ErrorCode::kInvalidArgument, where + "input, weight and output are required");
  if (args.rows <= 0 || args.in_features <= 0 || args.out_features <= 0)
    return make_error(ErrorCode::kInvalidArgument, where + "empty product " + std::to_string(args.rows) + "x" +
                                                       std::to_string(args.in_features) + " -> " +
                                                       std::to_string(args.out_features));
  const int input_stride = args.input_stride ? args.input_stride : args.in_features;
  const int output_stride = args.output_stride ? args.output_stride : args.out_features;
  if (input_stride < args.in_features || output_stride < args.out_features)
    return make_error(ErrorCode::kInvalidArgument, where + "strides must cover a row");

  MatmulDescriptors descriptors;
  CUBEFORGE_TRY(lt_status(api().cublasLtMatmulDescCreate(&descriptors.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor"));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  CUBEFORGE_TRY(lt_status(api().cublasLtMatmulDescSetAttribute(descriptors.operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                         sizeof transpose), "transpose A"));
  CUBEFORGE_TRY(lt_status(api().cublasLtMatmulDescSetAttribute(descriptors.operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep,
                                                         sizeof keep), "transpose B"));
  if (args.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CUBEFORGE_TRY(lt_status(api().cublasLtMatmulDescSetAttribute(descriptors.operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                           &epilogue, sizeof epilogue), "bias epilogue"));
    const void* bias = args.bias;
    CUBEFORGE_TRY(lt_status(api().cublasLtMatmulDescSetAttribute(descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                           &bias, sizeof bias), "bias pointer"));
  }
  // Column-major views: A = weight [K, N] (ld K), B = input [K, M] (ld input_stride), D = output [N, M].
  CUBEFORGE_TRY(lt_status(api().cublasLtMatrixLayoutCreate(&descriptors.a, CUDA_R_32F, args.in_features, args.out_features,
                                                     args.in_features), "layout of the weight"));
  CUBEFORGE_TRY(lt_status(api().cublasLtMatrixLayoutCreate(&descriptors.b, CUDA_R_32F, args.in_features, args.rows,
                                                     input_stride), "layout of the input"));
  CUBEFORGE_TRY(lt_status(api().cublasLtMatrixLayoutCreate(&descriptors.d, CUDA_R_32F, args.out_features, args.rows,
                                                     output_stride), "layout of the output"));
  CUBEFORGE_TRY(lt_status(api().cublasLtMatmulPreferenceCreate(&descriptors.preference), "preference"));
  const std::size_t workspace_bytes = workspace_.bytes();
  CUBEFORGE_TRY(lt_status(api().cublasLtMatmulPreferenceSetAttribute(descriptors.preference,
                                                               CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &workspace_bytes, sizeof workspace_bytes),
                          "workspace preference"));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  CUBEFORGE_TRY(lt_status(api().cublasLtMatmulAlgoGetHeuristic(lt(handle_), descriptors.operation, descriptors.a,
                                                         descriptors.b, descriptors.d, descriptors.d,
                                                         descriptors.preference, 1, &heuristic, &found),
                          "algorithm heuristic"));
  if (found == 0)
    return make_error(ErrorCode::kUnsupported, where + "cuBLASLt has no algorithm for " + std::to_string(args.rows) +
                                                   "x" + std::to_string(args.in_features) + " -> " +
                                                   std::to_string(args.out_features));
  const float alpha = 1.0f, beta = args.accumulate ? 1.0f : 0.0f;
  return lt_status(api().cublasLtMatmul(lt(handle_), descriptors.operation, &alpha, args.weight, descriptors.a, args.input,
                                  descriptors.b, &beta, args.output, descriptors.d, args.output, descriptors.d,
                                  &heuristic.algo, workspace_.data(), workspace_bytes, stream),
                   "matmul");
}

}  // namespace cubeforge::cuda
