# The build's targets are the architecture (docs/design.md, "Layout"), and the build
# refuses what the design forbids.
#
#   cubeforge_add_library(<name> ...)  one static library per source folder,
#       cubeforge_<name>, linking the project libraries it uses: PUBLIC when a
#       header of its own includes theirs, PRIVATE when only its sources do.
#   cubeforge_check_layering()  called once every target exists. It refuses,
#       at configure time, a folder that builds two libraries and a link
#       between top-level folders that the design forbids (CUBEFORGE_AREA_RULES). It then writes which project folders
#       each file may include from and adds a build step that every target
#       waits for: tools/check_includes.cmake, which fails on any
#       `#include "folder/…"` outside them.
#
# A file may include headers of its own folder, of the targets its target
# links, and of what those link PUBLICly: what one include directory per
# library would allow. A header counts as part of every target built from its
# folder's sources. Headers of a folder that no library is built from (a
# program's, tests/support) and files no target of this configuration builds
# are held to their area's rule only.

# What each top-level folder may include at all: inference uses nothing of the
# others; the engine uses inference's mesh types (and the options they name) only;
# the app uses both.
set(CUBEFORGE_AREA_RULES
  "inference=inference"
  "engine=engine,inference/core,inference/options,inference/geometry"
  "app=app,engine,inference"
  "tests=tests,app,engine,inference")

# cubeforge_add_library(<name> [FOLDER <dir>] [EXCLUDE <regex>]
#                       [PUBLIC <dependency>...] [PRIVATE <dependency>...])
# The static library cubeforge_<name> of the *.cpp files in <dir> (default: the
# folder <name> next to the calling CMakeLists.txt), and of its *.cu files when
# CUDA is enabled, less those matching <regex>: only for alternative
# implementations of one interface that the configuration chooses between,
# since a folder holds one library (cubeforge_check_layering refuses two). A
# file named *_avx512.cpp or *_avx2.cpp is compiled for that instruction set;
# the code calls into it only on a CPU that has it (inference/cpu/kernels.h).
function(cubeforge_add_library name)
  cmake_parse_arguments(L "" "FOLDER;EXCLUDE" "PUBLIC;PRIVATE" ${ARGN})
  if(NOT L_FOLDER)
    set(L_FOLDER ${CMAKE_CURRENT_SOURCE_DIR}/${name})
  endif()
  set(patterns ${L_FOLDER}/*.cpp)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(CUDA IN_LIST languages)
    list(APPEND patterns ${L_FOLDER}/*.cu)
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${patterns})
  if(L_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX "${L_EXCLUDE}")
  endif()
  add_library(cubeforge_${name} STATIC ${sources})
  target_include_directories(cubeforge_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  if(L_PUBLIC)
    target_link_libraries(cubeforge_${name} PUBLIC ${L_PUBLIC})
  endif()
  if(L_PRIVATE)
    target_link_libraries(cubeforge_${name} PRIVATE ${L_PRIVATE})
  endif()
  foreach(source IN LISTS sources)
    if(source MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${source} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mfma;-mf16c;-mavx2")
    elseif(source MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${source} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    endif()
  endforeach()
endfunction()

# Adds every folder next to the calling CMakeLists.txt that has a
# CMakeLists.txt of its own: a new program or test folder needs no other edit.
function(cubeforge_add_subfolders)
  file(GLOB entries LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*)
  foreach(entry IN LISTS entries)
    if(IS_DIRECTORY ${entry} AND EXISTS ${entry}/CMakeLists.txt)
      add_subdirectory(${entry})
    endif()
  endforeach()
endfunction()

# Every target defined in `dir` and the folders below it.
function(cubeforge_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    cubeforge_targets_below(${subdirectory} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The files of `target` in the source tree, relative to the project root.
function(cubeforge_project_sources target out)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(files)
  foreach(source IN LISTS sources)
    if(source MATCHES "^\\$<")
      continue()
    endif()
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${source_dir} NORMALIZE)
    cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${source} NORMALIZE generated)
    cmake_path(IS_PREFIX PROJECT_SOURCE_DIR ${source} NORMALIZE in_project)
    if(in_project AND NOT generated)
      cmake_path(RELATIVE_PATH source BASE_DIRECTORY ${PROJECT_SOURCE_DIR})
      list(APPEND files ${source})
    endif()
  endforeach()
  set(${out} ${files} PARENT_SCOPE)
endfunction()

# The project targets whose headers `target` sees: those it links, and what
# they link PUBLICly, transitively.
function(cubeforge_visible_targets target project_targets out)
  get_target_property(pending ${target} LINK_LIBRARIES)
  set(visible)
  while(pending)
    list(POP_FRONT pending dependency)
    if(NOT dependency IN_LIST project_targets OR dependency IN_LIST visible)
      continue()  # also $<LINK_ONLY:…>: a PRIVATE dependency of a static library
    endif()
    list(APPEND visible ${dependency})
    get_target_property(exposed ${dependency} INTERFACE_LINK_LIBRARIES)
    if(exposed)
      list(APPEND pending ${exposed})
    endif()
  endwhile()
  set(${out} ${visible} PARENT_SCOPE)
endfunction()

# The top-level folders (areas) the rules speak of.
set(CUBEFORGE_AREAS ${CUBEFORGE_AREA_RULES})
list(TRANSFORM CUBEFORGE_AREAS REPLACE "=.*" "")

# The folders area `area` may use (CUBEFORGE_AREA_RULES).
function(cubeforge_area_uses area out)
  set(prefixes)
  foreach(rule IN LISTS CUBEFORGE_AREA_RULES)
    if(rule MATCHES "^${area}=(.*)")
      string(REPLACE "," ";" prefixes "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} ${prefixes} PARENT_SCOPE)
endfunction()

# Whether area `area` may use project folder `folder`.
function(cubeforge_area_allows area folder out)
  cubeforge_area_uses(${area} prefixes)
  set(allowed FALSE)
  foreach(prefix IN LISTS prefixes)
    if(folder STREQUAL prefix OR folder MATCHES "^${prefix}/")
      set(allowed TRUE)
    endif()
  endforeach()
  set(${out} ${allowed} PARENT_SCOPE)
endfunction()

function(cubeforge_check_layering)
  cubeforge_targets_below(${PROJECT_SOURCE_DIR} all_targets)
  set(project_targets)
  foreach(target IN LISTS all_targets)
    get_target_property(type ${target} TYPE)
    if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      list(APPEND project_targets ${target})
    endif()
  endforeach()

  # The folders of each target's files, and the targets built from each folder.
  set(folders)
  set(library_folders)
  foreach(target IN LISTS project_targets)
    cubeforge_project_sources(${target} files)
    set(files_of_${target} ${files})
    set(folders_of_${target})
    foreach(file IN LISTS files)
      cmake_path(GET file PARENT_PATH folder)
      list(APPEND folders_of_${target} ${folder})
      list(APPEND targets_in_${folder} ${target})
      list(APPEND folders ${folder})
    endforeach()
    list(REMOVE_DUPLICATES folders_of_${target})
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "EXECUTABLE")
      list(APPEND library_folders ${folders_of_${target}})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES folders)
  list(REMOVE_DUPLICATES library_folders)

  # One library per folder: the folders are the architecture.
  foreach(folder IN LISTS library_folders)
    set(libraries)
    foreach(target IN LISTS targets_in_${folder})
      get_target_property(type ${target} TYPE)
      if(NOT type STREQUAL "EXECUTABLE")
        list(APPEND libraries ${target})
      endif()
    endforeach()
    list(REMOVE_DUPLICATES libraries)
    list(LENGTH libraries count)
    if(count GREATER 1)
      list(JOIN libraries ", " libraries)
      message(FATAL_ERROR "${folder}/ builds ${count} libraries (${libraries}); a folder is one library: "
              "give each its own folder (docs/design.md, \"Layout\")")
    endif()
  endforeach()

  set(rules "# Written by cubeforge_check_layering() (tools/layering.cmake); read by tools/check_includes.cmake.\n")
  string(APPEND rules "set(CUBEFORGE_LIBRARY_FOLDERS \"${library_folders}\")\n")
  set(ruled_files)
  foreach(target IN LISTS project_targets)
    # A project library name that is no target would be passed to the linker
    # as -l<name> and fail there, far from the cause.
    get_target_property(direct ${target} LINK_LIBRARIES)
    foreach(dependency IN LISTS direct)
      if(dependency MATCHES "^cubeforge_" AND NOT TARGET ${dependency})
        message(FATAL_ERROR "${target} links ${dependency}, which is no target of this build; the libraries "
                "are those of inference/CMakeLists.txt and engine/CMakeLists.txt (cubeforge_core, cubeforge_cpu, …, cubeforge_engine)")
      endif()
    endforeach()
    cubeforge_visible_targets(${target} "${project_targets}" visible)
    set(allowed ${folders_of_${target}})
    foreach(dependency IN LISTS visible)
      list(APPEND allowed ${folders_of_${dependency}})
    endforeach()
    list(REMOVE_DUPLICATES allowed)
    set(allowed_by_${target} ${allowed})
    # The links themselves: only what the target's area may use.
    foreach(folder IN LISTS folders_of_${target})
      string(REGEX REPLACE "/.*" "" area "${folder}")
      foreach(dependency IN LISTS visible)
        foreach(dependency_folder IN LISTS folders_of_${dependency})
          cubeforge_area_allows(${area} ${dependency_folder} ok)
          if(NOT ok)
            message(FATAL_ERROR "${target} (${folder}/) links ${dependency} (${dependency_folder}/), which "
                    "the design forbids (docs/design.md, \"Layout\"; CUBEFORGE_AREA_RULES in tools/layering.cmake)")
          endif()
        endforeach()
      endforeach()
    endforeach()
    foreach(file IN LISTS files_of_${target})
      string(APPEND rules "cubeforge_rule(\"${file}\" \"${target}\" \"${allowed}\")\n")
      list(APPEND ruled_files ${file})
    endforeach()
  endforeach()

  # Headers belong to every target built from their folder.
  foreach(folder IN LISTS folders)
    set(allowed)
    foreach(target IN LISTS targets_in_${folder})
      list(APPEND allowed ${allowed_by_${target}})
    endforeach()
    list(REMOVE_DUPLICATES allowed)
    set(owners ${targets_in_${folder}})
    list(REMOVE_DUPLICATES owners)
    list(JOIN owners " or " owners)
    file(GLOB headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
      ${PROJECT_SOURCE_DIR}/${folder}/*.h ${PROJECT_SOURCE_DIR}/${folder}/*.cuh)
    foreach(header IN LISTS headers)
      if(NOT header IN_LIST ruled_files)
        string(APPEND rules "cubeforge_rule(\"${header}\" \"${owners}\" \"${allowed}\")\n")
        list(APPEND ruled_files ${header})
      endif()
    endforeach()
  endforeach()

  # Everything else in the areas (not built in this configuration, or headers
  # of a folder without sources): the area's rule only.
  set(patterns)
  foreach(area IN LISTS CUBEFORGE_AREAS)
    foreach(extension IN ITEMS h cuh cpp cu)
      list(APPEND patterns ${PROJECT_SOURCE_DIR}/${area}/*.${extension})
    endforeach()
  endforeach()
  file(GLOB_RECURSE every_file CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR} ${patterns})
  foreach(file IN LISTS every_file)
    if(NOT file IN_LIST ruled_files)
      string(APPEND rules "cubeforge_rule(\"${file}\" \"\" \"\")\n")
    endif()
  endforeach()

  set(rules_file ${CMAKE_BINARY_DIR}/include_rules.cmake)
  file(CONFIGURE OUTPUT ${rules_file} CONTENT "${rules}")
  list(TRANSFORM every_file PREPEND ${PROJECT_SOURCE_DIR}/)
  set(stamp ${CMAKE_BINARY_DIR}/include_check.stamp)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DPROJECT_ROOT=${PROJECT_SOURCE_DIR} -DRULES=${rules_file}
            -P ${PROJECT_SOURCE_DIR}/tools/check_includes.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${rules_file} ${PROJECT_SOURCE_DIR}/tools/check_includes.cmake ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
            ${every_file}
    COMMENT "Checking every #include against the target graph"
    VERBATIM)
  add_custom_target(cubeforge_include_check ALL DEPENDS ${stamp})
  foreach(target IN LISTS project_targets)
    add_dependencies(${target} cubeforge_include_check)
  endforeach()
endfunction()
