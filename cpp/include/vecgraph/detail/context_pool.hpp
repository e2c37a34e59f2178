// A fixed set of per-thread context slots (HNSW search contexts and traversal scratch).
// A caller leases a slot for one operation; with every slot leased, the next caller waits.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace vecgraph::detail {

class ContextPool {
  public:
    explicit ContextPool(std::size_t count_slots) {
        for (std::size_t i = count_slots; i > 0; --i) free_.push_back(i - 1);
        count_slots_ = count_slots;
    }
    std::size_t count_slots() const noexcept { return count_slots_; }

    std::size_t acquire() {
        std::unique_lock<std::mutex> lock(mutex_);
        available_.wait(lock, [this] { return !free_.empty(); });
        std::size_t slot = free_.back();
        free_.pop_back();
        return slot;
    }
    void release(std::size_t slot) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            free_.push_back(slot);
        }
        available_.notify_one();
    }

    class Lease {
      public:
        explicit Lease(ContextPool& pool) : pool_(pool), slot_(pool.acquire()) {}
        ~Lease() { pool_.release(slot_); }
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        std::size_t slot() const noexcept { return slot_; }

      private:
        ContextPool& pool_;
        std::size_t slot_;
    };

  private:
    std::mutex mutex_;
    std::condition_variable available_;
    std::vector<std::size_t> free_;
    std::size_t count_slots_ = 0;
};

}  // namespace vecgraph::detail
