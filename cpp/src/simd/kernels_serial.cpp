// Portable int8 dot-product kernels: the reference every ISA-specific table must match bit for bit.
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph::simd {
namespace {

std::int32_t dot_i8_serial(const std::int8_t* a, const std::int8_t* b, std::size_t dim) noexcept {
    // Unsigned accumulation wraps modulo 2^32 like the SIMD lanes do, so even an out-of-contract dim
    // gives the same bits as every other table and never signed overflow.
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < dim; ++i) sum += std::uint32_t(std::int32_t(a[i]) * std::int32_t(b[i]));
    return std::int32_t(sum);
}

void dot_rows_i8_serial(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                        const std::uint32_t* rows, std::size_t count_rows, std::size_t dim,
                        std::int32_t* out) noexcept {
    for (std::size_t i = 0; i < count_rows; ++i)
        out[i] = dot_i8_serial(query, base + std::size_t(rows[i]) * stride_bytes, dim);
}

void scan_i8_serial(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                    std::size_t count_rows, std::size_t dim, std::int32_t* out) noexcept {
    for (std::size_t i = 0; i < count_rows; ++i) out[i] = dot_i8_serial(query, base + i * stride_bytes, dim);
}

// Serial rows are not prefetched: both gathered-row entries are the same function.
constexpr kernel_table_t serial_kernels{"serial", &dot_i8_serial, &dot_rows_i8_serial, &dot_rows_i8_serial,
                                        &scan_i8_serial};

}  // namespace

const kernel_table_t* serial_table() noexcept { return &serial_kernels; }

}  // namespace vecgraph::simd
