// The delta graph: the edges added since the base CSR was built, and how traversal reads the
// base CSR and the delta as one graph.
//
// The engine keeps two adjacencies (engine.hpp, "Delta graph and compaction"): the immutable
// base CSR (csr_graph.hpp) of the edges [0, base edges) that were live when it was built, and
// the delta (DeltaAdjacency) of the edges added since, each node's lists kept in the CSR's
// (weight desc, edge id asc) order. Traversal merges a node's base run with its delta run
// (detail::EdgeRun), so a node's edges come in the order a CSR built over all of them would
// hold. A deleted edge stays where it is until the next build; traversal skips it through the
// edge tombstones (GraphView::edge_dead).
//
// Compaction's hand-off: the next CSR is built off to the side from the edge columns as they
// stood at some edge count (searches keep reading the current base and delta), then installed
// together with a new delta holding the edges added while it was built (DeltaAdjacency::rebased);
// the engine swaps both in under its exclusive lock. A search sees the old pair or the new one,
// and both give the same merged view; deleted edges are left out of the new CSR.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vecgraph/csr_graph.hpp"
#include "vecgraph/types.hpp"

namespace vecgraph {

/// Traversal order of two adjacency entries: weight descending, then edge id ascending.
inline bool comes_before(const AdjEntry& a, const AdjEntry& b) noexcept {
    return a.weight > b.weight || (a.weight == b.weight && a.edge < b.edge);
}

/// Edges added since the base CSR was built (the delta graph): per node with delta edges, its
/// out- and in-lists kept in traversal order. A node finds its lists through one 4-byte slot
/// indexed by node id (0: no delta edges), so a node without delta edges costs one read and an
/// added edge costs two array reads, never a hash lookup.
struct DeltaAdjacency {
    struct Lists {
        node_id_t node = invalid_id;
        std::vector<AdjEntry> out, in;
    };
    // One slot per node row: the engine grows it with its node columns, so that add() can index
    // it by either endpoint.
    std::vector<std::uint32_t> slot;  // indexed by node id: 0, or 1 + the index of its Lists
    std::vector<Lists> lists;
    std::size_t count_edges = 0;

    /// The delta lists of node u, or nullptr when u has no delta edges.
    const Lists* lists_at(node_id_t u) const noexcept {
        const std::uint32_t s = u < slot.size() ? slot[u] : 0;
        return s ? &lists[s - 1] : nullptr;
    }
    /// Adds edge `edge` (src and dst below slot.size()) to src's out-list and dst's in-list.
    void add(node_id_t src, node_id_t dst, edge_id_t edge, float weight, rel_id_t rel) {
        insert(lists_of(src).out, AdjEntry{dst, edge, weight, rel});
        insert(lists_of(dst).in, AdjEntry{src, edge, weight, rel});
        ++count_edges;
    }
    /// Adds the edges [first, edges.count) of `edges` (edge id = position). Their dead flags are
    /// not read: traversal skips deleted edges through the tombstones.
    void add_range(const EdgeColumns& edges, std::size_t first) {
        for (std::size_t e = first; e < edges.count; ++e)
            add(edges.src[e], edges.dst[e], static_cast<edge_id_t>(e), edges.weight[e], edges.rel[e]);
    }
    /// Compaction's hand-off: the delta to install beside a new base CSR built from the edges
    /// [0, base_edges) of `edges`, holding the later ones (added while it was built), with this
    /// delta's slots (their count and capacity, both cleared).
    DeltaAdjacency rebased(const EdgeColumns& edges, std::size_t base_edges) const;
    std::size_t memory_bytes() const noexcept {
        return slot.capacity() * sizeof(std::uint32_t) + lists.capacity() * sizeof(Lists) +
               count_edges * 2 * sizeof(AdjEntry);
    }

  private:
    Lists& lists_of(node_id_t u) {
        std::uint32_t& s = slot[u];
        if (!s) {
            lists.emplace_back().node = u;
            s = static_cast<std::uint32_t>(lists.size());
        }
        return lists[s - 1];
    }
    static void insert(std::vector<AdjEntry>& list, const AdjEntry& entry) {
        list.insert(std::upper_bound(list.begin(), list.end(), entry, comes_before), entry);
    }
};

/// What traversal reads: the immutable base CSR, the delta since it, and edge tombstones.
struct GraphView {
    const CsrGraph* base = nullptr;
    const DeltaAdjacency* delta = nullptr;  // nullptr: no delta
    const std::uint8_t* edge_dead = nullptr;  // one flag per edge id, or nullptr: no edge is deleted
};

namespace detail {
// One direction of a node's edges: the base CSR run and the delta run, merged in traversal order.
struct EdgeRun {
    const AdjEntry *a = nullptr, *a_end = nullptr, *b = nullptr, *b_end = nullptr;
    /// The run of node u in one direction: `adj` is the base CSR's out() or in(), read when
    /// `in_base` (u is below its node count); `list` the delta list of that direction, or nullptr.
    static EdgeRun of(const Adjacency& adj, bool in_base, node_id_t u, const std::vector<AdjEntry>* list) noexcept {
        EdgeRun run;
        if (in_base) {
            run.a = adj.entries.data() + adj.offsets[u];
            run.a_end = adj.entries.data() + adj.offsets[u + 1];
        }
        if (list) {
            run.b = list->data();
            run.b_end = list->data() + list->size();
        }
        return run;
    }
    bool empty() const noexcept { return a == a_end && b == b_end; }
    const AdjEntry* front() const noexcept {
        if (a == a_end) return b;
        if (b == b_end) return a;
        return comes_before(*b, *a) ? b : a;
    }
    void pop(const AdjEntry* taken) noexcept {
        if (taken == a) ++a;
        else ++b;
    }
};
}  // namespace detail

}  // namespace vecgraph
