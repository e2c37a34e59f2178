// int8 dot-product kernels with run-time ISA dispatch.
//
// One source file per instruction set (kernels_serial.cpp, kernels_avx2.cpp,
// kernels_avx512.cpp, kernels_neon.cpp); only those files get ISA compile flags.
// dispatch.cpp picks the best table the CPU supports once, at first use.
// The environment variable VECGRAPH_FORCE_ISA (serial, avx2, avx512, avx512_vnni, neon)
// overrides the choice; an unknown or unsupported name falls back to the best available.
//
// All kernels compute exact int32 sums of int8 x int8 products, so every ISA returns
// bit-identical results to the serial kernel (|sum| <= dim * 128 * 128 fits int32 for
// dim < 131072).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vecgraph::simd {

/// Dot product of two int8 vectors of `dim` elements.
using dot_i8_fn = std::int32_t (*)(const std::int8_t* a, const std::int8_t* b, std::size_t dim) noexcept;

/// Dot products of `query` against gathered rows: out[i] = dot(query, base + rows[i] * stride_bytes).
using dot_rows_i8_fn = void (*)(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                                const std::uint32_t* rows, std::size_t count_rows, std::size_t dim,
                                std::int32_t* out) noexcept;

/// Dot products of `query` against `count_rows` consecutive rows: out[i] = dot(query, base + i * stride_bytes).
using scan_i8_fn = void (*)(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                            std::size_t count_rows, std::size_t dim, std::int32_t* out) noexcept;

struct kernel_table_t {
    const char* isa_name;
    dot_i8_fn dot_i8;
    /// Asks for the rows a few rows ahead of the one it computes (prefetch into L2).
    dot_rows_i8_fn dot_rows_i8;
    /// The same results for rows the caller has already asked for (the HNSW walk and the
    /// traversal ask for a row's lines when they reach it): asking again costs one of the
    /// core's few L1 miss buffers per line while the request goes to L2, and with a burst of
    /// rows in flight those buffers are what a search waits on (100,000 nodes, 384-d: a search
    /// took 0.94x the time without the second request).
    dot_rows_i8_fn dot_rows_i8_prefetched;
    scan_i8_fn scan_i8;
};

/// The table in use (chosen once; thread-safe).
const kernel_table_t& active() noexcept;

/// Name of the table in use: "serial", "avx2", "avx512", "avx512_vnni" or "neon".
const char* active_isa() noexcept;

/// Names of every table this build has and this CPU can run, best last; "serial" is always first.
std::vector<std::string> available_isas();

/// The table of a given name, or nullptr if this build or CPU lacks it (for tests and benchmarks).
const kernel_table_t* table_for(const std::string& isa_name) noexcept;

/// Replace the active table (for tests and benchmarks). Returns false if the name is unavailable.
bool force_isa(const std::string& isa_name) noexcept;

inline std::int32_t dot_i8(const std::int8_t* a, const std::int8_t* b, std::size_t dim) noexcept {
    return active().dot_i8(a, b, dim);
}

// Per-ISA tables; a table is nullptr-returning (absent) when the build does not compile it.
const kernel_table_t* serial_table() noexcept;
const kernel_table_t* avx2_table() noexcept;         // nullptr unless x86-64
const kernel_table_t* avx512_table() noexcept;       // AVX-512BW, nullptr unless x86-64
const kernel_table_t* avx512_vnni_table() noexcept;  // AVX-512 VNNI, nullptr unless x86-64
const kernel_table_t* neon_table() noexcept;         // nullptr unless AArch64

}  // namespace vecgraph::simd
