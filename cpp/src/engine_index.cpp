// HNSW inserts (engine.hpp): a write's inserts after it releases the writer lock, deferred
// indexing and its background pass, re-linking, and the seed-index files of snapshots.
#include "vecgraph/engine.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "engine_internal.hpp"

namespace vecgraph {

// ---------------------------------------------------------------------------------------------
// A write's HNSW inserts.

Status Engine::index_applied(const PreparedNodes& applied) {
    struct Done {  // however the inserts end, an exception included: close() and verify() wait for this
        Engine& engine;
        ~Done() {
            {
                std::lock_guard<std::mutex> guard(engine.in_flight_mutex_);
                --engine.inserts_in_flight_;
            }
            engine.in_flight_cv_.notify_all();
        }
    } done{*this};
    return insert_seeds(applied.to_index, applied.count_reindexed, false);
}

Status Engine::insert_seeds(const std::vector<node_id_t>& nodes, std::size_t reindexed, bool wait_for_relink,
                            std::size_t* added) {
    // Counted before the second members go in, so that searches beside the insert already drop
    // repeats (a count above the members there are only makes them ask for a few more).
    if (reindexed) seed_index_->count_reindexed(reindexed);
    std::shared_lock<std::shared_mutex> in_place(insert_mutex_);
    {
        std::shared_lock<std::shared_mutex> adding(hnsw_walk_mutex_);
        VG_RETURN_IF_ERROR(seed_index_->add_nodes(nodes.data(), nodes.size(), config_.threads, contexts_, added));
    }
    relink_unreachable_members(wait_for_relink);
    return Status::OK();
}

void Engine::wait_for_inserts_in_flight() const {
    std::unique_lock<std::mutex> guard(in_flight_mutex_);
    in_flight_cv_.wait(guard, [this] { return inserts_in_flight_ == 0; });
}

Status Engine::reserve_seed_index(std::size_t count, std::unique_lock<std::shared_mutex>& moving) {
    if (!moving.owns_lock()) {
        if (seed_index_->reserve_in_place(count)) return Status::OK();
        moving.lock();
    }
    return seed_index_->reserve_more(count);
}

void Engine::relink_unreachable_members(bool wait) {
    // Called with the read lock held and no walk lock: cheap when no insert ran beside another.
    if (!seed_index_->needs_relink()) return;
    // Without `wait`, an insert still running (the background pass beside a write) puts the
    // check off to that insert's own call here, which comes after it: suspects are recorded
    // under the walk lock held shared and taken under it held alone. Anything else holding
    // the walk lock is waited for.
    std::unique_lock<std::shared_mutex> still(hnsw_walk_mutex_, std::defer_lock);
    if (!wait && !still.try_lock()) {
        if (seed_index_->adds_running()) return;
        wait = true;
    }
    if (wait) still.lock();
    if (seed_index_->needs_relink()) seed_index_->relink_unreachable(contexts_, config_.threads);
}

// ---------------------------------------------------------------------------------------------
// Deferred indexing and the background pass.

void Engine::begin_deferral() {
    if (replaying_ || defer_index_) return;
    indexed_before_defer_ = keys_.count_ids();
    deferred_hnsw_.clear();
    deferred_reindexed_ = 0;
}

namespace {

// These two never throw, for the paths that record a failure after running out of memory: when
// the message cannot be allocated, the Status keeps its code and goes without one.
Status internal_error(const char* message) noexcept {
    try {
        return Status::internal(message);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::internal, std::string());
    }
}
Status copy_of(const Status& status) noexcept {
    try {
        return status;
    } catch (const std::bad_alloc&) {
        return Status(status.code(), std::string());
    }
}

}  // namespace

Status Engine::flush_deferred(std::size_t background_min) {
    std::vector<node_id_t> pending;
    pending.swap(deferred_hnsw_);
    std::size_t reindexed = deferred_reindexed_;
    deferred_reindexed_ = 0;
    pending.erase(std::remove_if(pending.begin(), pending.end(), [&](node_id_t n) { return node_dead_[n] != 0; }),
                  pending.end());
    if (pending.empty()) return Status::OK();
    if (pending.size() >= background_min) {
        start_background_index(std::move(pending), reindexed);
        return Status::OK();
    }
    // On failure the nodes stay pending as after a failed background pass (start_background_index
    // with the failure), also when all of them are in the index and only the relink after the
    // inserts failed: until it runs, a member can be unreachable, so they stay scanned. Out of
    // memory is rethrown (MemoryError).
    std::size_t added = 0;
    bool counted = false;  // insert_seeds counted `reindexed` (it does so before any insert)
    auto keep_pending = [&](const Status& failure) {
        start_background_index(std::move(pending), added + (counted ? 0 : reindexed), &failure);
    };
    try {
        Status status;
        {
            auto lock = write_lock();
            std::unique_lock<std::shared_mutex> moving(insert_mutex_, std::defer_lock);
            status = reserve_seed_index(pending.size(), moving);
        }
        if (status.ok()) {
            counted = true;
            status = insert_seeds(pending, reindexed, true, &added);
        }
        if (!status.ok()) keep_pending(status);
        return status;
    } catch (const std::bad_alloc&) {
        keep_pending(internal_error("out of memory while inserting the deferred nodes into the HNSW index"));
        throw;
    }
}

Status Engine::defer_indexing(bool on, std::size_t background_min) {
    if (on) VG_RETURN_IF_ERROR(wait_for_indexing());  // one kind of waiting at a time
    std::unique_lock<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    if (on) {
        begin_deferral();
        defer_index_ = true;
        return Status::OK();
    }
    if (!defer_index_) return Status::OK();
    defer_index_ = false;
    return flush_deferred(background_min);
}

void Engine::start_background_index(std::vector<node_id_t> nodes, std::size_t reindexed, const Status* failed) {
    // Called with the writer lock held and no pass running (defer_indexing(true) waits for it).
    join_background_index();
    std::sort(nodes.begin(), nodes.end());  // an upserted node may wait twice: once is enough
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    auto lock = write_lock();  // searches read background_.nodes while a pass runs
    std::lock_guard<std::mutex> guard(background_.mutex);
    background_.nodes = std::move(nodes);
    background_.stop.store(false);
    background_.done.store(0, std::memory_order_release);
    background_.running.store(true, std::memory_order_release);
    if (failed) {
        // The insert of these nodes failed (`failed`, the caller's to report): they wait as after
        // a failed pass, and the next wait_for_indexing runs one, counting `reindexed` then.
        background_.failed_added = reindexed;
        background_.failure_reported = true;
        background_.status = copy_of(*failed);
        return;
    }
    // Counted before the pass inserts the second members, for the whole pass (see insert_seeds).
    if (reindexed) seed_index_->count_reindexed(reindexed);
    background_.status = Status::OK();
    background_.failure_reported = false;
    background_.pass_active = true;
    try {
        background_.thread = std::thread([this] { background_index_pass(); });
    } catch (const std::exception&) {
        // No thread (out of memory, or the process's thread limit): the pass failed before it
        // began. Its nodes stay pending (searches scan them); the next wait reports it, and the
        // one after runs it again.
        background_.pass_active = false;
        background_.failed_added = 0;
        background_.status = internal_error("the background HNSW pass could not start its thread");
        background_.done_cv.notify_all();
    }
}

void Engine::background_index_pass() {
    // Inserts hold insert_mutex_ shared, not the engine lock: writes append beside them and wait
    // only when they move the row buffer or grow the index (then for the chunk in flight).
    constexpr std::size_t chunk = 256;
    const std::size_t total = background_.nodes.size();
    Status status;
    std::size_t chunk_added = 0;  // members added by the chunk in progress (set even when it throws)
    try {  // out of memory, the pass ends as after any failure
        std::vector<node_id_t> live;
        for (std::size_t begin = 0; begin < total && status.ok() && !background_.stop.load(); begin += chunk) {
            const std::size_t end = std::min(total, begin + chunk);
            live.clear();
            {
                auto lock = write_lock();  // reading node_dead_ and reserving exclude searches and writes
                std::unique_lock<std::shared_mutex> moving(insert_mutex_, std::defer_lock);
                for (std::size_t i = begin; i < end; ++i)
                    if (!node_dead_[background_.nodes[i]]) live.push_back(background_.nodes[i]);
                status = reserve_seed_index(live.size(), moving);
            }
            if (status.ok()) status = insert_seeds(live, 0, false, &chunk_added);
            if (status.ok()) {
                background_.done.store(end, std::memory_order_release);
                chunk_added = 0;
            }
        }
        if (status.ok()) {  // the chunks' checks may have been put off by writes beside the pass
            std::shared_lock<std::shared_mutex> in_place(insert_mutex_);
            relink_unreachable_members(true);
        }
    } catch (const std::bad_alloc&) {
        status = internal_error("out of memory while inserting nodes into the HNSW index in the background");
    }
    const bool complete = status.ok() && background_.done.load() == total;
    std::lock_guard<std::mutex> guard(background_.mutex);
    background_.status = std::move(status);
    background_.failed_added = background_.status.ok() ? 0 : chunk_added;
    // After a failure (or a stop) the nodes not reached stay pending: searches keep scanning them.
    if (complete) background_.running.store(false, std::memory_order_release);
    background_.pass_active = false;
    background_.done_cv.notify_all();
}

void Engine::stop_background_index() {
    background_.stop.store(true);
    join_background_index();
}

void Engine::join_background_index() {
    // Only start_background_index (writer lock held) and the destructor join.
    std::thread finished;
    {
        std::unique_lock<std::mutex> guard(background_.mutex);
        background_.done_cv.wait(guard, [this] { return !background_.pass_active; });
        finished.swap(background_.thread);
    }
    if (finished.joinable()) finished.join();
}

Status Engine::wait_for_indexing() {
    {
        std::unique_lock<std::mutex> guard(background_.mutex);
        background_.done_cv.wait(guard, [this] { return !background_.pass_active; });  // any number of waiters
        if (background_.status.ok() || !background_.failure_reported) {
            if (!background_.status.ok()) background_.failure_reported = true;
            return background_.status;
        }
    }
    {
        // The pass failed (out of memory) and a call has said so: run it again over the nodes it
        // did not reach. Those of the chunk it was inserting that are in the index already count
        // as indexed again (searches drop repeats).
        std::lock_guard<std::mutex> writer(writer_mutex_);
        std::vector<node_id_t> rest;
        std::size_t repeats = 0;
        bool restart = false;
        {
            std::unique_lock<std::mutex> guard(background_.mutex);
            background_.done_cv.wait(guard, [this] { return !background_.pass_active; });
            restart = !background_.status.ok() && background_.failure_reported && background_.running.load();
            if (restart) {
                const std::size_t done = std::min(background_.done.load(), background_.nodes.size());
                rest.assign(background_.nodes.begin() + static_cast<std::ptrdiff_t>(done), background_.nodes.end());
                repeats = background_.failed_added;
            }
        }
        if (restart) start_background_index(std::move(rest), repeats);
    }
    std::unique_lock<std::mutex> guard(background_.mutex);
    background_.done_cv.wait(guard, [this] { return !background_.pass_active; });
    if (!background_.status.ok()) background_.failure_reported = true;
    return background_.status;
}

std::size_t Engine::background_pending() const {
    return background_.running.load(std::memory_order_acquire)
               ? background_.nodes.size() - background_.done.load(std::memory_order_acquire)
               : 0;
}

std::size_t Engine::count_index_pending() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);  // a pass starts under it
    return background_pending() + deferred_hnsw_.size();
}

bool Engine::indexing_deferred() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    return defer_index_;
}

std::size_t Engine::count_deferred() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    return deferred_hnsw_.size();
}

// ---------------------------------------------------------------------------------------------
// Seed-index files and completeness.

Status Engine::save_seed_index(const std::string& path, bool* saved) {
    *saved = false;  // writes are paused by the caller (pause_writes holds writer_mutex_)
    if (count_dead_nodes_ || !deferred_hnsw_.empty() || background_.running.load() || seed_index_->count_reindexed() ||
        seed_index_->size() != keys_.count_ids())
        return Status::OK();
    auto lock = read_lock();
    std::unique_lock<std::shared_mutex> still(hnsw_walk_mutex_);  // no add in flight
    if (seed_index_->needs_relink()) seed_index_->relink_unreachable(contexts_, config_.threads);
    VG_RETURN_IF_ERROR(seed_index_->save(path));
    *saved = true;
    return Status::OK();
}

Status Engine::load_seed_index(const std::string& path) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    if (!defer_index_ || seed_index_->size() != 0 || deferred_reindexed_ || indexed_before_defer_ != 0 ||
        deferred_hnsw_.size() != keys_.count_ids() || count_dead_nodes_)
        return Status::invalid_argument(
            "load_seed_index needs deferred indexing and only freshly loaded nodes, none indexed or deleted");
    auto lock = write_lock();
    VG_RETURN_IF_ERROR(seed_index_->load(path, keys_.count_ids()));
    deferred_hnsw_.clear();
    indexed_before_defer_ = keys_.count_ids();
    return Status::OK();
}

bool Engine::seed_index_complete() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    return !count_dead_nodes_ && deferred_hnsw_.empty() && !background_.running.load() &&
           !seed_index_->count_reindexed() && seed_index_->size() == keys_.count_ids();
}

}  // namespace vecgraph
