# Adds every target in KERNELGEN_TARGETS from ${KERNELGEN_ROOT}/generated/<target>.
# Used by kernelgen's driver project and by a project's own top-level CMakeLists.txt.
if(NOT DEFINED KERNELGEN_ROOT)
  message(FATAL_ERROR "kernelgen: KERNELGEN_ROOT must name the project root (the folder holding specs/)")
endif()
if(NOT DEFINED KERNELGEN_INSTALL_DIR)
  set(KERNELGEN_INSTALL_DIR kernelgen_ops)
endif()
set(KERNELGEN_RUNTIME_DIR ${CMAKE_CURRENT_LIST_DIR}/../runtime)
# Source line information in the device code (nvcc -lineinfo: profilers and compute-sanitizer
# map instructions to source lines). It records the sources' absolute paths on the build machine
# in the libraries; OFF leaves them out (a wheel to publish: -Ccmake.define.KERNELGEN_LINEINFO=OFF).
option(KERNELGEN_LINEINFO "Build device code with source line information (nvcc -lineinfo)" ON)
include(${CMAKE_CURRENT_LIST_DIR}/struct_headers.cmake)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)

find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
find_package(pybind11 CONFIG REQUIRED)

foreach(kg_target IN LISTS KERNELGEN_TARGETS)
  if(NOT EXISTS ${KERNELGEN_ROOT}/generated/${kg_target}/CMakeLists.txt)
    message(FATAL_ERROR "kernelgen: generated/${kg_target} is missing; run: kernelgen generate")
  endif()
  add_subdirectory(${KERNELGEN_ROOT}/generated/${kg_target} ${CMAKE_BINARY_DIR}/kg_${kg_target})
endforeach()
