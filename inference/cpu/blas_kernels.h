// Making sure OpenBLAS runs kernels built for this processor.
//
// Debian's OpenBLAS 0.3.21 picks its kernels by CPU model when the library
// loads. It does not know recent Xeons and falls back to its SSE3 "Prescott"
// kernels, about 3x slower for every GEMM (prefill, CLIP, shape decoding,
// occupancy). The choice is made before main() runs, so the only fix from
// inside the program is to start it again with OPENBLAS_CORETYPE set to the
// kernel family the CPU's features support. The test suite runs the
// reference-fixture tests under both kernel families.
#pragma once

namespace cubeforge::cpu {

// The kernel family OpenBLAS chose ("SkylakeX", "Haswell", "Prescott", ...).
const char* blas_core_name();

// When OpenBLAS fell back to generic kernels on a CPU with AVX2 or AVX-512
// and the user has not chosen (OPENBLAS_CORETYPE unset, CUBEFORGE_KEEP_BLAS
// unset), re-executes the program with OPENBLAS_CORETYPE set. Returns
// normally otherwise (or if the re-execution fails). It also re-executes with
// OPENBLAS_NUM_THREADS=1 when the address space is limited (ulimit -v) and the
// user has not chosen: OpenBLAS's own worker threads, which cubeforge never
// uses, each take a 128 MiB buffer at start-up.
void reexec_with_matching_blas_kernels(char** argv);

// OpenBLAS gives every thread that runs a product a work buffer (128 MiB on
// x86-64, its BUFFER_SIZE), mapped on first use and kept. When that mapping
// fails, as under a limit on address space, its allocator retries forever
// instead of failing. This makes sure buffers for `threads` concurrent
// products exist, checking that the address space has room before each one
// OpenBLAS would map, and throws std::bad_alloc when it has not: a starved run
// ends with "out of memory" instead of spinning. Nearly free once they exist.
void reserve_blas_buffers(int threads);

}  // namespace cubeforge::cpu
