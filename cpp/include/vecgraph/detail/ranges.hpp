// Work spread over threads, exception-safe: an exception on any thread (out of memory, say)
// reaches the caller after every thread has been joined. (A std::thread whose function throws,
// or one destroyed while still joinable, ends the process through std::terminate.)
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace vecgraph::detail {

/// Runs fn() on `count` threads at once: count - 1 new ones and the calling thread, for workers
/// that take their items from a shared counter. A thread that cannot be started is left out
/// (the others do its share). Returns when every call has; then rethrows the first exception any
/// call threw.
template <typename fn_at>
void run_on_threads(std::size_t count, fn_at&& fn) {
    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto guarded = [&] {
        try {
            fn();
        } catch (...) {
            std::lock_guard<std::mutex> lock(failure_mutex);
            if (!failure) failure = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    try {
        pool.reserve(count > 1 ? count - 1 : 0);
        for (std::size_t t = 1; t < count; ++t) pool.emplace_back(guarded);
    } catch (...) {  // no memory or no thread left: fewer threads do the work
    }
    guarded();
    for (auto& thread : pool) thread.join();
    if (failure) std::rethrow_exception(failure);
}

/// Calls fn(part, begin, end) for `parts` contiguous ranges covering [0, count) (the last ones
/// may be empty), on up to `parts` threads (the calling thread among them); with one part, on
/// the calling thread. Returns when every call has; then rethrows the first exception any call
/// threw.
template <typename fn_at>
void for_each_range(std::size_t count, std::size_t parts, fn_at&& fn) {
    if (parts <= 1) return fn(std::size_t{0}, std::size_t{0}, count);
    const std::size_t chunk = (count + parts - 1) / parts;
    std::atomic<std::size_t> next{0};
    run_on_threads(parts, [&] {
        for (std::size_t part; (part = next.fetch_add(1)) < parts;)
            fn(part, std::min(count, part * chunk), std::min(count, (part + 1) * chunk));
    });
}

}  // namespace vecgraph::detail
