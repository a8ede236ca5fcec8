// OpenBLAS kernel check and the re-execution with OPENBLAS_CORETYPE.
#include "inference/cpu/blas_kernels.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "inference/cpu/kernels.h"

namespace cubeforge::cpu {

const char* blas_core_name() { return openblas_get_corename(); }

void reexec_with_matching_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("CUBEFORGE_KEEP_BLAS")) return;
  const char* core = openblas_get_corename();
  if (!core || strcasecmp(core, "prescott") != 0) return;
  const char* wanted = nullptr;
  if (supports_avx512_kernels())
    wanted = "SkylakeX";
  else if (supports_avx2_kernels())
    wanted = "Haswell";
  if (!wanted) return;
  setenv("OPENBLAS_CORETYPE", wanted, 1);
  setenv("CUBEFORGE_KEEP_BLAS", "1", 1);  // never loop
  execv("/proc/self/exe", argv);
  // Still here: carry on with the kernels we have.
}

}  // namespace cubeforge::cpu
