// Work on [0, count) split into contiguous ranges, one thread per range.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace vecgraph::detail {

/// Calls fn(part, begin, end) for `parts` contiguous ranges covering [0, count) (the last ones
/// may be empty), each on its own thread; with one part, on the calling thread. Returns when
/// every call has.
template <typename fn_at>
void for_each_range(std::size_t count, std::size_t parts, fn_at&& fn) {
    if (parts <= 1) return fn(std::size_t{0}, std::size_t{0}, count);
    const std::size_t chunk = (count + parts - 1) / parts;
    std::vector<std::thread> pool;
    pool.reserve(parts);
    for (std::size_t part = 0; part < parts; ++part)
        pool.emplace_back([&fn, part, chunk, count] {
            fn(part, std::min(count, part * chunk), std::min(count, (part + 1) * chunk));
        });
    for (auto& thread : pool) thread.join();
}

}  // namespace vecgraph::detail
