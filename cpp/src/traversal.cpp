// Bounded BFS and int8 scoring (rules in traversal.hpp).
#include "vecgraph/traversal.hpp"

#include <algorithm>
#include <cmath>

#include "vecgraph/simd/kernels.hpp"

namespace vecgraph {

void TraversalScratch::begin(std::size_t count_nodes) {
    if (marks.size() < count_nodes) marks.resize(count_nodes + count_nodes / 4 + 16, Mark{0, invalid_id});
    if (++epoch == 0) {  // wrapped: old stamps could collide with new ones
        std::fill(marks.begin(), marks.end(), Mark{0, invalid_id});
        epoch = 1;
    }
    visited.clear();
    visited_hops.clear();
}

namespace {

// Visits `neighbor` through `edge` if it is new and admitted; returns false once max_visited is reached.
struct Visitor {
    TraversalScratch& scratch;
    const NodeColumns& columns;
    const NodeFilter* filter;
    std::size_t max_visited;
    std::uint32_t hop;

    bool operator()(node_id_t neighbor, edge_id_t edge) const {
        TraversalScratch::Mark& mark = scratch.marks[neighbor];
        if (mark.epoch == scratch.epoch) return true;
        if (filter && !filter->admits(columns, neighbor)) return true;
        mark.epoch = scratch.epoch;
        mark.parent_edge = edge;
        scratch.visited.push_back(neighbor);
        scratch.visited_hops.push_back(hop);
        return scratch.visited.size() < max_visited;
    }
};

// Top k of `count` scored nodes by (score desc, node id asc), as positions in `order`.
void select_top_k(const node_id_t* nodes, const float* scores, std::size_t count, std::size_t k,
                  std::vector<std::uint32_t>& order) {
    order.resize(count);
    for (std::uint32_t i = 0; i < count; ++i) order[i] = i;
    auto better = [&](std::uint32_t a, std::uint32_t b) {
        return scores[a] != scores[b] ? scores[a] > scores[b] : nodes[a] < nodes[b];
    };
    k = std::min(k, count);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), better);
    order.resize(k);
}

}  // namespace

void traverse_and_score(const GraphView& graph, const VectorStore& store, const NodeColumns& columns,
                        const NodeFilter* filter, const TraversalParams& params, TraversalScratch& scratch,
                        std::vector<Hit>& hits) {
    hits.clear();
    if (filter && !filter->needed(columns)) filter = nullptr;
    // Level 0: the seeds, best first.
    for (const ScoredNode& seed : scratch.seeds) {
        if (scratch.visited.size() >= params.max_visited) break;
        TraversalScratch::Mark& mark = scratch.marks[seed.node];
        if (mark.epoch == scratch.epoch) continue;
        mark.epoch = scratch.epoch;
        mark.parent_edge = invalid_id;
        scratch.visited.push_back(seed.node);
        scratch.visited_hops.push_back(0);
    }
    // Levels 1..hops.
    std::size_t level_begin = 0;
    bool room = scratch.visited.size() < params.max_visited;
    for (std::uint32_t hop = 1; hop <= params.hops && room; ++hop) {
        std::size_t level_end = scratch.visited.size();
        if (level_begin == level_end) break;
        Visitor visit{scratch, columns, filter, params.max_visited, hop};
        for (std::size_t v = level_begin; v < level_end && room; ++v) room = for_each_allowed_edge(graph, scratch.visited[v], params, visit);
        level_begin = level_end;
    }
    // Score everything visited.
    std::size_t count = scratch.visited.size();
    if (count == 0) return;
    scratch.dots.resize(count);
    scratch.scores.resize(count);
    simd::active().dot_rows_i8(scratch.query.codes.data(), store.codes_data(), store.stride_bytes(),
                               scratch.visited.data(), count, store.dim(), scratch.dots.data());
    const Metric metric = store.metric();
    const QuantizedVector& q = scratch.query;
    const bool decay = params.hop_decay != 1.0;
    if (decay) {
        std::size_t deepest = scratch.visited_hops.back();  // BFS order: the last visited is the deepest
        scratch.decay_pow.resize(deepest + 1);
        for (std::size_t h = 0; h <= deepest; ++h)
            scratch.decay_pow[h] = static_cast<float>(std::pow(params.hop_decay, static_cast<double>(h)));
    }
    for (std::size_t i = 0; i < count; ++i) {
        node_id_t node = scratch.visited[i];
        float score = score_from_dot(metric, scratch.dots[i], q.scale, q.sq_norm, store.scale(node), store.sq_norm(node));
        // Decay always moves a score down: a negative score (l2, opposed vectors) is divided.
        if (decay) score = score >= 0.f ? score * scratch.decay_pow[scratch.visited_hops[i]]
                                        : score / scratch.decay_pow[scratch.visited_hops[i]];
        scratch.scores[i] = score;
    }
    select_top_k(scratch.visited.data(), scratch.scores.data(), count, params.k, scratch.order);
    hits.reserve(scratch.order.size());
    for (std::uint32_t i : scratch.order) hits.push_back({scratch.visited[i], scratch.scores[i], scratch.visited_hops[i]});
}

void path_to(const TraversalScratch& scratch, node_id_t node, const node_id_t* edge_src, const node_id_t* edge_dst,
             std::vector<edge_id_t>& path) {
    path.clear();
    while (scratch.marks[node].parent_edge != invalid_id) {
        edge_id_t edge = scratch.marks[node].parent_edge;
        path.push_back(edge);
        node = edge_src[edge] == node ? edge_dst[edge] : edge_src[edge];
    }
    std::reverse(path.begin(), path.end());
}

}  // namespace vecgraph
