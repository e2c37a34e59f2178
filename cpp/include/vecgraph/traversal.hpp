// Bounded breadth-first expansion from seed nodes, and int8 scoring of everything reached.
//
// The rules (DESIGN.md, "Search semantics"; tests/reference.py is the executable version):
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
// the scratch has grown to the graph's size (epoch-stamped visited marks need no clearing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vecgraph/csr_graph.hpp"
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
};

struct Hit {
    node_id_t node;
    float score;
    std::uint32_t hop;
};

struct TraversalScratch {
    struct Mark {
        std::uint32_t epoch;
        edge_id_t parent_edge;  // invalid_id for seeds
    };
    std::vector<Mark> marks;             // indexed by node id
    std::uint32_t epoch = 0;
    std::vector<node_id_t> visited;      // visit order
    std::vector<std::uint32_t> visited_hops;
    std::vector<std::int32_t> dots;
    std::vector<float> scores;
    std::vector<std::uint32_t> order;
    std::vector<float> decay_pow;        // float(hop_decay ** hop) for hop = 0..deepest visited
    std::vector<ScoredNode> seeds;
    std::vector<std::uint8_t> rel_ok;
    std::vector<edge_id_t> path;         // one hit's path while results are assembled
    NodeFilter filter;
    QuantizedVector query;

    /// Starts a new query over a graph of `count_nodes` nodes.
    void begin(std::size_t count_nodes);
};

/// Calls fn(neighbor, edge) for the allowed edges of node u in traversal order (weight desc,
/// edge id asc; out- and in-lists merged under Direction::both, a self-loop once), at most
/// params.max_fanout of them; stops early when fn returns false, and then returns false.
template <typename fn_at>
bool for_each_allowed_edge(const CsrGraph& graph, node_id_t u, const TraversalParams& params, fn_at&& fn) {
    if (u >= graph.count_nodes()) return true;
    const Adjacency& out = graph.out();
    const Adjacency& in = graph.in();
    const std::uint8_t* rel_ok = params.rel_ok ? params.rel_ok->data() : nullptr;
    std::size_t budget = params.max_fanout;
    std::uint32_t o = 0, o_end = 0, i = 0, i_end = 0;
    if (params.direction != Direction::in) o = out.offsets[u], o_end = out.offsets[u + 1];
    if (params.direction != Direction::out) i = in.offsets[u], i_end = in.offsets[u + 1];
    const bool both = params.direction == Direction::both;
    while (budget > 0) {
        bool take_out;
        if (o < o_end && i < i_end) {
            const AdjEntry& a = out.entries[o];
            const AdjEntry& b = in.entries[i];
            take_out = a.weight > b.weight || (a.weight == b.weight && a.edge < b.edge);
        } else if (o < o_end) {
            take_out = true;
        } else if (i < i_end) {
            take_out = false;
        } else {
            break;
        }
        const AdjEntry& entry = take_out ? out.entries[o++] : in.entries[i++];
        if (rel_ok && !rel_ok[entry.rel]) continue;
        if (both && !take_out && entry.neighbor == u) continue;  // self-loop, already taken from out
        --budget;
        if (!fn(entry.neighbor, entry.edge)) return false;
    }
    return true;
}

/// Expands from `seeds` and writes the top k hits (best first) to `hits`.
void traverse_and_score(const CsrGraph& graph, const VectorStore& store, const NodeColumns& columns,
                        const NodeFilter* filter, const TraversalParams& params, TraversalScratch& scratch,
                        std::vector<Hit>& hits);

/// Edge ids from the hit's seed to the hit, in walking order (empty for a seed). Valid until
/// the scratch starts another query. `edge_src` / `edge_dst` are the edge list columns.
void path_to(const TraversalScratch& scratch, node_id_t node, const node_id_t* edge_src, const node_id_t* edge_dst,
             std::vector<edge_id_t>& path);

}  // namespace vecgraph
