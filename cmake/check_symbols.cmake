# Run after nhb_core is archived (CMakeLists.txt, POST_BUILD): fails the build
# when the static library defines an external symbol that does not start with
# nhb_ (public API, csrc/nhb.h) or nhb__ (internal, shared between the core's
# translation units). The extension hides every symbol, so a bad name would
# not clash there; but the core is also linked into the selftest and the fuzz
# targets, and one naming rule is what lets a reader tell the core's names
# from libuv's, OpenSSL's and nghttp2's at a glance.
#
# Usage: cmake -DNM=<nm> -DLIB=<libnhb_core.a> -P check_symbols.cmake
execute_process(
  COMMAND "${NM}" -g --defined-only "${LIB}"
  OUTPUT_VARIABLE _out
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "nhbench: '${NM} -g --defined-only ${LIB}' failed (${_rc})")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(_bad "")
foreach(_line IN LISTS _lines)
  # "<address> <type> <name>"; member headers ("file.o:") and blank lines
  # have fewer fields. Names that start with "__" or "." come from the
  # compiler's instrumentation (sanitizers, coverage), not from our code.
  if(_line MATCHES "^[0-9a-fA-F]+ [A-Za-z] ([^ ]+)$")
    set(_name "${CMAKE_MATCH_1}")
    if(NOT _name MATCHES "^nhb_" AND NOT _name MATCHES "^(__|\\.)")
      list(APPEND _bad "${_name}")
    endif()
  endif()
endforeach()
if(_bad)
  list(REMOVE_DUPLICATES _bad)
  message(FATAL_ERROR
    "nhbench: external symbols in ${LIB} must start with nhb_ (public) or nhb__ "
    "(internal); make these static or rename them: ${_bad}")
endif()
