# USearch (Apache-2.0), header-only HNSW: obtained at configure time, never committed.
#
# The pinned source distribution of the `usearch` package is fetched from the Python
# package registry with `pip download` (no host named here: pip's own configuration
# decides), its sha256 is checked, and `include/usearch/` is extracted into the build
# tree, where it is cached for later configures.
#
# `--no-build-isolation` runs the sdist's metadata step in this interpreter, whose setup.py
# imports setuptools and pybind11 (both in the Python build requirements); `--ignore-requires-python`
# because only the headers are used, whatever the Python version the package itself supports.
#
# Offline builds: -DVECGRAPH_USEARCH_DIR=<folder> where <folder> holds `include/usearch/index.hpp`
# (an extracted sdist or a git checkout) or `usearch/index.hpp`, or the sdist tarball itself.
#
# Provides the INTERFACE target `vecgraph::usearch`.

set(VECGRAPH_USEARCH_VERSION "2.26.6")
set(VECGRAPH_USEARCH_SHA256 "eefb8dc019ad5a184f6089b22f20b91b3961720e504e97ba2718ad62ed65674b")
set(VECGRAPH_USEARCH_DIR "" CACHE PATH "Local USearch folder or sdist tarball for offline builds")

function(_vecgraph_usearch_extract tarball dest)
    file(SHA256 "${tarball}" _hash)
    if(NOT _hash STREQUAL VECGRAPH_USEARCH_SHA256)
        message(FATAL_ERROR "usearch sdist ${tarball} has sha256 ${_hash}, expected ${VECGRAPH_USEARCH_SHA256} "
                            "(usearch==${VECGRAPH_USEARCH_VERSION}); delete it and configure again")
    endif()
    file(REMOVE_RECURSE "${dest}")
    file(ARCHIVE_EXTRACT INPUT "${tarball}" DESTINATION "${dest}"
         PATTERNS "usearch-${VECGRAPH_USEARCH_VERSION}/include/usearch/*"
                  "usearch-${VECGRAPH_USEARCH_VERSION}/LICENSE")
endfunction()

set(_usearch_include "")
if(VECGRAPH_USEARCH_DIR)
    if(EXISTS "${VECGRAPH_USEARCH_DIR}/include/usearch/index.hpp")
        set(_usearch_include "${VECGRAPH_USEARCH_DIR}/include")
    elseif(EXISTS "${VECGRAPH_USEARCH_DIR}/usearch/index.hpp")
        set(_usearch_include "${VECGRAPH_USEARCH_DIR}")
    elseif(NOT IS_DIRECTORY "${VECGRAPH_USEARCH_DIR}" AND EXISTS "${VECGRAPH_USEARCH_DIR}")
        set(_dest "${CMAKE_BINARY_DIR}/_deps/usearch")
        _vecgraph_usearch_extract("${VECGRAPH_USEARCH_DIR}" "${_dest}")
        set(_usearch_include "${_dest}/usearch-${VECGRAPH_USEARCH_VERSION}/include")
    else()
        message(FATAL_ERROR "VECGRAPH_USEARCH_DIR=${VECGRAPH_USEARCH_DIR} holds neither include/usearch/index.hpp, "
                            "usearch/index.hpp, nor is it the usearch-${VECGRAPH_USEARCH_VERSION}.tar.gz sdist")
    endif()
else()
    set(_cache "${CMAKE_BINARY_DIR}/_deps")
    set(_tarball "${_cache}/usearch-${VECGRAPH_USEARCH_VERSION}.tar.gz")
    set(_dest "${_cache}/usearch")
    set(_usearch_include "${_dest}/usearch-${VECGRAPH_USEARCH_VERSION}/include")
    if(NOT EXISTS "${_usearch_include}/usearch/index.hpp")
        if(NOT EXISTS "${_tarball}")
            find_package(Python3 COMPONENTS Interpreter REQUIRED)
            message(STATUS "Downloading usearch==${VECGRAPH_USEARCH_VERSION} source distribution with pip")
            execute_process(
                COMMAND "${Python3_EXECUTABLE}" -m pip download "usearch==${VECGRAPH_USEARCH_VERSION}"
                        --no-deps --no-binary :all: --no-build-isolation --disable-pip-version-check
                        --ignore-requires-python
                        --dest "${_cache}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
            if(NOT _rc EQUAL 0 OR NOT EXISTS "${_tarball}")
                message(FATAL_ERROR "pip download usearch==${VECGRAPH_USEARCH_VERSION} failed (exit ${_rc}):\n"
                                    "${_err}\nFor an offline build pass -DVECGRAPH_USEARCH_DIR=<folder or sdist>.")
            endif()
        endif()
        _vecgraph_usearch_extract("${_tarball}" "${_dest}")
    endif()
endif()

message(STATUS "USearch headers: ${_usearch_include}")
add_library(vecgraph_usearch INTERFACE)
add_library(vecgraph::usearch ALIAS vecgraph_usearch)
# SYSTEM: our -Werror applies to our code, not to USearch's headers.
target_include_directories(vecgraph_usearch SYSTEM INTERFACE "${_usearch_include}")
target_compile_definitions(vecgraph_usearch INTERFACE USEARCH_USE_OPENMP=0)
