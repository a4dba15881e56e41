# Small helpers so each component's CMakeLists.txt stays a few lines long.

# maitre_library(NAME SRCS a.cc b.cc DEPS x y)
function(maitre_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

# maitre_test(NAME SRCS a_test.cc DEPS lib [LABELS unit|e2e] [TIMEOUT s])
# Registers a GoogleTest binary with ctest. The zoo location is passed in the
# environment so tests that need real models can find it.
function(maitre_test name)
  if(NOT MAITRE_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES
    LABELS "${ARG_LABELS}"
    TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "MAITRE_ZOO_DIR=${MAITRE_ZOO_DIR};MAITRE_BINARY=$<TARGET_FILE:maitre>;MAITRE_SOURCE_DIR=${PROJECT_SOURCE_DIR};OPENBLAS_NUM_THREADS=1")
endfunction()

# maitre_bench(NAME SRCS a_bench.cc DEPS lib)
function(maitre_bench name)
  if(NOT MAITRE_BUILD_BENCH)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
endfunction()
