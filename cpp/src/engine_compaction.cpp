// Compaction (engine.hpp, "Delta graph and compaction"): the next base CSR, built off to the side
// and swapped in with its delta (DeltaAdjacency::rebased, delta_graph.hpp).
#include "vecgraph/engine.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

namespace vecgraph {

void Engine::install_base(CsrGraph next, std::size_t count_edges, const std::uint8_t* dead_at_build) {
    // The writer lock is held: the edge columns and the node count stay as they are. Edges
    // added while the CSR was built stay in a delta, made here before the engine lock, so that
    // running out of memory ends the compaction (std::bad_alloc) before it changes anything;
    // edges deleted meanwhile stay flagged in edge_dead_, which traversal checks.
    DeltaAdjacency delta = delta_.rebased(
        EdgeColumns{edge_src_.data(), edge_dst_.data(), edge_rels_.data(), edge_weights_.data(), edge_src_.size()},
        count_edges);
    std::size_t dead_since = 0;
    if (dead_at_build)
        for (std::size_t e = 0; e < count_edges; ++e) dead_since += edge_dead_[e] && !dead_at_build[e];
    CsrGraph old;  // freed after the lock is released (a large CSR's unmapping takes a while)
    auto lock = write_lock();
    old = std::exchange(csr_, std::move(next));
    std::swap(delta_, delta);  // the old delta is freed after the lock too
    base_edges_ = count_edges;
    dead_edges_since_compaction_ = dead_since;
    ++count_compactions_;
}

void Engine::rebuild_base() {
    // The writer lock is held, so the edge columns cannot change: build from them directly
    // while searches keep reading the current base and delta, then swap.
    EdgeColumns columns{edge_src_.data(), edge_dst_.data(), edge_rels_.data(), edge_weights_.data(), edge_src_.size(),
                        count_dead_edges_ ? edge_dead_.data() : nullptr};
    install_base(CsrGraph::build(keys_.count_ids(), columns), edge_src_.size(), nullptr);
}

Status Engine::compact() {
    std::lock_guard<std::mutex> one(compaction_mutex_);
    // Copy the edge columns under the writer lock (writes wait for a memcpy, not for the build).
    std::vector<node_id_t> src, dst;
    std::vector<rel_id_t> rels;
    std::vector<float> weights;
    std::vector<std::uint8_t> dead;
    std::size_t count_nodes = 0;
    {
        std::lock_guard<std::mutex> writer(writer_mutex_);
        if (delta_.count_edges == 0 && dead_edges_since_compaction_ == 0 && base_edges_ == edge_src_.size())
            return Status::OK();  // the base CSR already holds every edge
        count_nodes = keys_.count_ids();
        src = edge_src_;
        dst = edge_dst_;
        rels = edge_rels_;
        weights = edge_weights_;
        dead = edge_dead_;
    }
    EdgeColumns columns{src.data(), dst.data(), rels.data(), weights.data(), src.size(), dead.data()};
    CsrGraph next = CsrGraph::build(count_nodes, columns);
    std::lock_guard<std::mutex> writer(writer_mutex_);
    install_base(std::move(next), src.size(), dead.data());
    return Status::OK();
}

void Engine::maybe_start_compaction() {
    if (!config_.auto_compact_edges) return;
    std::size_t pending, base;
    {
        auto lock = read_lock();
        pending = delta_.count_edges + dead_edges_since_compaction_;
        base = csr_.count_edges();
    }
    if (pending < std::max(config_.auto_compact_edges, base / 8)) return;
    bool expected = false;
    if (!compaction_running_.compare_exchange_strong(expected, true)) return;
    std::lock_guard<std::mutex> hold(thread_mutex_);
    if (compaction_thread_.joinable()) compaction_thread_.join();  // finished: it cleared the flag last
    try {
        compaction_thread_ = std::thread([this] {
            // Out of memory, a background compaction gives up: it fails while copying the edge
            // columns, building the CSR or the delta that goes with it, before it changes
            // anything. The delta stays and is searched as before; a later write tries again.
            try {
                (void)compact();
            } catch (const std::bad_alloc&) {
            }
            compaction_running_.store(false);
        });
    } catch (const std::exception&) {
        compaction_running_.store(false);  // no thread (out of memory): a later write tries again
    }
}

void Engine::wait_for_compaction() {
    std::lock_guard<std::mutex> hold(thread_mutex_);
    if (compaction_thread_.joinable()) compaction_thread_.join();
}

}  // namespace vecgraph
