// Bounded BFS and int8 scoring (rules in traversal.hpp).
#include "vecgraph/traversal.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph {

void TraversalScratch::begin(std::size_t count_nodes) {
    // Every set bit belongs to a node in `visited` (visit() and push_visited() go together).
    for (node_id_t node : visited) *seen_word(node) &= ~seen_bit(node);
    const std::size_t words = (count_nodes + 63) / 64;
    if (seen.size() < words) seen.resize(words + words / 4 + 1, 0);
    visited.clear();
    visited_hops.clear();
    visited_parent.clear();
    visited_parent_edge.clear();
}

namespace {

// Visits `neighbor` through `edge` if it is new and admitted; returns false once max_visited is reached.
struct Visitor {
    TraversalScratch& scratch;
    const VectorStore& store;
    const NodeColumns& columns;
    const NodeFilter* filter;
    std::size_t max_visited;
    std::uint32_t hop;
    std::uint32_t parent = 0;  // position of the node being expanded

    bool operator()(node_id_t neighbor, edge_id_t edge) const {
        if (scratch.is_visited(neighbor)) return true;
        // A node the filter rejects stays unmarked: it is tested again if reached again.
        if (filter && !filter->admits(columns, neighbor)) return true;
        scratch.visit(neighbor);
        scratch.push_visited(neighbor, hop, parent, edge);
        store.prefetch_row_l2(neighbor);
        return scratch.visited.size() < max_visited;
    }
};

// A software pipeline over one BFS level, so that the memory misses of expanding a node overlap
// with the work on the nodes before it: `offsets_ahead` positions on, the CSR offsets are
// requested; `entries_ahead` on, the adjacency entries they point at; `marks_ahead` on, the
// visited-set words of the first entries' neighbours. Only the immutable CSR is prefetched (the
// delta's lists are short and recently written).
struct AdjacencyPrefetcher {
    static constexpr std::size_t offsets_ahead = 12, entries_ahead = 6, marks_ahead = 3;
    static constexpr std::size_t marks_per_list = 8;

    const CsrGraph& base;
    Direction direction;
    const TraversalScratch& scratch;

    // The first min(degree, limit) CSR entries of u, as (first, count).
    static std::pair<const AdjEntry*, std::size_t> first_entries(const Adjacency& adj, node_id_t u, std::size_t limit) {
        return {adj.entries.data() + adj.offsets[u], std::min<std::size_t>(adj.offsets[u + 1] - adj.offsets[u], limit)};
    }

    template <typename fn_at>
    void each_adjacency(fn_at&& fn) const {
        if (direction != Direction::in) fn(base.out());
        if (direction != Direction::out) fn(base.in());
    }

    void operator()(std::size_t level_end, std::size_t v) const {
        const node_id_t* visited = scratch.visited.data();
        const std::size_t count_nodes = base.count_nodes();
        if (v + offsets_ahead < level_end) {
            node_id_t u = visited[v + offsets_ahead];
            if (u < count_nodes) each_adjacency([&](const Adjacency& adj) { detail::prefetch_read(adj.offsets.data() + u); });
        }
        if (v + entries_ahead < level_end) {
            node_id_t u = visited[v + entries_ahead];
            if (u < count_nodes)
                each_adjacency([&](const Adjacency& adj) {
                    auto [first, n] = first_entries(adj, u, 2 * marks_per_list);
                    for (std::size_t i = 0; i < n; i += 4) detail::prefetch_read(first + i);
                });
        }
        if (v + marks_ahead < level_end) {
            node_id_t u = visited[v + marks_ahead];
            if (u < count_nodes)
                each_adjacency([&](const Adjacency& adj) {
                    auto [first, n] = first_entries(adj, u, marks_per_list);
                    for (std::size_t i = 0; i < n; ++i) detail::prefetch_read(scratch.seen_word(first[i].neighbor));
                });
        }
    }
};

// Top k of the `count` scored nodes at least `min_hop` hops from their seed, by (score desc,
// then `tie_scores` desc when given, then node id asc), as positions in `order`.
void select_top_k(const node_id_t* nodes, const float* scores, const float* tie_scores, const std::uint32_t* hops,
                  std::size_t min_hop, std::size_t count, std::size_t k, std::vector<std::uint32_t>& order) {
    order.clear();
    for (std::uint32_t i = 0; i < count; ++i)
        if (hops[i] >= min_hop) order.push_back(i);
    auto better = [&](std::uint32_t a, std::uint32_t b) {
        if (scores[a] != scores[b]) return scores[a] > scores[b];
        if (tie_scores && tie_scores[a] != tie_scores[b]) return tie_scores[a] > tie_scores[b];
        return nodes[a] < nodes[b];
    };
    k = std::min(k, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), better);
    order.resize(k);
}

}  // namespace

void traverse_and_score(const GraphView& graph, const VectorStore& store, const NodeColumns& columns,
                        const NodeFilter* filter, const TraversalParams& params, TraversalScratch& scratch,
                        std::vector<Hit>& hits) {
    hits.clear();
    if (filter && !filter->needed(columns)) filter = nullptr;
    const bool by_seed = params.seed_weights != nullptr;
    if (by_seed) scratch.origin_weights.clear();
    // Level 0: the seeds, best first.
    for (std::size_t s = 0; s < scratch.seeds.size(); ++s) {
        const ScoredNode& seed = scratch.seeds[s];
        if (scratch.visited.size() >= params.max_visited) break;
        if (!scratch.visit(seed.node)) continue;
        scratch.push_visited(seed.node, 0, invalid_id, invalid_id);
        if (by_seed) scratch.origin_weights.push_back((*params.seed_weights)[s]);
    }
    // Levels 1..hops.
    std::size_t level_begin = 0;
    bool room = scratch.visited.size() < params.max_visited;
    for (std::uint32_t hop = 1; hop <= params.hops && room; ++hop) {
        std::size_t level_end = scratch.visited.size();
        if (level_begin == level_end) break;
        Visitor visit{scratch, store, columns, filter, params.max_visited, hop};
        AdjacencyPrefetcher ahead{*graph.base, params.direction, scratch};
        for (std::size_t v = level_begin; v < level_end && room; ++v) {
            ahead(level_end, v);
            visit.parent = static_cast<std::uint32_t>(v);
            room = for_each_allowed_edge(graph, scratch.visited[v], params, visit);
        }
        level_begin = level_end;
    }
    // Score everything visited.
    std::size_t count = scratch.visited.size();
    if (count == 0) return;
    scratch.dots.resize(count);
    scratch.scores.resize(count);
    const Metric metric = store.metric();
    const QuantizedVector& q = scratch.query;
    const bool decay = params.hop_decay != 1.0;
    if (decay) {
        std::size_t deepest = scratch.visited_hops.back();  // BFS order: the last visited is the deepest
        scratch.decay_pow.resize(deepest + 1);
        for (std::size_t h = 0; h <= deepest; ++h)
            scratch.decay_pow[h] = static_cast<float>(std::pow(params.hop_decay, static_cast<double>(h)));
    }
    // One gathered kernel call over every visited row: the visitor asked for each row (codes,
    // scale and squared norm) as it reached it.
    simd::active().dot_rows_i8_prefetched(q.codes.data(), store.codes_data(), store.code_stride(),
                                          scratch.visited.data(), count, store.dim(), scratch.dots.data());
    if (by_seed) {
        // Seed-propagated scores: a node inherits its seed's weight through its parent (BFS
        // order: a parent is always before its children), decayed per hop past the first.
        scratch.similarities.resize(count);
        scratch.origin_weights.resize(count);
        for (std::size_t i = 0; i < count; ++i) {
            const node_id_t node = scratch.visited[i];
            scratch.similarities[i] =
                score_from_dot(metric, scratch.dots[i], q.scale, q.sq_norm, store.scale(node), store.sq_norm(node));
            const std::uint32_t parent = scratch.visited_parent[i];
            if (parent != invalid_id) scratch.origin_weights[i] = scratch.origin_weights[parent];
            const std::uint32_t hop = scratch.visited_hops[i];
            const float weight = scratch.origin_weights[i];
            scratch.scores[i] = decay && hop > 1 && weight != 0.f ? weight * scratch.decay_pow[hop - 1] : weight;
        }
    } else {
        for (std::size_t i = 0; i < count; ++i) {
            node_id_t node = scratch.visited[i];
            float score =
                score_from_dot(metric, scratch.dots[i], q.scale, q.sq_norm, store.scale(node), store.sq_norm(node));
            // Decay always moves a score down: a negative score (l2, opposed vectors) is divided. A
            // score of 0 stays 0: a decay power that overflows float to inf would make it NaN.
            if (decay && score != 0.f) score = score > 0.f ? score * scratch.decay_pow[scratch.visited_hops[i]]
                                                           : score / scratch.decay_pow[scratch.visited_hops[i]];
            scratch.scores[i] = score;
        }
    }
    select_top_k(scratch.visited.data(), scratch.scores.data(), by_seed ? scratch.similarities.data() : nullptr,
                 scratch.visited_hops.data(), params.min_hop, count, params.k, scratch.order);
    hits.reserve(scratch.order.size());
    for (std::uint32_t i : scratch.order) hits.push_back({scratch.visited[i], scratch.scores[i], scratch.visited_hops[i], i});
}

void path_to(const TraversalScratch& scratch, std::uint32_t position, std::vector<edge_id_t>& path) {
    path.clear();
    for (std::uint32_t at = position; scratch.visited_parent[at] != invalid_id; at = scratch.visited_parent[at])
        path.push_back(scratch.visited_parent_edge[at]);
    std::reverse(path.begin(), path.end());
}

}  // namespace vecgraph
