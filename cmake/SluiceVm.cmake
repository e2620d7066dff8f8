# Tests that run inside the Soft-RoCE VM (tests/vm/run_in_vm.sh) under the `vm` label. One line:
#   sluice_add_vm_test(NAME PROGRAM [ARG...] [BINS program...] [FILES file...]
#                      [TIMEOUT seconds] [CPUS n] [MEM MiB])
# PROGRAM is a target (its file is copied into the VM with its libraries) or a program name.
# BINS are more programs the command runs, FILES more files it reads; both land at their own
# paths and take generator expressions, e.g. a test that starts Sluice as two processes:
#   sluice_add_vm_test(roce_link_vm roce_link_test BINS $<TARGET_FILE:sluice> FILES ${cfg}) Exit 77 (qemu cannot run here) is a skip, except under CI=true where the runner fails.
set(SLUICE_VM_RUNNER ${PROJECT_SOURCE_DIR}/tests/vm/run_in_vm.sh)
set(SLUICE_VM_CACHE ${CMAKE_BINARY_DIR}/vm-cache CACHE PATH
    "Where tests/vm/prepare_vm.sh keeps the VM's kernel, modules and busybox")

# CTest starts the costliest tests first, and a fresh build tree has no timings yet: without a
# cost the VM tests, one at a time, would start last and run on long after the rest have ended.
set(SLUICE_VM_TEST_COST 1000)

function(sluice_add_vm_test name program)
  cmake_parse_arguments(ARG "" "TIMEOUT;CPUS;MEM" "BINS;FILES" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(TARGET ${program})
    set(command $<TARGET_FILE:${program}>)
  else()
    set(command ${program})
  endif()
  # The runner stops the VM first, so its console tail is printed before CTest's own kill.
  math(EXPR vm_timeout "${ARG_TIMEOUT} - 15")
  set(options --cache ${SLUICE_VM_CACHE} --timeout ${vm_timeout})
  if(ARG_CPUS)
    list(APPEND options --cpus ${ARG_CPUS})
  endif()
  if(ARG_MEM)
    list(APPEND options --mem ${ARG_MEM})
  endif()
  foreach(bin IN LISTS ARG_BINS)
    list(APPEND options --bin ${bin})
  endforeach()
  foreach(file IN LISTS ARG_FILES)
    list(APPEND options --file ${file})
  endforeach()
  add_test(NAME ${name} COMMAND ${SLUICE_VM_RUNNER} ${options} -- ${command} ${ARG_UNPARSED_ARGUMENTS})
  # One VM at a time: two emulated guests on a small machine only slow each other down.
  set_tests_properties(${name} PROPERTIES LABELS vm TIMEOUT ${ARG_TIMEOUT} SKIP_RETURN_CODE 77
    RESOURCE_LOCK sluice_vm FIXTURES_REQUIRED sluice_vm_kernel COST ${SLUICE_VM_TEST_COST})
endfunction()
