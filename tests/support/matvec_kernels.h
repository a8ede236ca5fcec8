// Every matrix-vector kernel of the CPU op set, for tests that hold each one
// to the same definition; those this CPU cannot run are marked unavailable.
#pragma once

#include <array>

#include "inference/cpu/kernels.h"

namespace cubeforge::testing {

struct NamedMatvecKernel {
  const char* name;
  cpu::MatvecKernel fn;
  bool available;
};

inline std::array<NamedMatvecKernel, 3> matvec_kernels() {
  return {{
      {"generic", cpu::matvec_generic, true},
      {"avx2", cpu::matvec_avx2, cpu::supports_avx2_kernels()},
      {"avx512", cpu::matvec_avx512, cpu::supports_avx512_kernels()},
  }};
}

}  // namespace cubeforge::testing
