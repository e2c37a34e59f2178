# Per-ISA compile flags on single kernel files; nothing else gets ISA flags.
# Never -march=native: one build must run on any CPU of its architecture, and
# simd/dispatch.cpp chooses the kernels at run time. Included where vecgraph_core is defined
# (cpp/CMakeLists.txt): source file properties hold in the directory that sets them.
set(_simd "${PROJECT_SOURCE_DIR}/cpp/src/simd")

set(VECGRAPH_KERNEL_SOURCES ${_simd}/dispatch.cpp ${_simd}/kernels_serial.cpp)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    list(APPEND VECGRAPH_KERNEL_SOURCES ${_simd}/kernels_avx2.cpp ${_simd}/kernels_avx512.cpp
                                        ${_simd}/kernels_avx512_vnni.cpp)
    set_source_files_properties(${_simd}/kernels_avx2.cpp PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
    # The -Wno-* flags: GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized at -O3.
    set(_avx512_flags "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma")
    set_source_files_properties(${_simd}/kernels_avx512.cpp PROPERTIES COMPILE_OPTIONS
        "${_avx512_flags};$<$<CXX_COMPILER_ID:GNU>:-Wno-uninitialized;-Wno-maybe-uninitialized>")
    # VNNI in its own file: with -mavx512vnni a compiler may fuse madd + add into vpdpwssd,
    # which the plain avx512 table must not contain (it runs on CPUs without VNNI).
    set_source_files_properties(${_simd}/kernels_avx512_vnni.cpp PROPERTIES COMPILE_OPTIONS
        "${_avx512_flags};-mavx512vnni;$<$<CXX_COMPILER_ID:GNU>:-Wno-uninitialized;-Wno-maybe-uninitialized>")
    set(VECGRAPH_HAVE_X86_KERNELS ON)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64|ARM64")
    list(APPEND VECGRAPH_KERNEL_SOURCES ${_simd}/kernels_neon.cpp)
    set(VECGRAPH_HAVE_NEON_KERNELS ON)
endif()
