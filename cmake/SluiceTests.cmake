# Tests: one line each, one CTest test per GoogleTest test. A skip is exit 77 and nothing else:
# gtest_discover_tests also skips any test whose output shows "[  SKIPPED ]", as a failed
# SetUpTestSuite's does, and CTest cannot take a skip pattern back, so tests are listed here.
function(sluice_add_test name)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest sluice_gtest_main sluice_warnings)
  # A test file drives the product, whose libraries keep their -O2: at -O1 GoogleTest's expanded
  # macros compile in about two thirds of the time, and the build is most of CI's time.
  target_compile_options(${name} PRIVATE $<$<AND:$<CONFIG:RelWithDebInfo,Release>,$<COMPILE_LANGUAGE:CXX>>:-O1>)
  # `sluice_unit_tests` builds only what `ctest -L unit` runs: the sanitizer builds in
  # scripts/test.sh build that target, not the CLI, benches and e2e tests they never run.
  if(ARG_LABEL STREQUAL "unit")
    if(NOT TARGET sluice_unit_tests)
      add_custom_target(sluice_unit_tests)
    endif()
    add_dependencies(sluice_unit_tests ${name})
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  sluice_register_gtests(${name} LABEL "${ARG_LABEL}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# LABEL: unit, e2e, vm (Soft-RoCE VM) or gpu (skips without a GPU). The tests are listed when
# CTest runs, again after each build, so parameterised tests over configs/ need no reconfigure.
function(sluice_register_gtests target)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "" ${ARGN})
  set(listed "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests")
  file(GENERATE OUTPUT "${listed}_include.cmake" CONTENT "\
if(EXISTS [==[$<TARGET_FILE:${target}>]==])
  include([==[${CMAKE_CURRENT_FUNCTION_LIST_FILE}]==])
  sluice_add_listed_gtests([==[$<TARGET_FILE:${target}>]==] [==[${listed}]==] [==[${CMAKE_CURRENT_BINARY_DIR}]==]
    [==[${ARG_LABEL}]==] ${ARG_TIMEOUT} [==[${CMAKE_COMMAND}]==])
else()
  add_test([==[${target}_NOT_BUILT]==] [==[${target}_NOT_BUILT]==])
  set_tests_properties([==[${target}_NOT_BUILT]==] PROPERTIES LABELS [==[${ARG_LABEL}]==])
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${listed}_include.cmake")
endfunction()

# Run by CTest: adds a test per test that PROGRAM lists, each run alone, through LISTED.cmake,
# written again when PROGRAM or the include file calling this is newer. A value-parameterised
# test's index is replaced by its value, as gtest_discover_tests names it.
function(sluice_add_listed_gtests program listed working_dir label timeout cmake)
  if(NOT EXISTS "${listed}.cmake" OR NOT "${listed}.cmake" IS_NEWER_THAN "${program}"
     OR NOT "${listed}.cmake" IS_NEWER_THAN "${CMAKE_CURRENT_LIST_FILE}")
    file(REMOVE "${listed}.cmake" "${listed}.json")
    execute_process(COMMAND "${program}" --gtest_list_tests "--gtest_output=json:${listed}.json"
      WORKING_DIRECTORY "${working_dir}" TIMEOUT 60 RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
    if(NOT result EQUAL 0 OR NOT EXISTS "${listed}.json")
      # One test that fails, saying why; nothing is kept, so the next CTest run lists again.
      get_filename_component(name "${program}" NAME)
      add_test("${name}_LIST_TESTS" "${cmake}" -E echo "${program} --gtest_list_tests failed (${result}):" "${output}")
      set_tests_properties("${name}_LIST_TESTS" PROPERTIES WILL_FAIL TRUE)
      return()
    endif()
    sluice_write_gtests("${listed}" "${program}" "${working_dir}" "${label}" "${timeout}")
  endif()
  include("${listed}.cmake")
endfunction()

# LISTED.json (GoogleTest's listing) -> LISTED.cmake.
function(sluice_write_gtests listed program working_dir label timeout)
  file(READ "${listed}.json" json)
  set(script "")
  string(JSON suites LENGTH "${json}" testsuites)
  foreach(s RANGE ${suites})
    if(s EQUAL suites)
      break()
    endif()
    string(JSON suite GET "${json}" testsuites ${s} name)
    string(JSON tests LENGTH "${json}" testsuites ${s} testsuite)
    foreach(t RANGE ${tests})
      if(t EQUAL tests)
        break()
      endif()
      string(JSON test GET "${json}" testsuites ${s} testsuite ${t} name)
      string(JSON value ERROR_VARIABLE no_value GET "${json}" testsuites ${s} testsuite ${t} value_param)
      set(shown "${suite}.${test}")
      if(NOT no_value)
        string(REGEX REPLACE "/[0-9]+$" "/${value}" shown "${shown}")
      endif()
      string(APPEND script "add_test([==[${shown}]==] [==[${program}]==] [==[--gtest_filter=${suite}.${test}]==])\n"
        "set_tests_properties([==[${shown}]==] PROPERTIES WORKING_DIRECTORY [==[${working_dir}]==]"
        " LABELS [==[${label}]==] TIMEOUT ${timeout} SKIP_RETURN_CODE 77)\n")
      if("${suite}.${test}" MATCHES "(^|\\.)DISABLED_")  # not run by its filter alone: Not Run, not Passed
        string(APPEND script "set_tests_properties([==[${shown}]==] PROPERTIES DISABLED TRUE)\n")
      endif()
    endforeach()
  endforeach()
  file(WRITE "${listed}.cmake" "${script}")
endfunction()
