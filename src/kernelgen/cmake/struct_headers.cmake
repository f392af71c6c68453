# kernelgen_struct_headers(<folder> <src> <dest> [<src> <dest>]...): writes the struct headers a
# target's package installs into <folder>, at configure time. Each pair is a project file (<src>,
# from KERNELGEN_ROOT) and its path under <folder> (<dest>: kernelgen.loader.header_files's path
# under include/, at which the build's compiler finds it). The package installs <folder> under its
# own header folder, so the copies' quoted includes of one another that the compiler would find
# through the include path (rather than beside the including file) are rewritten as paths relative
# to the including file: a program then gets each package's own files whatever its include path
# holds, another package's files of the same paths among them. Other includes (the toolkit's, a
# library's) are kept as they are. Editing one of the files configures the build again.
# A file protected by #pragma once only gets a warning: the API headers include its copy, and a
# program that includes the project's file too has it at two paths, which #pragma once tells apart,
# so its definitions twice; an include guard holds for both (kernelgen.emit.cpp.pragma_once_only,
# which kernelgen build and generate report, reads the file as the compiler does).
function(kernelgen_struct_headers folder)
  list(LENGTH ARGN kg_n)
  set(kg_dests)
  set(kg_i 1)
  while(kg_i LESS kg_n)
    list(GET ARGN ${kg_i} kg_dest)
    list(APPEND kg_dests "${kg_dest}")
    math(EXPR kg_i "${kg_i} + 2")
  endwhile()
  set(kg_i 0)
  while(kg_i LESS kg_n)
    list(GET ARGN ${kg_i} kg_src)
    math(EXPR kg_i "${kg_i} + 1")
    list(GET ARGN ${kg_i} kg_dest)
    math(EXPR kg_i "${kg_i} + 1")
    set(kg_file "${KERNELGEN_ROOT}/${kg_src}")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${kg_file}")
    file(READ "${kg_file}" kg_text)
    if(kg_text MATCHES "(^|\n)[ \t]*#[ \t]*pragma[ \t]+once")
      set(kg_guarded FALSE)
      if(kg_text MATCHES "(^|\n)[ \t]*#[ \t]*(ifndef[ \t]+|if[ \t]*![ \t]*defined[ \t]*[( \t][ \t]*)([A-Za-z_][A-Za-z_0-9]*)")
        if(kg_text MATCHES "(^|\n)[ \t]*#[ \t]*define[ \t]+${CMAKE_MATCH_3}([ \t\r\n]|$)")
          set(kg_guarded TRUE)
        endif()
      endif()
      if(NOT kg_guarded)
        message(WARNING "kernelgen: ${kg_src} is protected by #pragma once only; the package installs a copy of it "
          "that the C++ API header includes, and #pragma once tells files apart by their path, so a program that "
          "includes both the project's ${kg_src} and the API header gets its definitions twice; give ${kg_src} an "
          "include guard (#ifndef NAME / #define NAME at its top, #endif at its end; #pragma once may stay)")
      endif()
    endif()
    get_filename_component(kg_dir "${kg_dest}" DIRECTORY)
    string(REGEX MATCHALL "#[ \t]*include[ \t]*\"[^\";\r\n]+\"" kg_includes "${kg_text}")
    if(kg_includes)
      list(REMOVE_DUPLICATES kg_includes)
    endif()
    foreach(kg_include IN LISTS kg_includes)
      string(REGEX REPLACE "^[^\"]*\"([^\"]*)\"$" "\\1" kg_name "${kg_include}")
      if(kg_dir STREQUAL "")
        set(kg_beside "${kg_name}")
      else()
        set(kg_beside "${kg_dir}/${kg_name}")
      endif()
      cmake_path(NORMAL_PATH kg_beside)
      set(kg_found "${kg_name}")
      cmake_path(NORMAL_PATH kg_found)
      if(NOT kg_beside IN_LIST kg_dests AND kg_found IN_LIST kg_dests)
        file(RELATIVE_PATH kg_rel "/kg/${kg_dir}" "/kg/${kg_found}")
        string(REPLACE "\"${kg_name}\"" "\"${kg_rel}\"" kg_new "${kg_include}")
        string(REPLACE "${kg_include}" "${kg_new}" kg_text "${kg_text}")
      endif()
    endforeach()
    # Written only when it changed, so that an unchanged header is not installed again.
    file(WRITE "${folder}/${kg_dest}.kg_new" "${kg_text}")
    file(COPY_FILE "${folder}/${kg_dest}.kg_new" "${folder}/${kg_dest}" ONLY_IF_DIFFERENT)
    file(REMOVE "${folder}/${kg_dest}.kg_new")
  endwhile()
endfunction()
