// Immutable CSR adjacency (out and in) over dense node ids.
//
// For node u, out-edges are out().entries[out().offsets[u], out().offsets[u+1]) (AdjEntry:
// neighbour, edge id, weight, rel); in-edges likewise in in().
// Within one node the entries are ordered by (weight descending, edge id ascending): that is
// the order in which traversal expands them, so "the first max_fanout allowed edges" is a
// prefix walk. Built from an edge list in O(V + E) by counting sort on the endpoint, plus a
// stable per-node sort by weight that is skipped where a node's weights are already ordered
// (all equal, the common case).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vecgraph/detail/huge_pages.hpp"
#include "vecgraph/types.hpp"

namespace vecgraph {

/// Columns of the edge list a CSR is built from (edge id = position).
struct EdgeColumns {
    const node_id_t* src = nullptr;
    const node_id_t* dst = nullptr;
    const rel_id_t* rel = nullptr;
    const float* weight = nullptr;
    std::size_t count = 0;
    const std::uint8_t* dead = nullptr;  // nullptr, or one flag per edge: flagged edges are left out
};

/// One adjacency entry: everything traversal reads about an edge, in one 16-byte record, so
/// expanding a node touches one run of memory rather than four parallel arrays.
struct AdjEntry {
    node_id_t neighbor;
    edge_id_t edge;
    float weight;
    rel_id_t rel;
};
static_assert(sizeof(AdjEntry) == 16, "AdjEntry must stay 16 bytes (four per cache line)");

/// One direction's adjacency: node u's entries are entries[offsets[u], offsets[u + 1]).
struct Adjacency {
    // On huge pages: traversal reads both at random.
    detail::huge_vector<std::uint32_t> offsets;  // count_nodes + 1
    detail::huge_vector<AdjEntry> entries;

    std::size_t degree(node_id_t u) const noexcept {
        return u + 1 < offsets.size() ? offsets[u + 1] - offsets[u] : 0;
    }
    std::size_t memory_bytes() const noexcept {
        return offsets.capacity() * sizeof(std::uint32_t) + entries.capacity() * sizeof(AdjEntry);
    }
};

class CsrGraph {
  public:
    CsrGraph() = default;
    /// Builds out- and in-adjacency for nodes [0, count_nodes); every endpoint must be < count_nodes.
    /// Edge ids stay the positions in `edges`; edges flagged dead are left out.
    static CsrGraph build(std::size_t count_nodes, const EdgeColumns& edges);

    std::size_t count_nodes() const noexcept { return count_nodes_; }
    std::size_t count_edges() const noexcept { return count_edges_; }
    const Adjacency& out() const noexcept { return out_; }
    const Adjacency& in() const noexcept { return in_; }
    std::size_t memory_bytes() const noexcept { return out_.memory_bytes() + in_.memory_bytes(); }

  private:
    std::size_t count_nodes_ = 0;
    std::size_t count_edges_ = 0;
    Adjacency out_;
    Adjacency in_;
};

}  // namespace vecgraph
