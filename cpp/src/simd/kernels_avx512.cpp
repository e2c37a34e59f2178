// AVX-512 int8 dot-product kernels (AVX-512 F/BW/VL/DQ, no VNNI): int8 sign-extended to int16
// (vpmovsxbw), vpmaddwd to int32, int32 accumulation. Tails use masked byte loads (fault-
// suppressing), so nothing is read past `dim`. The gathered-row kernel computes four rows at a
// time and prefetches the rows that follow. The VNNI table is in kernels_avx512_vnni.cpp, built
// with -mavx512vnni; this file is not, so nothing here can be fused into VNNI instructions.
#include "avx512_common.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph::simd {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// AVX-512BW

inline __m512i load_i8x32_as_i16_avx512bw(const std::int8_t* p) noexcept {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline __m512i load_i8_tail_as_i16_avx512bw(const std::int8_t* p, __mmask32 mask) noexcept {
    return _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, p));
}

inline __m512i madd_i16_avx512bw(__m512i a, __m512i b) noexcept { return _mm512_madd_epi16(a, b); }

std::int32_t dot_i8_avx512bw(const std::int8_t* a, const std::int8_t* b, std::size_t dim) noexcept {
    __m512i acc0 = _mm512_setzero_si512();
    __m512i acc1 = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + 64 <= dim; i += 64) {
        acc0 = _mm512_add_epi32(
            acc0, madd_i16_avx512bw(load_i8x32_as_i16_avx512bw(a + i), load_i8x32_as_i16_avx512bw(b + i)));
        acc1 = _mm512_add_epi32(
            acc1, madd_i16_avx512bw(load_i8x32_as_i16_avx512bw(a + i + 32), load_i8x32_as_i16_avx512bw(b + i + 32)));
    }
    if (i + 32 <= dim) {
        acc0 = _mm512_add_epi32(
            acc0, madd_i16_avx512bw(load_i8x32_as_i16_avx512bw(a + i), load_i8x32_as_i16_avx512bw(b + i)));
        i += 32;
    }
    if (i < dim) {
        __mmask32 mask = tail_mask32_avx512(dim - i);
        acc1 = _mm512_add_epi32(acc1, madd_i16_avx512bw(load_i8_tail_as_i16_avx512bw(a + i, mask),
                                                        load_i8_tail_as_i16_avx512bw(b + i, mask)));
    }
    return std::int32_t(reduce_i32x16_avx512(_mm512_add_epi32(acc0, acc1)));
}

// out[0..3] = dot(query, r0..r3).
inline void dot4_i8_avx512bw(const std::int8_t* query, const std::int8_t* r0, const std::int8_t* r1,
                             const std::int8_t* r2, const std::int8_t* r3, std::size_t dim,
                             std::int32_t* out) noexcept {
    __m512i acc0 = _mm512_setzero_si512();
    __m512i acc1 = _mm512_setzero_si512();
    __m512i acc2 = _mm512_setzero_si512();
    __m512i acc3 = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
        __m512i q = load_i8x32_as_i16_avx512bw(query + i);
        acc0 = _mm512_add_epi32(acc0, madd_i16_avx512bw(q, load_i8x32_as_i16_avx512bw(r0 + i)));
        acc1 = _mm512_add_epi32(acc1, madd_i16_avx512bw(q, load_i8x32_as_i16_avx512bw(r1 + i)));
        acc2 = _mm512_add_epi32(acc2, madd_i16_avx512bw(q, load_i8x32_as_i16_avx512bw(r2 + i)));
        acc3 = _mm512_add_epi32(acc3, madd_i16_avx512bw(q, load_i8x32_as_i16_avx512bw(r3 + i)));
    }
    if (i < dim) {
        __mmask32 mask = tail_mask32_avx512(dim - i);
        __m512i q = load_i8_tail_as_i16_avx512bw(query + i, mask);
        acc0 = _mm512_add_epi32(acc0, madd_i16_avx512bw(q, load_i8_tail_as_i16_avx512bw(r0 + i, mask)));
        acc1 = _mm512_add_epi32(acc1, madd_i16_avx512bw(q, load_i8_tail_as_i16_avx512bw(r1 + i, mask)));
        acc2 = _mm512_add_epi32(acc2, madd_i16_avx512bw(q, load_i8_tail_as_i16_avx512bw(r2 + i, mask)));
        acc3 = _mm512_add_epi32(acc3, madd_i16_avx512bw(q, load_i8_tail_as_i16_avx512bw(r3 + i, mask)));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), reduce4_i32x16_avx512(acc0, acc1, acc2, acc3));
}

// Dot products of gathered rows. With `ask_ahead`, asks for the rows prefetch_rows_ahead_avx512 rows
// ahead of the one it computes (the dot_rows_i8 entry); without, leaves that to the caller
// (dot_rows_i8_prefetched).
template <bool ask_ahead>
void dot_rows_i8_avx512bw(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                          const std::uint32_t* rows, std::size_t count_rows, std::size_t dim,
                          std::int32_t* out) noexcept {
    auto row = [&](std::size_t j) noexcept { return base + std::size_t(rows[j]) * stride_bytes; };
    if constexpr (ask_ahead) {
        std::size_t lead = count_rows < prefetch_rows_ahead_avx512 ? count_rows : prefetch_rows_ahead_avx512;
        for (std::size_t j = 0; j < lead; ++j) prefetch_row_avx512(row(j), dim);
    }
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        if constexpr (ask_ahead)
            for (std::size_t j = i + prefetch_rows_ahead_avx512; j < i + prefetch_rows_ahead_avx512 + 4 && j < count_rows;
                 ++j)
                prefetch_row_avx512(row(j), dim);
        dot4_i8_avx512bw(query, row(i), row(i + 1), row(i + 2), row(i + 3), dim, out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot_i8_avx512bw(query, row(i), dim);
}

void scan_i8_avx512bw(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                      std::size_t count_rows, std::size_t dim, std::int32_t* out) noexcept {
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        const std::int8_t* r0 = base + i * stride_bytes;
        dot4_i8_avx512bw(query, r0, r0 + stride_bytes, r0 + 2 * stride_bytes, r0 + 3 * stride_bytes, dim, out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot_i8_avx512bw(query, base + i * stride_bytes, dim);
}

constexpr kernel_table_t avx512_kernels{"avx512", &dot_i8_avx512bw,
                                        &dot_rows_i8_avx512bw<true>, &dot_rows_i8_avx512bw<false>,
                                        &scan_i8_avx512bw};

}  // namespace

const kernel_table_t* avx512_table() noexcept { return &avx512_kernels; }

}  // namespace vecgraph::simd
