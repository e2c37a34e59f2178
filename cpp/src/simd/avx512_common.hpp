// Helpers shared by the two AVX-512 kernel files (kernels_avx512.cpp, kernels_avx512_vnni.cpp).
// Private to them: include it only from a file compiled with AVX-512 flags. Everything here has
// internal linkage, so each file gets its own copy compiled with its own ISA flags (no ODR merge
// can hand a VNNI-compiled copy to the AVX-512BW table).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns about the deliberately undefined vectors inside its own AVX-512 intrinsics (GCC PR105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif


#include <cstddef>
#include <cstdint>

#include "vecgraph/detail/prefetch.hpp"

namespace vecgraph::simd {
namespace {

// Gathered rows are prefetched this many rows ahead of the row being computed (a multiple of 4).
constexpr std::size_t prefetch_rows_ahead_avx512 = 8;

inline __mmask32 tail_mask32_avx512(std::size_t n) noexcept { return __mmask32((std::uint32_t(1) << n) - 1); }
inline __mmask64 tail_mask64_avx512(std::size_t n) noexcept { return __mmask64((std::uint64_t(1) << n) - 1); }

inline void prefetch_row_avx512(const std::int8_t* row, std::size_t dim) noexcept { detail::prefetch_bytes_l2(row, dim); }

inline std::uint32_t reduce_i32x16_avx512(__m512i v) noexcept {
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return std::uint32_t(_mm_cvtsi128_si32(s));
}

// {sum(a), sum(b), sum(c), sum(d)} of four int32x16 vectors.
inline __m128i reduce4_i32x16_avx512(__m512i a, __m512i b, __m512i c, __m512i d) noexcept {
    __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    __m512i abcd = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(abcd), _mm512_extracti64x4_epi64(abcd, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

}  // namespace
}  // namespace vecgraph::simd
