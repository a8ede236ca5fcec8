# On a machine without a CUDA device: a CUDA test skips, and fails when
# CUBEFORGE_REQUIRE_CUDA=1 (what tools/device-check.sh sets on the GPU
# machine, where "ok, N skipped" must not pass for a result). With a device
# the test just passes both ways.
#   cmake -DTEST=<test executable> -DFILTER=<one gtest name> -P require_device_check.cmake
foreach(required TEST FILTER)
  if(NOT ${required})
    message(FATAL_ERROR "require_device_check.cmake: pass -D${required}=…")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=CUBEFORGE_REQUIRE_CUDA ${TEST} --gtest_filter=${FILTER}
                RESULT_VARIABLE plain_result OUTPUT_VARIABLE plain_output ERROR_VARIABLE plain_output)
if(plain_output MATCHES "\\[  PASSED  \\] 1 test" AND NOT plain_output MATCHES "SKIPPED")
  message(STATUS "a CUDA device is present: ${FILTER} ran; nothing to check")
  return()
endif()
if(NOT plain_result EQUAL 0 OR NOT plain_output MATCHES "\\[  SKIPPED \\] ${FILTER}")
  message(FATAL_ERROR "without a device and without CUBEFORGE_REQUIRE_CUDA, ${FILTER} should skip:\n${plain_output}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env CUBEFORGE_REQUIRE_CUDA=1 ${TEST} --gtest_filter=${FILTER}
                RESULT_VARIABLE required_result OUTPUT_VARIABLE required_output ERROR_VARIABLE required_output)
if(required_result EQUAL 0 OR NOT required_output MATCHES "where one is required \\(CUBEFORGE_REQUIRE_CUDA is set\\)"
   OR NOT required_output MATCHES "\\[  FAILED  \\] ${FILTER}")
  message(FATAL_ERROR "without a device and with CUBEFORGE_REQUIRE_CUDA=1, ${FILTER} should fail saying why:\n"
                      "${required_output}")
endif()
message(STATUS "${FILTER} skips without a device, and fails when one is required")
