# Configures and builds the kernels-only configuration
# (-DCUBEFORGE_CUDA_KERNELS_ONLY=ON: the CUDA kernels and test_cuda_kernels,
# needing nothing but the CUDA toolkit and GoogleTest) into BINARY_DIR, with
# every other package the project looks for refused, as on the GPU machine,
# which has none of them. The GPU machine's check builds this configuration
# when the carried binaries cannot run; this test keeps it from rotting
# (a configure step that needs pkg-config, a definition the kernels use from
# a source the configuration leaves out). It compiles the kernels as PTX only
# (no machine code: ptxas is the slow half, and the main build already runs
# it) and without optimisation (-O0 for host code, cicc's -O0 for device code:
# whether the configuration builds does not depend on how well it optimises),
# and does not run the tests, which need a GPU.
#
#   cmake -DSOURCE_DIR=… -DBINARY_DIR=… -DCUDA_COMPILER=… [-DCXX_COMPILER=…]
#         [-DCOMPILER_LAUNCHER=…] -P kernels_only_build.cmake
cmake_minimum_required(VERSION 3.25)
foreach(required SOURCE_DIR BINARY_DIR CUDA_COMPILER)
  if(NOT ${required})
    message(FATAL_ERROR "kernels_only_build.cmake: pass -D${required}=…")
  endif()
endforeach()

# Everything the full configuration finds besides CUDAToolkit, GTest and
# Threads: a REQUIRED find_package of any of them fails the configure.
set(refused BLAS CLI11 PkgConfig Python3 Vulkan assimp glfw3 meshoptimizer nlohmann_json yaml-cpp)
set(arguments -S ${SOURCE_DIR} -B ${BINARY_DIR} -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON
    -DCUBEFORGE_CUDA_KERNELS_ONLY=ON -DCUBEFORGE_FUZZ=OFF -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}
    -DCMAKE_CUDA_ARCHITECTURES=90-virtual "-DCMAKE_CUDA_FLAGS_RELEASE=-O0 -Xcicc -O0" -DCMAKE_CXX_FLAGS_RELEASE=-O0)
foreach(package IN LISTS refused)
  list(APPEND arguments -DCMAKE_DISABLE_FIND_PACKAGE_${package}=ON)
endforeach()
if(CXX_COMPILER)
  list(APPEND arguments -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
if(COMPILER_LAUNCHER)
  list(APPEND arguments -DCMAKE_CXX_COMPILER_LAUNCHER=${COMPILER_LAUNCHER}
       -DCMAKE_CUDA_COMPILER_LAUNCHER=${COMPILER_LAUNCHER})
endif()

execute_process(COMMAND ${CMAKE_COMMAND} ${arguments} RESULT_VARIABLE configured)
if(NOT configured EQUAL 0)
  message(FATAL_ERROR "the kernels-only configuration failed to configure (exit ${configured}); "
                      "it may find only CUDAToolkit, GTest and Threads")
endif()

cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target test_cuda_kernels --parallel ${cores}
                RESULT_VARIABLE built)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "the kernels-only configuration failed to build test_cuda_kernels (exit ${built})")
endif()
if(NOT EXISTS ${BINARY_DIR}/tests/cuda/test_cuda_kernels)
  message(FATAL_ERROR "the kernels-only build made no ${BINARY_DIR}/tests/cuda/test_cuda_kernels")
endif()
message(STATUS "the kernels-only configuration configures and builds test_cuda_kernels")
