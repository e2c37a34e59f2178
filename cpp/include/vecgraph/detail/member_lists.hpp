// Nodes by interned id (label or tenant): for each id, a list of the nodes that have it and the
// count of those that are live. A search whose label or tenant filter admits few nodes scans
// these lists instead of walking the HNSW graph (the same choice as Qdrant's payload-index
// cardinality estimate and Weaviate's flat-search cutoff).
//
// Invariant: every live node is in the list of its id at least once, and `live(id)` is exactly
// the number of live nodes with that id. A list may also hold stale entries: deleted nodes, nodes
// an upsert moved to another id, and repeats of a node that moved away and back. Readers check
// every entry against the node's columns and skip repeats; `prune` rewrites a list once its stale
// entries outnumber its live ones, so a list never holds more than 2 * live + prune_slack entries.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "vecgraph/types.hpp"

namespace vecgraph::detail {

class MemberLists {
  public:
    static constexpr std::size_t prune_slack = 64;

    /// A new live member `node` of `id`.
    void add(std::uint32_t id, node_id_t node) {
        if (id >= lists_.size()) {
            lists_.resize(id + 1);
            live_.resize(id + 1, 0);
        }
        lists_[id].push_back(node);
        ++live_[id];
    }
    /// A live member of `id` left it (deleted, or moved to another id by an upsert). `column`
    /// holds each node's current id and `dead` its tombstone, both already updated.
    void remove(std::uint32_t id, const std::uint32_t* column, const std::uint8_t* dead) {
        --live_[id];
        std::vector<node_id_t>& list = lists_[id];
        if (list.size() <= 2 * static_cast<std::size_t>(live_[id]) + prune_slack) return;
        // Rewrite: keep the live members, each once (a sort: entries may repeat).
        std::sort(list.begin(), list.end());
        list.erase(std::unique(list.begin(), list.end()), list.end());
        list.erase(std::remove_if(list.begin(), list.end(),
                                  [&](node_id_t node) { return dead[node] || column[node] != id; }),
                   list.end());
        list.shrink_to_fit();
    }
    /// Live nodes with `id` (0 for an id never seen).
    std::size_t live(std::uint32_t id) const noexcept { return id < live_.size() ? live_[id] : 0; }
    /// The list of `id`: every live member, possibly with stale entries (see above).
    const std::vector<node_id_t>& list(std::uint32_t id) const noexcept {
        static const std::vector<node_id_t> none;
        return id < lists_.size() ? lists_[id] : none;
    }
    std::size_t memory_bytes() const noexcept {
        std::size_t bytes = lists_.capacity() * sizeof(std::vector<node_id_t>) + live_.capacity() * sizeof(std::uint32_t);
        for (const auto& list : lists_) bytes += list.capacity() * sizeof(node_id_t);
        return bytes;
    }

  private:
    std::vector<std::vector<node_id_t>> lists_;
    std::vector<std::uint32_t> live_;
};

}  // namespace vecgraph::detail
