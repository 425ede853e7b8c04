# SPDX-License-Identifier: Apache-2.0
# cmake -P script run by ctest (tests/package/CMakeLists.txt). Fails with a message at the first
# step that does not work.
cmake_minimum_required(VERSION 3.25)

function(run what)
  cmake_parse_arguments(R "" "WORKING_DIRECTORY;OUTPUT" "COMMAND" ${ARGN})
  if(NOT R_WORKING_DIRECTORY)
    set(R_WORKING_DIRECTORY ${WORK_DIR})
  endif()
  execute_process(COMMAND ${R_COMMAND} WORKING_DIRECTORY ${R_WORKING_DIRECTORY}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test: ${what} failed (${rc}):\n${R_COMMAND}\n${out}\n${err}")
  endif()
  message(STATUS "package test: ${what}: ok")
  if(R_OUTPUT)
    set(${R_OUTPUT} "${out}" PARENT_SCOPE)
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run("install" COMMAND ${CMAKE_COMMAND} --install ${TIEBREAK_BINARY_DIR} --prefix ${prefix})
foreach(f lib/cmake/tiebreak/tiebreakConfig.cmake lib/cmake/tiebreak/tiebreakConfigVersion.cmake
          share/pkgconfig/tiebreak.pc include/tiebreak/tiebreak.hpp include/tiebreak/testing.hpp)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "package test: ${f} was not installed")
  endif()
endforeach()

# Version and component handling, without compilers.
file(WRITE ${WORK_DIR}/probe/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.25)
project(probe LANGUAGES NONE)
find_package(tiebreak 0.1 REQUIRED COMPONENTS core)
if(NOT TARGET tiebreak::core)
  message(FATAL_ERROR "tiebreak::core missing")
endif()
find_package(tiebreak 1.0 QUIET)
if(tiebreak_FOUND)
  message(FATAL_ERROR "version 1.0 accepted by a 0.x package (SameMajorVersion)")
endif()
find_package(tiebreak QUIET COMPONENTS no_such_component)
if(tiebreak_FOUND)
  message(FATAL_ERROR "an unknown component was accepted")
endif()
]=])
run("find_package versions/components" COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/probe -B ${WORK_DIR}/probe/build
    -DCMAKE_PREFIX_PATH=${prefix})

# The host consumer: configure, build, run.
set(common -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
set(host_build ${WORK_DIR}/host_example)
run("configure host_example" COMMAND ${CMAKE_COMMAND} -S ${TIEBREAK_SOURCE_DIR}/examples/host_example -B ${host_build} ${common})
run("build host_example" COMMAND ${CMAKE_COMMAND} --build ${host_build} --parallel 2)
run("run round_demo" COMMAND ${host_build}/round_demo OUTPUT demo_out)
if(NOT demo_out MATCHES "rne=0x3f80 rna=0x3f81 rz=0x3f80 ru=0x3f81 rd=0x3f80 rto=0x3f81")
  message(FATAL_ERROR "package test: round_demo printed '${demo_out}'")
endif()
run("run my_rounding_test" COMMAND ${host_build}/my_rounding_test)

# pkg-config: the header-only core with nothing but the Cflags.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/share/pkgconfig)
  run("pkg-config --modversion" COMMAND ${PKG_CONFIG} --modversion tiebreak OUTPUT pc_version)
  string(STRIP "${pc_version}" pc_version)
  if(NOT pc_version STREQUAL TIEBREAK_VERSION)
    message(FATAL_ERROR "package test: pkg-config version '${pc_version}', expected ${TIEBREAK_VERSION}")
  endif()
  run("pkg-config --cflags" COMMAND ${PKG_CONFIG} --cflags tiebreak OUTPUT pc_cflags)
  separate_arguments(pc_cflags UNIX_COMMAND "${pc_cflags}")
  run("compile with pkg-config flags" COMMAND ${CXX_COMPILER} -std=c++20 ${pc_cflags}
      ${TIEBREAK_SOURCE_DIR}/examples/host_example/round_demo.cpp -o ${WORK_DIR}/round_demo_pc)
  run("run the pkg-config build" COMMAND ${WORK_DIR}/round_demo_pc OUTPUT pc_out)
  if(NOT pc_out STREQUAL demo_out)
    message(FATAL_ERROR "package test: pkg-config build printed '${pc_out}'")
  endif()
endif()

# The CUDA consumer: compile (and run: without a GPU its tests skip).
if(CUDA_COMPILER)
  set(cuda_build ${WORK_DIR}/cuda_rounding_test)
  run("configure cuda_rounding_test" COMMAND ${CMAKE_COMMAND} -S ${TIEBREAK_SOURCE_DIR}/examples/cuda_rounding_test
      -B ${cuda_build} ${common} -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER} -DCMAKE_CUDA_ARCHITECTURES=90)
  run("build cuda_rounding_test" COMMAND ${CMAKE_COMMAND} --build ${cuda_build} --parallel 2)
  run("run cuda_rounding_test" COMMAND ${cuda_build}/cuda_rounding_test OUTPUT cuda_out)
  message(STATUS "package test: cuda_rounding_test output:\n${cuda_out}")
else()
  message(STATUS "package test: no CUDA compiler: cuda_rounding_test not built")
endif()
