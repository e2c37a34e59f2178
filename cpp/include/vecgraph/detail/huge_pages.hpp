// Memory for the large arrays that searches read at random: int8 rows, CSR adjacency and the
// HNSW nodes.
//
// A search touches a few thousand rows spread over hundreds of megabytes. With 4 KiB pages
// nearly every one of those touches also misses the TLB and walks the page table; with 2 MiB
// pages the same arrays need 512 times fewer TLB entries. Linux backs anonymous memory with
// transparent huge pages only where it is asked to (`madvise(MADV_HUGEPAGE)`, the default
// "madvise" mode of /sys/kernel/mm/transparent_hugepage/enabled), so arrays of at least
// `huge_page_bytes` are mapped on a 2 MiB boundary and advised. The advice is a hint: where the
// kernel has no huge page to give, or on other systems, the memory is ordinary memory.
// Reference: Linux kernel documentation, admin-guide/mm/transhuge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace vecgraph::detail {

constexpr std::size_t huge_page_bytes = std::size_t(2) << 20;

inline std::size_t round_up_to_huge_page(std::size_t bytes) noexcept {
    return (bytes + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
}

/// Maps round_up_to_huge_page(bytes) zero-filled bytes aligned to 2 MiB and advises huge pages.
/// Throws std::bad_alloc when the memory cannot be mapped.
inline void* map_huge_pages(std::size_t bytes) {
    const std::size_t length = round_up_to_huge_page(bytes);
#if defined(__linux__)
    // Over-map by one huge page, then return the unaligned head and the tail to the system.
    void* mapped = ::mmap(nullptr, length + huge_page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(mapped);
    const std::uintptr_t aligned = (start + huge_page_bytes - 1) & ~std::uintptr_t(huge_page_bytes - 1);
    if (aligned > start) ::munmap(mapped, aligned - start);
    const std::uintptr_t end = start + length + huge_page_bytes;
    if (end > aligned + length) ::munmap(reinterpret_cast<void*>(aligned + length), end - (aligned + length));
#if defined(MADV_HUGEPAGE)
    ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint; failure changes nothing
#endif
    return reinterpret_cast<void*>(aligned);
#else
    return ::operator new(length, std::align_val_t(huge_page_bytes));
#endif
}

/// Returns memory from map_huge_pages(bytes) (the same `bytes`).
inline void unmap_huge_pages(void* address, std::size_t bytes) noexcept {
    if (!address) return;
#if defined(__linux__)
    ::munmap(address, round_up_to_huge_page(bytes));
#else
    ::operator delete(address, std::align_val_t(huge_page_bytes));
#endif
}

/// While a NullOnFailureScope lives on a thread, HugePageAllocator returns nullptr there instead
/// of throwing std::bad_alloc. For calls into USearch functions that are noexcept and check every
/// allocation they make (index_gt::try_reserve), where a throw would end the process. (Not for
/// index_gt::add, which goes on after some failed allocations.)
inline thread_local bool allocations_return_null = false;

class NullOnFailureScope {
  public:
    NullOnFailureScope() noexcept : saved_(allocations_return_null) { allocations_return_null = true; }
    ~NullOnFailureScope() { allocations_return_null = saved_; }
    NullOnFailureScope(const NullOnFailureScope&) = delete;
    NullOnFailureScope& operator=(const NullOnFailureScope&) = delete;

  private:
    bool saved_;
};

/// std::allocator that puts blocks of at least huge_page_bytes on huge pages (map_huge_pages)
/// and smaller ones on the heap. Stateless: any two instances are equal.
template <typename T>
struct HugePageAllocator {
    using value_type = T;
    using size_type = std::size_t;
    using pointer = T*;
    using is_always_equal = std::true_type;
    template <typename U>
    struct rebind {
        using other = HugePageAllocator<U>;
    };

    HugePageAllocator() noexcept = default;
    template <typename U>
    HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

    static bool is_huge(std::size_t count) noexcept { return count >= huge_page_bytes / sizeof(T); }
    /// Blocks below a huge page come from the heap on a cache-line boundary (so the first of
    /// a VectorStore's rows, and with it every row, starts on a line in small graphs too).
    static constexpr std::size_t small_alignment_bytes = 64;

    T* allocate(std::size_t count) {
        if (!allocations_return_null) return allocate_or_throw(count);
        try {
            return allocate_or_throw(count);
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
    }
    void deallocate(T* address, std::size_t count) noexcept {
        if (!address) return;
        if (is_huge(count))
            unmap_huge_pages(address, count * sizeof(T));
        else
            ::operator delete(address, std::align_val_t(small_alignment_bytes));
    }

    template <typename U>
    bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
    template <typename U>
    bool operator!=(const HugePageAllocator<U>&) const noexcept { return false; }

  private:
    static T* allocate_or_throw(std::size_t count) {
        if (count > std::size_t(-1) / sizeof(T)) throw std::bad_alloc();
        if (is_huge(count)) return static_cast<T*>(map_huge_pages(count * sizeof(T)));
        return static_cast<T*>(::operator new(count * sizeof(T), std::align_val_t(small_alignment_bytes)));
    }
};

template <typename T>
using huge_vector = std::vector<T, HugePageAllocator<T>>;

/// Bump allocator for USearch's node tape: nodes are carved, 64-byte aligned, from arenas on
/// huge pages (2 MiB first, doubling up to 64 MiB), so the nodes of one index share few pages and
/// one insert's allocation is a pointer bump. Single nodes are never returned; `reset()` (also
/// what USearch's `clear()` calls, as `deallocate(nullptr, 0)`) returns every arena. Allocation is
/// thread-safe. Copying yields an empty arena (USearch copies allocators only to fork an index).
class HugePageArena {
  public:
    using value_type = char;  // USearch's byte type
    using size_type = std::size_t;
    using pointer = char*;
    using const_pointer = const char*;

    static constexpr std::size_t alignment_bytes = 64;
    static constexpr std::size_t first_arena_bytes = huge_page_bytes;
    static constexpr std::size_t max_arena_bytes = std::size_t(64) << 20;

    HugePageArena() noexcept = default;
    HugePageArena(const HugePageArena&) noexcept {}
    HugePageArena& operator=(const HugePageArena& other) noexcept {
        if (this != &other) reset();
        return *this;
    }
    HugePageArena(HugePageArena&& other) noexcept { take(other); }
    HugePageArena& operator=(HugePageArena&& other) noexcept {
        if (this != &other) {
            reset();
            take(other);
        }
        return *this;
    }
    ~HugePageArena() { reset(); }

    /// `count_bytes` uninitialised bytes, 64-byte aligned; nullptr when no memory can be mapped.
    char* allocate(std::size_t count_bytes) noexcept {
        const std::size_t needed = (count_bytes + alignment_bytes - 1) & ~(alignment_bytes - 1);
        std::lock_guard<std::mutex> lock(mutex_);
        if (arenas_.empty() || used_ + needed > arenas_.back().bytes) {
            std::size_t bytes = arenas_.empty() ? first_arena_bytes : arenas_.back().bytes * 2;
            if (bytes > max_arena_bytes) bytes = max_arena_bytes;
            if (bytes < needed) bytes = round_up_to_huge_page(needed);
            try {
                arenas_.reserve(arenas_.size() + 1);
                arenas_.push_back({static_cast<char*>(map_huge_pages(bytes)), bytes});
            } catch (const std::bad_alloc&) {
                return nullptr;
            }
            reserved_ += bytes;
            used_ = 0;
        }
        char* address = arenas_.back().base + used_;
        used_ += needed;
        return address;
    }
    /// A single node is kept until reset(); (nullptr, 0) is USearch's "free everything".
    void deallocate(char* address = nullptr, std::size_t = 0) noexcept {
        if (!address) reset();
    }
    void reset() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const Arena& arena : arenas_) unmap_huge_pages(arena.base, arena.bytes);
        arenas_.clear();
        used_ = 0;
        reserved_ = 0;
    }
    /// Bytes mapped for arenas (touched or not).
    std::size_t total_reserved() const noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        return reserved_;
    }

  private:
    struct Arena {
        char* base;
        std::size_t bytes;
    };
    void take(HugePageArena& other) noexcept {
        std::lock_guard<std::mutex> lock(other.mutex_);
        arenas_.swap(other.arenas_);
        used_ = other.used_;
        reserved_ = other.reserved_;
        other.used_ = 0;
        other.reserved_ = 0;
    }

    mutable std::mutex mutex_;
    std::vector<Arena> arenas_;
    std::size_t used_ = 0;
    std::size_t reserved_ = 0;
};

}  // namespace vecgraph::detail
