// NEON int8 dot-product kernels (AArch64 only). With the dot-product extension (__ARM_FEATURE_DOTPROD, e.g.
// -march=armv8.2-a+dotprod) sdot accumulates four int8 products per int32 lane; otherwise each int8 x int8
// product is formed exactly in int16 (smull; |p| <= 16384) and pairs are added into int32 lanes (sadalp).
// Dims that are not a multiple of 16 finish with at most 15 scalar products; nothing is read past `dim`.
#include <arm_neon.h>

#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph::simd {
namespace {

// Gathered rows are prefetched this many rows ahead of the row being computed (a multiple of 4).
constexpr std::size_t prefetch_rows_ahead_neon = 8;

inline int32x4_t madd_i8x16_neon(int32x4_t acc, int8x16_t a, int8x16_t b) noexcept {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

inline std::uint32_t reduce_i32x4_neon(int32x4_t v) noexcept { return std::uint32_t(vaddvq_s32(v)); }

inline std::uint32_t dot_scalar_i8_neon(const std::int8_t* a, const std::int8_t* b, std::size_t begin,
                                        std::size_t end) noexcept {
    std::uint32_t sum = 0;
    for (std::size_t i = begin; i < end; ++i) sum += std::uint32_t(std::int32_t(a[i]) * std::int32_t(b[i]));
    return sum;
}

inline void prefetch_row_neon(const std::int8_t* row, std::size_t dim) noexcept { detail::prefetch_bytes_l2(row, dim); }

std::int32_t dot_i8_neon(const std::int8_t* a, const std::int8_t* b, std::size_t dim) noexcept {
    int32x4_t acc0 = vdupq_n_s32(0);
    int32x4_t acc1 = vdupq_n_s32(0);
    std::size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
        acc0 = madd_i8x16_neon(acc0, vld1q_s8(a + i), vld1q_s8(b + i));
        acc1 = madd_i8x16_neon(acc1, vld1q_s8(a + i + 16), vld1q_s8(b + i + 16));
    }
    if (i + 16 <= dim) {
        acc0 = madd_i8x16_neon(acc0, vld1q_s8(a + i), vld1q_s8(b + i));
        i += 16;
    }
    return std::int32_t(reduce_i32x4_neon(vaddq_s32(acc0, acc1)) + dot_scalar_i8_neon(a, b, i, dim));
}

// out[0..3] = dot(query, r0..r3).
inline void dot4_i8_neon(const std::int8_t* query, const std::int8_t* r0, const std::int8_t* r1,
                         const std::int8_t* r2, const std::int8_t* r3, std::size_t dim, std::int32_t* out) noexcept {
    int32x4_t acc0 = vdupq_n_s32(0);
    int32x4_t acc1 = vdupq_n_s32(0);
    int32x4_t acc2 = vdupq_n_s32(0);
    int32x4_t acc3 = vdupq_n_s32(0);
    std::size_t i = 0;
    for (; i + 16 <= dim; i += 16) {
        int8x16_t q = vld1q_s8(query + i);
        acc0 = madd_i8x16_neon(acc0, q, vld1q_s8(r0 + i));
        acc1 = madd_i8x16_neon(acc1, q, vld1q_s8(r1 + i));
        acc2 = madd_i8x16_neon(acc2, q, vld1q_s8(r2 + i));
        acc3 = madd_i8x16_neon(acc3, q, vld1q_s8(r3 + i));
    }
    // Lane j of the pairwise sums is the sum of acc_j.
    int32x4_t sums = vpaddq_s32(vpaddq_s32(acc0, acc1), vpaddq_s32(acc2, acc3));
    if (i < dim) {
        const std::int32_t tails[4] = {
            std::int32_t(dot_scalar_i8_neon(query, r0, i, dim)), std::int32_t(dot_scalar_i8_neon(query, r1, i, dim)),
            std::int32_t(dot_scalar_i8_neon(query, r2, i, dim)), std::int32_t(dot_scalar_i8_neon(query, r3, i, dim))};
        sums = vaddq_s32(sums, vld1q_s32(tails));
    }
    vst1q_s32(out, sums);
}

// Dot products of gathered rows. With `ask_ahead`, asks for the rows prefetch_rows_ahead_neon rows
// ahead of the one it computes (the dot_rows_i8 entry); without, leaves that to the caller
// (dot_rows_i8_prefetched).
template <bool ask_ahead>
void dot_rows_i8_neon(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                      const std::uint32_t* rows, std::size_t count_rows, std::size_t dim,
                      std::int32_t* out) noexcept {
    auto row = [&](std::size_t j) noexcept { return base + std::size_t(rows[j]) * stride_bytes; };
    if constexpr (ask_ahead) {
        std::size_t lead = count_rows < prefetch_rows_ahead_neon ? count_rows : prefetch_rows_ahead_neon;
        for (std::size_t j = 0; j < lead; ++j) prefetch_row_neon(row(j), dim);
    }
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        if constexpr (ask_ahead)
            for (std::size_t j = i + prefetch_rows_ahead_neon; j < i + prefetch_rows_ahead_neon + 4 && j < count_rows; ++j)
                prefetch_row_neon(row(j), dim);
        dot4_i8_neon(query, row(i), row(i + 1), row(i + 2), row(i + 3), dim, out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot_i8_neon(query, row(i), dim);
}

void scan_i8_neon(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                  std::size_t count_rows, std::size_t dim, std::int32_t* out) noexcept {
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        const std::int8_t* r0 = base + i * stride_bytes;
        dot4_i8_neon(query, r0, r0 + stride_bytes, r0 + 2 * stride_bytes, r0 + 3 * stride_bytes, dim, out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot_i8_neon(query, base + i * stride_bytes, dim);
}

constexpr kernel_table_t neon_kernels{"neon", &dot_i8_neon,
                                      &dot_rows_i8_neon<true>, &dot_rows_i8_neon<false>,
                                      &scan_i8_neon};

}  // namespace

const kernel_table_t* neon_table() noexcept { return &neon_kernels; }

}  // namespace vecgraph::simd
