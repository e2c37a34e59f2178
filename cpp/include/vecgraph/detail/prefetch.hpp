// Software prefetch that the optimiser keeps.
//
// GCC's interprocedural pure-const analysis treats __builtin_prefetch as free of side effects:
// a helper whose only effect is prefetching is marked const and every call to it is deleted, so
// the prefetch never runs (seen with GCC 12 at -O2/-O3). The empty volatile asm after the
// prefetch is a side effect the compiler must keep, which keeps the helper's calls too.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vecgraph::detail {

constexpr std::size_t cache_line_bytes = 64;

namespace prefetch_impl {
// __builtin_prefetch's locality: 3 keeps the line in every level (prefetcht0 on x86), 2 in L2
// and below (prefetcht1).
template <int locality>
inline void line(const void* address) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address, 0, locality);
    __asm__ __volatile__("" ::: );
#else
    (void)address;
#endif
}

template <int locality>
inline void lines(const void* address, std::size_t count_bytes) noexcept {
    if (count_bytes == 0) return;
    const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(address);
    const std::uintptr_t first = start & ~std::uintptr_t(cache_line_bytes - 1);
    const std::uintptr_t last = (start + count_bytes - 1) & ~std::uintptr_t(cache_line_bytes - 1);
    for (std::uintptr_t at = first; at <= last; at += cache_line_bytes) line<locality>(reinterpret_cast<const void*>(at));
}
}  // namespace prefetch_impl

/// Asks for the cache line holding `address` (read, keep in all levels). Never faults.
inline void prefetch_read(const void* address) noexcept { prefetch_impl::line<3>(address); }

/// Asks for every cache line of [address, address + count_bytes).
inline void prefetch_bytes(const void* address, std::size_t count_bytes) noexcept {
    prefetch_impl::lines<3>(address, count_bytes);
}

/// Asks for every cache line of [address, address + count_bytes) into L2 and the levels below
/// it, not L1 (prefetcht1 on x86). For many lines at once, such as the rows of a batch of HNSW
/// neighbours: an L1 prefetch holds one of the core's few L1 miss buffers until its line arrives,
/// so a burst of them stalls the core, while L2 prefetches are handed on. Never faults.
inline void prefetch_bytes_l2(const void* address, std::size_t count_bytes) noexcept {
    prefetch_impl::lines<2>(address, count_bytes);
}

}  // namespace vecgraph::detail
