// HNSW seed index over the int8 store (see seed_index.hpp).
#include "vecgraph/seed_index.hpp"

#include <algorithm>
#include <atomic>
#include <string>
#include <mutex>
#include <thread>

#include <usearch/index.hpp>

#include "vecgraph/simd/kernels.hpp"



namespace vecgraph {

namespace us = unum::usearch;
using hnsw_t = us::index_gt<float, std::uint64_t, std::uint32_t>;

namespace {

struct row_ref_t {
    const std::int8_t* codes;
    float scale;
    float sq_norm;
};

// Distance = -score, so that smaller is closer for every metric.
struct metric_t {
    const VectorStore* store;
    const std::vector<node_id_t>* slot_to_node;
    simd::dot_i8_fn dot;

    row_ref_t ref(const row_ref_t& row) const noexcept { return row; }
    template <typename entry_at>
    row_ref_t ref(const entry_at& entry) const noexcept {
        node_id_t node = (*slot_to_node)[static_cast<std::size_t>(get_slot(entry))];
        return {store->codes(node), store->scale(node), store->sq_norm(node)};
    }
    template <typename a_at, typename b_at>
    float operator()(const a_at& a, const b_at& b) const noexcept {
        row_ref_t x = ref(a), y = ref(b);
        std::int32_t product = dot(x.codes, y.codes, store->dim());
        return -score_from_dot(store->metric(), product, x.scale, x.sq_norm, y.scale, y.sq_norm);
    }
};

std::string take_error(us::error_t& error) {
    const char* message = error.release();
    return message ? message : "unknown error";
}

}  // namespace

struct SeedIndex::Impl {
    hnsw_t index;
    std::vector<node_id_t> slot_to_node;
    std::size_t count_contexts;
};

SeedIndex::SeedIndex(const VectorStore& store, HnswParams params, std::size_t count_contexts)
    : store_(store), params_(params), impl_(new Impl{hnsw_t(us::index_config_t(params.connectivity)), {}, count_contexts}) {}

SeedIndex::~SeedIndex() = default;

std::size_t SeedIndex::size() const noexcept { return impl_->index.size(); }

std::size_t SeedIndex::memory_bytes() const noexcept {
    return impl_->index.memory_usage() + impl_->slot_to_node.capacity() * sizeof(node_id_t);
}

Status SeedIndex::reserve_more(std::size_t count) {
    hnsw_t& index = impl_->index;
    std::size_t needed = index.size() + count;
    if (needed <= index.capacity()) return Status::OK();
    std::size_t capacity = std::max(needed, index.capacity() + index.capacity() / 2);
    if (!index.try_reserve(us::index_limits_t(capacity, impl_->count_contexts)))
        return Status::internal("HNSW index could not reserve " + std::to_string(capacity) + " members");
    impl_->slot_to_node.resize(capacity, invalid_id);
    return Status::OK();
}

Status SeedIndex::add_range(node_id_t first, std::size_t count, std::size_t threads, detail::ContextPool& contexts) {
    std::vector<node_id_t> nodes(count);
    for (std::size_t i = 0; i < count; ++i) nodes[i] = static_cast<node_id_t>(first + i);
    return add_nodes(nodes.data(), count, threads, contexts);
}

Status SeedIndex::add_nodes(const node_id_t* nodes, std::size_t count, std::size_t threads,
                            detail::ContextPool& contexts) {
    if (count == 0) return Status::OK();
    hnsw_t& index = impl_->index;
    if (index.size() + count > index.capacity()) return Status::internal("HNSW index: reserve_more was not called");
    metric_t metric{&store_, &impl_->slot_to_node, simd::active().dot_i8};
    threads = std::max<std::size_t>(1, std::min({threads, impl_->count_contexts, count / 256 + 1}));
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::string failure;
    std::mutex failure_mutex;
    auto worker = [&] {
        detail::ContextPool::Lease lease(contexts);
        us::index_update_config_t config;
        config.expansion = params_.expansion_add;
        config.thread = lease.slot();
        for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < count;) {
            node_id_t node = nodes[i];
            row_ref_t value{store_.codes(node), store_.scale(node), store_.sq_norm(node)};
            auto result = index.add(
                node, value, metric, config,
                [&](hnsw_t::member_ref_t member) { impl_->slot_to_node[member.slot] = node; });
            if (!result) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                failure = take_error(result.error);
                failed = true;
            }
        }
    };
    if (threads == 1) {
        worker();
    } else {
        std::vector<std::thread> pool;
        for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
        worker();
        for (auto& thread : pool) thread.join();
    }
    if (failed) return Status::internal("HNSW insert failed: " + failure);
    return Status::OK();
}

void SeedIndex::count_reindexed(std::size_t count) noexcept { count_reindexed_ += count; }

void SeedIndex::search(const QuantizedVector& query, std::size_t wanted, std::size_t expansion,
                       const NodeFilter* filter, const NodeColumns& columns, std::size_t context,
                       std::vector<ScoredNode>& out) const {
    out.clear();
    const hnsw_t& index = impl_->index;
    if (wanted == 0 || index.size() == 0) return;
    // USearch sizes its buffers by these: never more than the index holds.
    // A node indexed more than once (upserts) can come back twice: ask for enough to drop repeats.
    std::size_t asked = wanted;
    if (count_reindexed_) wanted += std::min(wanted, count_reindexed_);
    wanted = std::min(wanted, index.size());
    metric_t metric{&store_, &impl_->slot_to_node, simd::active().dot_i8};
    row_ref_t value{query.codes.data(), query.scale, query.sq_norm};
    us::index_search_config_t config;
    config.expansion = std::min(std::max(expansion ? expansion : params_.expansion_search, wanted), index.size());
    config.thread = context;
    auto collect = [&](auto&& result) {
        if (!result) {
            take_error(result.error);
            return;
        }
        for (std::size_t i = 0; i < result.size(); ++i) {
            auto match = result[i];
            out.push_back({static_cast<node_id_t>(match.member.key), -match.distance});
        }
    };
    if (filter && filter->needed(columns)) {
        const std::vector<node_id_t>& slots = impl_->slot_to_node;
        auto predicate = [&](hnsw_t::member_cref_t member) {
            return filter->admits(columns, slots[member.slot]);
        };
        collect(index.search(value, wanted, metric, config, predicate));
    } else {
        collect(index.search(value, wanted, metric, config));
    }
    std::sort(out.begin(), out.end(), [](const ScoredNode& a, const ScoredNode& b) {
        return a.score != b.score ? a.score > b.score : a.node < b.node;
    });
    if (count_reindexed_) {
        // Both members of an upserted node score the same (the metric reads the current row), so
        // after the sort its repeats are adjacent.
        out.erase(std::unique(out.begin(), out.end(),
                              [](const ScoredNode& a, const ScoredNode& b) { return a.node == b.node; }),
                  out.end());
        if (out.size() > asked) out.resize(asked);
    }
}

}  // namespace vecgraph
