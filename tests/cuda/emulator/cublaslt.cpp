// The emulator's cuBLASLt (see include/cublasLt.h): descriptors are plain
// structs, the matmul a double-precision loop over column-major operands.
//   D = alpha · op(A) · op(B) + beta · C (+ bias[row] with the bias epilogue)
// op(X) is X or its transpose; a matrix layout is (rows, cols, ld) of the
// stored, untransposed matrix, column-major, element (r, c) at r + c·ld.
#include <cublasLt.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

struct cublasLtContext { int alive = 1; };
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType scale;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const float* bias = nullptr;
};
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
struct cublasLtMatmulPreferenceOpaque_t { size_t max_workspace = 0; };

namespace {

bool same_shape(const cublasLtMatrixLayoutOpaque_t* x, const cublasLtMatrixLayoutOpaque_t* y) {
  return x->type == y->type && x->rows == y->rows && x->cols == y->cols && x->ld == y->ld;
}

// Validates a call's operands; the shapes of op(A) [m, k], op(B) [k, n], D [m, n].
cublasStatus_t check_operands(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* a,
                              const cublasLtMatrixLayoutOpaque_t* b, const cublasLtMatrixLayoutOpaque_t* c,
                              const cublasLtMatrixLayoutOpaque_t* d) {
  if (!desc || !a || !b || !c || !d) return CUBLAS_STATUS_INVALID_VALUE;
  if (desc->compute != CUBLAS_COMPUTE_32F || desc->scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const auto* layout : {a, b, c, d}) {
    if (layout->type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (layout->rows == 0 || layout->cols == 0 || layout->ld < int64_t(layout->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  }
  const uint64_t m = desc->transa == CUBLAS_OP_N ? a->rows : a->cols;
  const uint64_t k = desc->transa == CUBLAS_OP_N ? a->cols : a->rows;
  const uint64_t kb = desc->transb == CUBLAS_OP_N ? b->rows : b->cols;
  const uint64_t n = desc->transb == CUBLAS_OP_N ? b->cols : b->rows;
  if (k != kb || d->rows != m || d->cols != n || !same_shape(c, d)) return CUBLAS_STATUS_INVALID_VALUE;
  if (desc->epilogue == CUBLASLT_EPILOGUE_BIAS && !desc->bias) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType scale) {
  *desc = new cublasLtMatmulDescOpaque_t{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void* buffer, size_t size) {
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      if (size != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
      const auto op = *static_cast<const cublasOperation_t*>(buffer);
      if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
      (attribute == CUBLASLT_MATMUL_DESC_TRANSA ? desc->transa : desc->transb) = op;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      if (size != sizeof(cublasLtEpilogue_t)) return CUBLAS_STATUS_INVALID_VALUE;
      desc->epilogue = *static_cast<const cublasLtEpilogue_t*>(buffer);
      if (desc->epilogue != CUBLASLT_EPILOGUE_DEFAULT && desc->epilogue != CUBLASLT_EPILOGUE_BIAS)
        return CUBLAS_STATUS_NOT_SUPPORTED;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      if (size != sizeof(void*)) return CUBLAS_STATUS_INVALID_VALUE;
      desc->bias = *static_cast<const float* const*>(buffer);
      return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  *preference = new cublasLtMatmulPreferenceOpaque_t();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute, const void* buffer,
                                                    size_t size) {
  if (attribute != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || size != sizeof(size_t)) return CUBLAS_STATUS_INVALID_VALUE;
  preference->max_workspace = *static_cast<const size_t*>(buffer);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  if (!handle || !preference || requested < 1 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t status = check_operands(desc, a, b, c, d);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = 0x0e0e;  // "the emulator's loop"
  results[0].workspaceSize = preference->max_workspace < 4096 ? preference->max_workspace : 4096;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  if (!handle || !alpha || !beta || !a || !b || !d) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t status = check_operands(desc, a_layout, b_layout, c_layout, d_layout);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (algo && algo->data[0] != 0x0e0e) return CUBLAS_STATUS_INVALID_VALUE;  // not from the heuristic
  if (workspace_bytes > 0 && !workspace) return CUBLAS_STATUS_INVALID_VALUE;
  const float scale_ab = *static_cast<const float*>(alpha), scale_c = *static_cast<const float*>(beta);
  if (scale_c != 0.0f && !c) return CUBLAS_STATUS_INVALID_VALUE;
  const uint64_t m = d_layout->rows, n = d_layout->cols;
  const uint64_t k = desc->transa == CUBLAS_OP_N ? a_layout->cols : a_layout->rows;
  // The operands by value: the matmul is stream work, done when the stream
  // gets to it (after the legacy stream's held-back copies, see emulator.cpp).
  const float* A = static_cast<const float*>(a);
  const float* B = static_cast<const float*>(b);
  const float* C = static_cast<const float*>(c);
  float* D = static_cast<float*>(d);
  const cublasLtMatmulDescOpaque_t op = *desc;
  const int64_t lda = a_layout->ld, ldb = b_layout->ld, ldc = c_layout ? c_layout->ld : 0, ldd = d_layout->ld;
  const cudaError_t submitted = emulator::submit_work(stream, [=] {
    auto a_at = [&](uint64_t row, uint64_t col) {  // op(A)[row, col]
      return op.transa == CUBLAS_OP_N ? A[row + col * lda] : A[col + row * lda];
    };
    auto b_at = [&](uint64_t row, uint64_t col) {
      return op.transb == CUBLAS_OP_N ? B[row + col * ldb] : B[col + row * ldb];
    };
    // C may alias D (accumulation): each element is read before it is written.
    for (uint64_t col = 0; col < n; ++col)
      for (uint64_t row = 0; row < m; ++row) {
        double sum = 0.0;
        for (uint64_t i = 0; i < k; ++i) sum += double(a_at(row, i)) * double(b_at(i, col));
        double value = double(scale_ab) * sum;
        if (scale_c != 0.0f) value += double(scale_c) * double(C[row + col * ldc]);
        if (op.epilogue == CUBLASLT_EPILOGUE_BIAS) value += double(op.bias[row]);
        D[row + col * ldd] = float(value);
      }
  }, "cublasLtMatmul");
  if (submitted != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}
