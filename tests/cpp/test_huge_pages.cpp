// Huge-page memory: the std::allocator used by the row store and the CSR, and the arena that
// holds USearch's nodes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "check.hpp"
#include "vecgraph/detail/huge_pages.hpp"

using namespace vecgraph::detail;

namespace {
bool aligned_to(const void* address, std::size_t alignment) {
    return reinterpret_cast<std::uintptr_t>(address) % alignment == 0;
}
}  // namespace

TEST_CASE("blocks of at least 2 MiB start on a huge-page boundary, smaller ones on a cache line from the heap") {
    HugePageAllocator<std::uint32_t> allocator;
    const std::size_t huge_count = huge_page_bytes / sizeof(std::uint32_t);
    CHECK(!HugePageAllocator<std::uint32_t>::is_huge(huge_count - 1));
    CHECK(HugePageAllocator<std::uint32_t>::is_huge(huge_count));
    for (std::size_t count : {huge_count, huge_count + 1, 3 * huge_count + 7}) {
        std::uint32_t* block = allocator.allocate(count);
        CHECK(aligned_to(block, huge_page_bytes));
        CHECK_EQ(block[0], 0u);  // fresh mappings are zero-filled
        for (std::size_t i = 0; i < count; ++i) block[i] = static_cast<std::uint32_t>(i * 2654435761u);
        CHECK_EQ(block[count - 1], static_cast<std::uint32_t>((count - 1) * 2654435761u));
        allocator.deallocate(block, count);
    }
    std::uint32_t* small = allocator.allocate(16);
    CHECK(aligned_to(small, 64));
    for (std::uint32_t i = 0; i < 16; ++i) small[i] = i;
    CHECK_EQ(std::accumulate(small, small + 16, 0u), 120u);
    allocator.deallocate(small, 16);
}

TEST_CASE("a huge_vector keeps its contents across growth past the threshold and equals std::vector") {
    huge_vector<std::int32_t> grown;
    std::vector<std::int32_t> expected;
    for (std::int32_t i = 0; i < 1'500'000; ++i) {  // 6 MB: several reallocations across 2 MiB
        grown.push_back(i * 7 - 3);
        expected.push_back(i * 7 - 3);
    }
    CHECK(std::equal(grown.begin(), grown.end(), expected.begin(), expected.end()));
    CHECK(aligned_to(grown.data(), huge_page_bytes));
    huge_vector<std::int32_t> moved = std::move(grown);
    CHECK_EQ(moved.size(), expected.size());
    CHECK_EQ(moved.back(), expected.back());
    moved.resize(10);
    moved.shrink_to_fit();  // back below the threshold: a heap block
    CHECK_EQ(moved.size(), std::size_t(10));
    CHECK_EQ(moved[9], 9 * 7 - 3);
}

TEST_CASE("the arena hands out 64-byte aligned, disjoint blocks from any thread and resets to empty") {
    HugePageArena arena;
    CHECK_EQ(arena.total_reserved(), std::size_t(0));
    const std::size_t per_thread = 40'000, threads = 4;  // ~10 MB of 66-byte blocks: several arenas
    std::vector<std::vector<char*>> blocks(threads);
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (std::size_t i = 0; i < per_thread; ++i) {
                char* block = arena.allocate(66);
                if (!block) break;
                std::memset(block, static_cast<int>(t + 1), 66);
                blocks[t].push_back(block);
            }
        });
    for (auto& thread : pool) thread.join();
    std::set<char*> distinct;
    for (std::size_t t = 0; t < threads; ++t) {
        REQUIRE(blocks[t].size() == per_thread);
        for (char* block : blocks[t]) {
            CHECK(aligned_to(block, HugePageArena::alignment_bytes));
            // every byte still holds what its own thread wrote: no two blocks overlap
            CHECK(std::all_of(block, block + 66, [&](char c) { return c == static_cast<char>(t + 1); }));
            distinct.insert(block);
        }
    }
    CHECK_EQ(distinct.size(), per_thread * threads);
    CHECK(arena.total_reserved() >= per_thread * threads * 128);
    CHECK(arena.total_reserved() % huge_page_bytes == 0);

    char* big = arena.allocate(100u << 20);  // larger than any arena: gets one of its own
    REQUIRE(big != nullptr);
    big[(100u << 20) - 1] = 5;
    CHECK_EQ(int(big[(100u << 20) - 1]), 5);

    arena.deallocate(blocks[0][0], 66);  // one node: kept until reset
    CHECK(arena.total_reserved() > 0);
    CHECK_EQ(int(blocks[0][0][0]), 1);
    arena.deallocate(nullptr, 0);  // USearch's clear(): everything goes
    CHECK_EQ(arena.total_reserved(), std::size_t(0));
    char* again = arena.allocate(10);
    REQUIRE(again != nullptr);
    CHECK_EQ(arena.total_reserved(), HugePageArena::first_arena_bytes);
}

TEST_CASE("moving an arena moves its blocks; copying yields an empty arena") {
    HugePageArena source;
    char* block = source.allocate(100);
    REQUIRE(block != nullptr);
    std::memcpy(block, "vecgraph", 9);
    HugePageArena moved(std::move(source));
    CHECK_EQ(source.total_reserved(), std::size_t(0));
    CHECK_EQ(moved.total_reserved(), HugePageArena::first_arena_bytes);
    CHECK(std::strcmp(block, "vecgraph") == 0);
    HugePageArena copy(moved);
    CHECK_EQ(copy.total_reserved(), std::size_t(0));
    char* next = moved.allocate(10);
    CHECK(next == block + 128);  // the bump pointer moved with the arena
}

TEST_MAIN()
