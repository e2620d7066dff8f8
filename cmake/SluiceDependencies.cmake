# Required dependencies fail the configure step with the package to install;
# optional hardware stacks (CUDA, RDMA) are switched off with a message saying what is left out.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

macro(sluice_require_pkg target module debian_package)
  pkg_check_modules(${target} IMPORTED_TARGET ${module})
  if(NOT ${target}_FOUND)
    message(FATAL_ERROR "${module} not found: install ${debian_package} (scripts/setup.sh does this)")
  endif()
endmacro()

sluice_require_pkg(URING liburing liburing-dev)
sluice_require_pkg(FFTW3F fftw3f libfftw3-dev)
sluice_require_pkg(HTTPLIB cpp-httplib libcpp-httplib-dev)  # the /metrics and dashboard server
sluice_require_pkg(PNG libpng libpng-dev)                    # spectrogram images (sluice capture plot)

find_package(yaml-cpp REQUIRED)          # libyaml-cpp-dev
find_package(nlohmann_json 3 REQUIRED)   # nlohmann-json3-dev
find_package(CLI11 REQUIRED)             # libcli11-dev
find_package(spdlog REQUIRED)            # libspdlog-dev
# prometheus-cpp-dev: only its core (metric families and the text serializer) is used; /metrics
# is served by cpp-httplib, not by its civetweb exposer.
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(GTest REQUIRED)             # libgtest-dev libgmock-dev
if(SLUICE_BUILD_BENCH)
  find_package(benchmark REQUIRED)       # libbenchmark-dev
endif()
# yaml-cpp 0.7 exports "yaml-cpp", 0.8 exports "yaml-cpp::yaml-cpp".
if(TARGET yaml-cpp::yaml-cpp)
  set(SLUICE_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(SLUICE_YAML_TARGET yaml-cpp)
endif()

# CUDA: the toolkit lives outside PATH on most machines; look where it is installed.
set(SLUICE_HAVE_CUDA OFF)
if(SLUICE_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (sm_90) natively, plus PTX for anything newer.
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(TARGET CUDA::cudart AND TARGET CUDA::cufft)
      set(SLUICE_HAVE_CUDA ON)
    endif()
  endif()
  if(NOT SLUICE_HAVE_CUDA)
    message(STATUS "CUDA toolkit with cuFFT not found: building without device memory and GPU stages")
  endif()
else()
  message(STATUS "SLUICE_WITH_CUDA=OFF: building without device memory and GPU stages")
endif()

set(SLUICE_HAVE_RDMA OFF)
if(SLUICE_WITH_RDMA)
  pkg_check_modules(IBVERBS IMPORTED_TARGET libibverbs)
  pkg_check_modules(RDMACM IMPORTED_TARGET librdmacm)
  if(IBVERBS_FOUND AND RDMACM_FOUND)
    set(SLUICE_HAVE_RDMA ON)
  endif()
endif()
# SLUICE_HAVE_RDMA builds the link's roce transport (stages/CMakeLists.txt, sluice_link_rdma)
# and its Soft-RoCE VM tests; without it `transport: roce` is a validation error with a hint.
if(SLUICE_HAVE_RDMA)
  message(STATUS "rdma-core found: building the link's roce transport (RDMA CM, RDMA WRITE WITH IMM)")
endif()

