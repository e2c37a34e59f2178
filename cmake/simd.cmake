# Per-ISA compile flags on single kernel files; nothing else gets ISA flags.
# Never -march=native: one build must run on any CPU of its architecture, and
# simd/dispatch.cpp chooses the kernels at run time.

set(VECGRAPH_KERNEL_SOURCES cpp/src/simd/dispatch.cpp cpp/src/simd/kernels_serial.cpp)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    list(APPEND VECGRAPH_KERNEL_SOURCES cpp/src/simd/kernels_avx2.cpp cpp/src/simd/kernels_avx512.cpp)
    set_source_files_properties(cpp/src/simd/kernels_avx2.cpp PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
    set_source_files_properties(cpp/src/simd/kernels_avx512.cpp PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx2;-mfma;$<$<CXX_COMPILER_ID:GNU>:-Wno-uninitialized;-Wno-maybe-uninitialized>")
    # GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized inside _mm512_reduce_add_epi32 at -O3.
    set(VECGRAPH_HAVE_X86_KERNELS ON)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64|ARM64")
    list(APPEND VECGRAPH_KERNEL_SOURCES cpp/src/simd/kernels_neon.cpp)
    set(VECGRAPH_HAVE_NEON_KERNELS ON)
endif()
