// AVX512_VNNI int8 dot-product kernels: vpdpbusd multiplies unsigned by signed bytes, so each row
// byte r is fed as r ^ 0x80 == r + 128 (as uint8) against the signed query byte q, and
// 128 * sum(q) is subtracted at the end: sum((r + 128) * q) - 128 * sum(q) == sum(r * q). int32
// lanes wrap modulo 2^32 and the true result fits int32, so the result is exact. Tails use masked
// byte loads; the gathered-row kernel computes four rows at a time and prefetches ahead.
#include "avx512_common.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph::simd {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// AVX512_VNNI

inline __m512i load_i8x64_avx512vnni(const std::int8_t* p) noexcept { return _mm512_loadu_si512(p); }

inline __m512i load_i8_tail_avx512vnni(const std::int8_t* p, __mmask64 mask) noexcept {
    return _mm512_maskz_loadu_epi8(mask, p);
}

// Row bytes as the unsigned operand of vpdpbusd: r + 128.
inline __m512i load_biased_u8x64_avx512vnni(const std::int8_t* p) noexcept {
    return _mm512_xor_si512(load_i8x64_avx512vnni(p), _mm512_set1_epi8(char(0x80)));
}

inline __m512i load_biased_u8_tail_avx512vnni(const std::int8_t* p, __mmask64 mask) noexcept {
    return _mm512_xor_si512(load_i8_tail_avx512vnni(p, mask), _mm512_set1_epi8(char(0x80)));
}

// 128 * sum(query), modulo 2^32: the amount by which the biased products overshoot the dot product.
inline std::uint32_t query_bias_avx512vnni(const std::int8_t* query, std::size_t dim) noexcept {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + 64 <= dim; i += 64) acc = _mm512_dpbusd_epi32(acc, ones, load_i8x64_avx512vnni(query + i));
    if (i < dim) acc = _mm512_dpbusd_epi32(acc, ones, load_i8_tail_avx512vnni(query + i, tail_mask64_avx512(dim - i)));
    return reduce_i32x16_avx512(acc) << 7;
}

std::int32_t dot_i8_avx512vnni(const std::int8_t* a, const std::int8_t* b, std::size_t dim) noexcept {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    __m512i sum_b = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + 64 <= dim; i += 64) {
        __m512i vb = load_i8x64_avx512vnni(b + i);
        acc = _mm512_dpbusd_epi32(acc, load_biased_u8x64_avx512vnni(a + i), vb);
        sum_b = _mm512_dpbusd_epi32(sum_b, ones, vb);
    }
    if (i < dim) {
        __mmask64 mask = tail_mask64_avx512(dim - i);
        __m512i vb = load_i8_tail_avx512vnni(b + i, mask);
        acc = _mm512_dpbusd_epi32(acc, load_biased_u8_tail_avx512vnni(a + i, mask), vb);
        sum_b = _mm512_dpbusd_epi32(sum_b, ones, vb);
    }
    return std::int32_t(reduce_i32x16_avx512(acc) - (reduce_i32x16_avx512(sum_b) << 7));
}

// dot(query, row) given bias == query_bias_avx512vnni(query, dim).
inline std::int32_t dot1_i8_avx512vnni(const std::int8_t* query, const std::int8_t* row, std::size_t dim,
                                       std::uint32_t bias) noexcept {
    __m512i acc = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + 64 <= dim; i += 64)
        acc = _mm512_dpbusd_epi32(acc, load_biased_u8x64_avx512vnni(row + i), load_i8x64_avx512vnni(query + i));
    if (i < dim) {
        __mmask64 mask = tail_mask64_avx512(dim - i);
        acc = _mm512_dpbusd_epi32(acc, load_biased_u8_tail_avx512vnni(row + i, mask),
                                  load_i8_tail_avx512vnni(query + i, mask));
    }
    return std::int32_t(reduce_i32x16_avx512(acc) - bias);
}

// out[0..3] = dot(query, r0..r3) given bias == query_bias_avx512vnni(query, dim).
inline void dot4_i8_avx512vnni(const std::int8_t* query, const std::int8_t* r0, const std::int8_t* r1,
                               const std::int8_t* r2, const std::int8_t* r3, std::size_t dim, std::uint32_t bias,
                               std::int32_t* out) noexcept {
    __m512i acc0 = _mm512_setzero_si512();
    __m512i acc1 = _mm512_setzero_si512();
    __m512i acc2 = _mm512_setzero_si512();
    __m512i acc3 = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + 64 <= dim; i += 64) {
        __m512i q = load_i8x64_avx512vnni(query + i);
        acc0 = _mm512_dpbusd_epi32(acc0, load_biased_u8x64_avx512vnni(r0 + i), q);
        acc1 = _mm512_dpbusd_epi32(acc1, load_biased_u8x64_avx512vnni(r1 + i), q);
        acc2 = _mm512_dpbusd_epi32(acc2, load_biased_u8x64_avx512vnni(r2 + i), q);
        acc3 = _mm512_dpbusd_epi32(acc3, load_biased_u8x64_avx512vnni(r3 + i), q);
    }
    if (i < dim) {
        __mmask64 mask = tail_mask64_avx512(dim - i);
        __m512i q = load_i8_tail_avx512vnni(query + i, mask);  // zero past dim, so biased row bytes there add 0
        acc0 = _mm512_dpbusd_epi32(acc0, load_biased_u8_tail_avx512vnni(r0 + i, mask), q);
        acc1 = _mm512_dpbusd_epi32(acc1, load_biased_u8_tail_avx512vnni(r1 + i, mask), q);
        acc2 = _mm512_dpbusd_epi32(acc2, load_biased_u8_tail_avx512vnni(r2 + i, mask), q);
        acc3 = _mm512_dpbusd_epi32(acc3, load_biased_u8_tail_avx512vnni(r3 + i, mask), q);
    }
    __m128i sums = reduce4_i32x16_avx512(acc0, acc1, acc2, acc3);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_sub_epi32(sums, _mm_set1_epi32(std::int32_t(bias))));
}

// Dot products of gathered rows. With `ask_ahead`, asks for the rows prefetch_rows_ahead_avx512 rows
// ahead of the one it computes (the dot_rows_i8 entry); without, leaves that to the caller
// (dot_rows_i8_prefetched).
template <bool ask_ahead>
void dot_rows_i8_avx512vnni(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                            const std::uint32_t* rows, std::size_t count_rows, std::size_t dim,
                            std::int32_t* out) noexcept {
    auto row = [&](std::size_t j) noexcept { return base + std::size_t(rows[j]) * stride_bytes; };
    if constexpr (ask_ahead) {
        std::size_t lead = count_rows < prefetch_rows_ahead_avx512 ? count_rows : prefetch_rows_ahead_avx512;
        for (std::size_t j = 0; j < lead; ++j) prefetch_row_avx512(row(j), dim);
    }
    std::uint32_t bias = query_bias_avx512vnni(query, dim);
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        if constexpr (ask_ahead)
            for (std::size_t j = i + prefetch_rows_ahead_avx512; j < i + prefetch_rows_ahead_avx512 + 4 && j < count_rows;
                 ++j)
                prefetch_row_avx512(row(j), dim);
        dot4_i8_avx512vnni(query, row(i), row(i + 1), row(i + 2), row(i + 3), dim, bias, out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot1_i8_avx512vnni(query, row(i), dim, bias);
}

void scan_i8_avx512vnni(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                        std::size_t count_rows, std::size_t dim, std::int32_t* out) noexcept {
    std::uint32_t bias = query_bias_avx512vnni(query, dim);
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        const std::int8_t* r0 = base + i * stride_bytes;
        dot4_i8_avx512vnni(query, r0, r0 + stride_bytes, r0 + 2 * stride_bytes, r0 + 3 * stride_bytes, dim, bias,
                           out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot1_i8_avx512vnni(query, base + i * stride_bytes, dim, bias);
}

constexpr kernel_table_t avx512_vnni_kernels{"avx512_vnni", &dot_i8_avx512vnni,
                                             &dot_rows_i8_avx512vnni<true>, &dot_rows_i8_avx512vnni<false>,
                                             &scan_i8_avx512vnni};

}  // namespace

const kernel_table_t* avx512_vnni_table() noexcept { return &avx512_vnni_kernels; }

}  // namespace vecgraph::simd
