# Makes a module object's hidden, strongly defined symbols local: cmake -DREADELF=... -DOBJCOPY=...
# -DIN=<object> -DOUT=<object> -P localize_hidden.cmake
#
# A module is compiled with hidden visibility, so what its sources define (functions, kernels,
# __constant__ variables, also those of a header that several modules include) is hidden;
# only the launchers' API is exported. Hidden strong definitions become local here, so two
# modules never define one symbol twice in the target library. Weak ones (inline functions,
# template instances, COMDAT helpers) stay as they are: the linker merges those already.
execute_process(COMMAND ${READELF} -sW ${IN} OUTPUT_VARIABLE kg_syms RESULT_VARIABLE kg_rc)
if(NOT kg_rc EQUAL 0)
  message(FATAL_ERROR "readelf failed on ${IN}")
endif()
string(REPLACE "\n" ";" kg_lines "${kg_syms}")
set(kg_local "")
foreach(kg_line IN LISTS kg_lines)
  # Num: Value Size Type Bind Vis Ndx Name
  if(kg_line MATCHES "^ *[0-9]+: +[0-9a-fA-F]+ +[0-9]+ +[A-Z_]+ +GLOBAL +HIDDEN +([0-9]+) +([^ ]+)$")
    string(APPEND kg_local "${CMAKE_MATCH_2}\n")
  endif()
endforeach()
file(WRITE ${OUT}.symbols "${kg_local}")
execute_process(COMMAND ${OBJCOPY} --localize-symbols=${OUT}.symbols ${IN} ${OUT} RESULT_VARIABLE kg_rc)
if(NOT kg_rc EQUAL 0)
  message(FATAL_ERROR "objcopy failed on ${IN}")
endif()
