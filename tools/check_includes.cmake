# Run by the build (see tools/layering.cmake): fails when a file includes a
# project header that its target may not see, or that its top-level folder may
# not use at all (docs/design.md, "Layout").
#
#   cmake -DPROJECT_ROOT=<source dir> -DRULES=<build dir>/include_rules.cmake -P check_includes.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/layering.cmake)  # the area rules

set(violations)

# `file` (project-relative) is built into `targets` (empty for a file no target
# of this configuration builds) and may include the headers of a library's
# folder only when that folder is in `allowed`; other project headers (of a
# program's folder, of tests/support) as far as its area allows.
function(cubeforge_rule file targets allowed)
  cmake_path(GET file PARENT_PATH folder)
  string(REGEX REPLACE "/.*" "" area "${file}")
  file(STRINGS ${PROJECT_ROOT}/${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" included "${line}")
    if(included MATCHES "^\\.\\.?/")
      cmake_path(ABSOLUTE_PATH included BASE_DIRECTORY ${folder} NORMALIZE)
    endif()
    if(NOT included MATCHES "/")
      continue()  # a header next to the file
    endif()
    string(REGEX REPLACE "/.*" "" included_area "${included}")
    if(NOT included_area IN_LIST CUBEFORGE_AREAS)
      continue()  # not a project header
    endif()
    cmake_path(GET included PARENT_PATH included_folder)
    if(included_folder STREQUAL folder)
      continue()
    endif()
    cubeforge_area_allows(${area} ${included_folder} area_ok)
    if(NOT area_ok)
      cubeforge_area_uses(${area} area_uses)
      list(JOIN area_uses ", " area_text)
      list(APPEND violations "${file}: includes ${included}, but ${area}/ may use only ${area_text} (docs/design.md, \"Layout\")")
    elseif(targets AND included_folder IN_LIST CUBEFORGE_LIBRARY_FOLDERS AND NOT included_folder IN_LIST allowed)
      list(APPEND violations "${file}: includes ${included}, but ${targets} does not link the library built from ${included_folder}/")
    endif()
  endforeach()
  set(violations ${violations} PARENT_SCOPE)
endfunction()

include(${RULES})

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "#include outside the target graph:\n  ${text}\n"
          "Link the target that owns the header (PUBLIC when your header includes it), "
          "or move the code to where the design puts it.")
endif()
