# SPDX-License-Identifier: Apache-2.0
# ctest script (cmake -P): every header under include/tiebreak/ is free of host-only code. nvcc only
# diagnoses a __host__ __device__ function that calls host code when a kernel uses it, so the
# device-only compile of each header (header_check_cuda) cannot see host code that no kernel calls
# yet; this scan names it: a standard header outside the portable set below (threads, containers,
# strings, streams), and CPU dispatch (`__builtin_cpu_supports`, `target` attributes).
# -DROOT=<include dir> -DSKIP=<headers not device-clean yet, ;-list>
cmake_minimum_required(VERSION 3.25)
# concepts and numbers are compile-time only (concept definitions, constexpr constants).
set(allowed array bit cfloat climits cmath concepts cstddef cstdint cstring limits numbers string_view type_traits utility)
file(GLOB_RECURSE headers RELATIVE ${ROOT} ${ROOT}/tiebreak/*.hpp)
set(bad "")
foreach(h IN LISTS headers)
  if(h IN_LIST SKIP)
    continue()
  endif()
  file(STRINGS ${ROOT}/${h} lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*//")
      continue()  # comments may name what they avoid
    endif()
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>")
      if(NOT CMAKE_MATCH_1 IN_LIST allowed)
        string(APPEND bad "${h}:${n}: host-only standard header <${CMAKE_MATCH_1}>\n")
      endif()
    endif()
    if(line MATCHES "__builtin_cpu_supports|__attribute__[ \t]*\\(\\([ \t]*target|std::thread")
      string(APPEND bad "${h}:${n}: host-only code: ${line}\n")
    endif()
  endforeach()
endforeach()
list(LENGTH headers count)
if(bad)
  message(FATAL_ERROR "host-only code in the portable core (move it to tiebreak::host, src/host):\n${bad}")
endif()
message(STATUS "${count} headers scanned, no host-only code")
