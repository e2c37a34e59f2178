// AVX2 int8 dot-product kernels: int8 lanes are sign-extended to int16 (vpmovsxbw), multiplied and summed in
// pairs to int32 (vpmaddwd) and accumulated in int32 lanes, which is exact. Dims that are not a multiple of 16
// finish with one 8-lane SSE step and at most 7 scalar products; nothing is read past `dim`.
#include <immintrin.h>

#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph::simd {
namespace {

// Gathered rows are prefetched this many rows ahead of the row being computed (a multiple of 4).
constexpr std::size_t prefetch_rows_ahead_avx2 = 8;

inline __m256i load_i8x16_as_i16_avx2(const std::int8_t* p) noexcept {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m128i load_i8x8_as_i16_avx2(const std::int8_t* p) noexcept {
    return _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

inline std::uint32_t dot_scalar_i8_avx2(const std::int8_t* a, const std::int8_t* b, std::size_t begin,
                                        std::size_t end) noexcept {
    std::uint32_t sum = 0;
    for (std::size_t i = begin; i < end; ++i) sum += std::uint32_t(std::int32_t(a[i]) * std::int32_t(b[i]));
    return sum;
}

inline __m128i fold_i32x8_avx2(__m256i v) noexcept {
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

inline std::uint32_t reduce_i32x4_avx2(__m128i v) noexcept {
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return std::uint32_t(_mm_cvtsi128_si32(v));
}

// {sum(a), sum(b), sum(c), sum(d)} of four int32x4 vectors.
inline __m128i reduce4_i32x4_avx2(__m128i a, __m128i b, __m128i c, __m128i d) noexcept {
    __m128i ab = _mm_add_epi32(_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
    __m128i cd = _mm_add_epi32(_mm_unpacklo_epi32(c, d), _mm_unpackhi_epi32(c, d));
    return _mm_add_epi32(_mm_unpacklo_epi64(ab, cd), _mm_unpackhi_epi64(ab, cd));
}

inline void prefetch_row_avx2(const std::int8_t* row, std::size_t dim) noexcept { detail::prefetch_bytes_l2(row, dim); }

std::int32_t dot_i8_avx2(const std::int8_t* a, const std::int8_t* b, std::size_t dim) noexcept {
    __m256i acc0 = _mm256_setzero_si256();
    __m256i acc1 = _mm256_setzero_si256();
    std::size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(load_i8x16_as_i16_avx2(a + i), load_i8x16_as_i16_avx2(b + i)));
        acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(load_i8x16_as_i16_avx2(a + i + 16),
                                                        load_i8x16_as_i16_avx2(b + i + 16)));
    }
    if (i + 16 <= dim) {
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(load_i8x16_as_i16_avx2(a + i), load_i8x16_as_i16_avx2(b + i)));
        i += 16;
    }
    __m128i acc = fold_i32x8_avx2(_mm256_add_epi32(acc0, acc1));
    if (i + 8 <= dim) {
        acc = _mm_add_epi32(acc, _mm_madd_epi16(load_i8x8_as_i16_avx2(a + i), load_i8x8_as_i16_avx2(b + i)));
        i += 8;
    }
    return std::int32_t(reduce_i32x4_avx2(acc) + dot_scalar_i8_avx2(a, b, i, dim));
}

// out[0..3] = dot(query, r0..r3).
inline void dot4_i8_avx2(const std::int8_t* query, const std::int8_t* r0, const std::int8_t* r1,
                         const std::int8_t* r2, const std::int8_t* r3, std::size_t dim, std::int32_t* out) noexcept {
    __m256i acc0 = _mm256_setzero_si256();
    __m256i acc1 = _mm256_setzero_si256();
    __m256i acc2 = _mm256_setzero_si256();
    __m256i acc3 = _mm256_setzero_si256();
    std::size_t i = 0;
    for (; i + 16 <= dim; i += 16) {
        __m256i q = load_i8x16_as_i16_avx2(query + i);
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(q, load_i8x16_as_i16_avx2(r0 + i)));
        acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(q, load_i8x16_as_i16_avx2(r1 + i)));
        acc2 = _mm256_add_epi32(acc2, _mm256_madd_epi16(q, load_i8x16_as_i16_avx2(r2 + i)));
        acc3 = _mm256_add_epi32(acc3, _mm256_madd_epi16(q, load_i8x16_as_i16_avx2(r3 + i)));
    }
    __m128i s0 = fold_i32x8_avx2(acc0);
    __m128i s1 = fold_i32x8_avx2(acc1);
    __m128i s2 = fold_i32x8_avx2(acc2);
    __m128i s3 = fold_i32x8_avx2(acc3);
    if (i + 8 <= dim) {
        __m128i q = load_i8x8_as_i16_avx2(query + i);
        s0 = _mm_add_epi32(s0, _mm_madd_epi16(q, load_i8x8_as_i16_avx2(r0 + i)));
        s1 = _mm_add_epi32(s1, _mm_madd_epi16(q, load_i8x8_as_i16_avx2(r1 + i)));
        s2 = _mm_add_epi32(s2, _mm_madd_epi16(q, load_i8x8_as_i16_avx2(r2 + i)));
        s3 = _mm_add_epi32(s3, _mm_madd_epi16(q, load_i8x8_as_i16_avx2(r3 + i)));
        i += 8;
    }
    __m128i sums = reduce4_i32x4_avx2(s0, s1, s2, s3);
    if (i < dim) {
        sums = _mm_add_epi32(sums, _mm_setr_epi32(std::int32_t(dot_scalar_i8_avx2(query, r0, i, dim)),
                                                  std::int32_t(dot_scalar_i8_avx2(query, r1, i, dim)),
                                                  std::int32_t(dot_scalar_i8_avx2(query, r2, i, dim)),
                                                  std::int32_t(dot_scalar_i8_avx2(query, r3, i, dim))));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), sums);
}

// Dot products of gathered rows. With `ask_ahead`, asks for the rows prefetch_rows_ahead_avx2 rows
// ahead of the one it computes (the dot_rows_i8 entry); without, leaves that to the caller
// (dot_rows_i8_prefetched).
template <bool ask_ahead>
void dot_rows_i8_avx2(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                      const std::uint32_t* rows, std::size_t count_rows, std::size_t dim,
                      std::int32_t* out) noexcept {
    auto row = [&](std::size_t j) noexcept { return base + std::size_t(rows[j]) * stride_bytes; };
    if constexpr (ask_ahead) {
        std::size_t lead = count_rows < prefetch_rows_ahead_avx2 ? count_rows : prefetch_rows_ahead_avx2;
        for (std::size_t j = 0; j < lead; ++j) prefetch_row_avx2(row(j), dim);
    }
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        if constexpr (ask_ahead)
            for (std::size_t j = i + prefetch_rows_ahead_avx2; j < i + prefetch_rows_ahead_avx2 + 4 && j < count_rows; ++j)
                prefetch_row_avx2(row(j), dim);
        dot4_i8_avx2(query, row(i), row(i + 1), row(i + 2), row(i + 3), dim, out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot_i8_avx2(query, row(i), dim);
}

void scan_i8_avx2(const std::int8_t* query, const std::int8_t* base, std::size_t stride_bytes,
                  std::size_t count_rows, std::size_t dim, std::int32_t* out) noexcept {
    std::size_t i = 0;
    for (; i + 4 <= count_rows; i += 4) {
        const std::int8_t* r0 = base + i * stride_bytes;
        dot4_i8_avx2(query, r0, r0 + stride_bytes, r0 + 2 * stride_bytes, r0 + 3 * stride_bytes, dim, out + i);
    }
    for (; i < count_rows; ++i) out[i] = dot_i8_avx2(query, base + i * stride_bytes, dim);
}

constexpr kernel_table_t avx2_kernels{"avx2", &dot_i8_avx2,
                                      &dot_rows_i8_avx2<true>, &dot_rows_i8_avx2<false>,
                                      &scan_i8_avx2};

}  // namespace

const kernel_table_t* avx2_table() noexcept { return &avx2_kernels; }

}  // namespace vecgraph::simd
