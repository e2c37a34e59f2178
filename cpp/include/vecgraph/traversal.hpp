// Bounded breadth-first expansion from seed nodes, and int8 scoring of everything reached.
//
// The rules (README.md, "What `search` does"; tests/reference.py is the executable version):
//  * Seeds, best first, are visited at hop 0, up to max_visited of them.
//  * Level by level up to `hops`: the nodes of level h-1, in the order they were visited, expand
//    their allowed edges (rel allowed, direction allowed) in (weight desc, edge id asc) order,
//    at most the first `max_fanout` of them. Under direction "both" a node's out- and in-edges
//    are merged in that order and a self-loop counts once.
//  * A neighbour is visited the first time it is reached, if the node filter admits it; a node
//    the filter rejects is neither scored nor expanded. Once max_visited nodes are visited,
//    expansion stops.
//  * Every visited node is scored against the query with the int8 kernels, then decayed by
//    d = float(hop_decay^hop): score * d when score >= 0, score / d when negative (so that a
//    decay below 1 always moves a farther node down, also for l2's negative scores);
//    the result is the top k by (score desc, node id asc), each with its hop and the edge
//    through which it was first reached (its BFS-tree parent edge).
// All buffers live in TraversalScratch, one per context slot: no allocation per query once
// the scratch has grown to the graph's size. The visited set is a bitset over node ids (one bit
// a node: 12.5 KiB at 100k nodes, so its random probes stay in L1/L2); a query clears only the
// bits the previous query set.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vecgraph/csr_graph.hpp"
#include "vecgraph/delta_graph.hpp"
#include "vecgraph/node_filter.hpp"
#include "vecgraph/seed_index.hpp"
#include "vecgraph/types.hpp"
#include "vecgraph/vector_store.hpp"

namespace vecgraph {

struct TraversalParams {
    std::size_t k = 10;
    std::size_t hops = 2;
    std::size_t max_visited = 2000;
    std::size_t max_fanout = 256;
    Direction direction = Direction::both;
    const std::vector<std::uint8_t>* rel_ok = nullptr;  // indexed by rel id; nullptr admits every rel
    double hop_decay = 1.0;  // per-hop decay d = float(hop_decay ** hop): score * d, or score / d if negative
    /// Nodes nearer than this many hops to their seed are walked through but not returned.
    std::size_t min_hop = 0;
    /// Seed-propagated scoring (nullptr: off): one weight per entry of TraversalScratch::seeds.
    /// A visited node then scores the weight of the seed its path starts from times
    /// float(hop_decay ** max(hop - 1, 0)), instead of its similarity to the query; equal
    /// scores are ordered by that similarity, then by node id.
    const std::vector<float>* seed_weights = nullptr;
};

struct Hit {
    node_id_t node;
    float score;
    std::uint32_t hop;
    std::uint32_t position;  // index in TraversalScratch::visited (for path_to)
};

struct TraversalScratch {
    std::vector<std::uint64_t> seen;     // visited bitset, indexed by node id
    std::vector<node_id_t> visited;      // visit order
    std::vector<std::uint32_t> visited_hops;
    std::vector<std::uint32_t> visited_parent;   // position of the node it was reached from; invalid_id for seeds
    std::vector<edge_id_t> visited_parent_edge;  // the edge it was reached through; invalid_id for seeds
    std::vector<std::int32_t> dots;
    std::vector<float> scores;
    std::vector<std::uint32_t> order;
    std::vector<float> decay_pow;        // float(hop_decay ** hop) for hop = 0..deepest visited
    std::vector<ScoredNode> seeds;
    std::vector<float> seed_weights;     // with seed-propagated scoring: one per entry of `seeds`
    std::vector<float> origin_weights;   // ... and the weight of each visited node's seed
    std::vector<float> similarities;     // ... and each visited node's similarity (the tie-break)
    std::vector<const std::vector<node_id_t>*> member_lists, member_lists_other;  // a filter's label or tenant lists
    std::vector<std::uint8_t> rel_ok;
    std::vector<edge_id_t> path;         // one hit's path while results are assembled
    NodeFilter filter;
    QuantizedVector query;

    /// Starts a new query over a graph of `count_nodes` nodes.
    void begin(std::size_t count_nodes);

    std::uint64_t* seen_word(node_id_t node) noexcept { return seen.data() + (node >> 6); }
    const std::uint64_t* seen_word(node_id_t node) const noexcept { return seen.data() + (node >> 6); }
    static std::uint64_t seen_bit(node_id_t node) noexcept { return std::uint64_t{1} << (node & 63); }
    bool is_visited(node_id_t node) const noexcept { return *seen_word(node) & seen_bit(node); }
    /// Marks `node` visited; false if it already was.
    bool visit(node_id_t node) noexcept {
        if (is_visited(node)) return false;
        *seen_word(node) |= seen_bit(node);
        return true;
    }
    /// Appends a node just marked by visit().
    void push_visited(node_id_t node, std::uint32_t hop, std::uint32_t parent, edge_id_t parent_edge) {
        visited.push_back(node);
        visited_hops.push_back(hop);
        visited_parent.push_back(parent);
        visited_parent_edge.push_back(parent_edge);
    }
};

/// Calls fn(neighbor, edge) for the allowed edges of node u in traversal order (weight desc,
/// edge id asc; base and delta merged, out- and in-lists merged under Direction::both, a
/// self-loop once; deleted edges skipped), at most params.max_fanout of them; stops early when
/// fn returns false, and then returns false.
template <typename fn_at>
bool for_each_allowed_edge(const GraphView& graph, node_id_t u, const TraversalParams& params, fn_at&& fn) {
    const CsrGraph& base = *graph.base;
    detail::EdgeRun out, in;
    const bool in_base = u < base.count_nodes();
    const DeltaAdjacency::Lists* delta = graph.delta ? graph.delta->lists_at(u) : nullptr;
    if (params.direction != Direction::in)
        out = detail::EdgeRun::of(base.out(), in_base, u, delta ? &delta->out : nullptr);
    if (params.direction != Direction::out)
        in = detail::EdgeRun::of(base.in(), in_base, u, delta ? &delta->in : nullptr);
    const std::uint8_t* rel_ok = params.rel_ok ? params.rel_ok->data() : nullptr;
    const std::uint8_t* edge_dead = graph.edge_dead;
    const bool both = params.direction == Direction::both;
    std::size_t budget = params.max_fanout;
    while (budget > 0) {
        const AdjEntry* x = out.empty() ? nullptr : out.front();
        const AdjEntry* y = in.empty() ? nullptr : in.front();
        bool take_out;
        if (x && y) take_out = x->weight > y->weight || (x->weight == y->weight && x->edge < y->edge);
        else if (x) take_out = true;
        else if (y) take_out = false;
        else break;
        const AdjEntry& entry = take_out ? *x : *y;
        if (take_out) out.pop(x);
        else in.pop(y);
        if (rel_ok && !rel_ok[entry.rel]) continue;
        if (edge_dead && edge_dead[entry.edge]) continue;
        if (both && !take_out && entry.neighbor == u) continue;  // self-loop, already taken from out
        --budget;
        if (!fn(entry.neighbor, entry.edge)) return false;
    }
    return true;
}

/// Expands from `seeds` and writes the top k hits (best first) to `hits`.
void traverse_and_score(const GraphView& graph, const VectorStore& store, const NodeColumns& columns,
                        const NodeFilter* filter, const TraversalParams& params, TraversalScratch& scratch,
                        std::vector<Hit>& hits);

/// Edge ids from the seed to the node visited at `position` (Hit::position), in walking order
/// (empty for a seed). Valid until the scratch starts another query.
void path_to(const TraversalScratch& scratch, std::uint32_t position, std::vector<edge_id_t>& path);

}  // namespace vecgraph
