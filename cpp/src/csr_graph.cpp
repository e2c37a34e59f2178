// CSR construction by counting sort (see csr_graph.hpp).
#include "vecgraph/csr_graph.hpp"

#include <algorithm>
#include <numeric>

#include "vecgraph/detail/ranges.hpp"

namespace vecgraph {

namespace {

// Fills `adj` keyed by `from` and pointing at `to`.
void build_direction(std::size_t count_nodes, const EdgeColumns& edges, const node_id_t* from, const node_id_t* to,
                     Adjacency& adj) {
    adj.offsets.assign(count_nodes + 1, 0);
    const std::uint8_t* dead = edges.dead;
    for (std::size_t e = 0; e < edges.count; ++e)
        if (!dead || !dead[e]) ++adj.offsets[from[e] + 1];
    std::partial_sum(adj.offsets.begin(), adj.offsets.end(), adj.offsets.begin());
    adj.entries.resize(adj.offsets.back());
    std::vector<std::uint32_t> cursor(adj.offsets.begin(), adj.offsets.end() - 1);
    for (std::size_t e = 0; e < edges.count; ++e)  // edge ids ascending within each node
        if (!dead || !dead[e])
            adj.entries[cursor[from[e]]++] = AdjEntry{to[e], static_cast<edge_id_t>(e), edges.weight[e], edges.rel[e]};
    // Order by weight descending; the sort is stable so edge ids stay ascending among equal weights.
    auto heavier = [](const AdjEntry& a, const AdjEntry& b) { return a.weight > b.weight; };
    for (std::size_t u = 0; u < count_nodes; ++u) {
        auto begin = adj.entries.begin() + adj.offsets[u], end = adj.entries.begin() + adj.offsets[u + 1];
        if (!std::is_sorted(begin, end, heavier)) std::stable_sort(begin, end, heavier);
    }
}

}  // namespace

CsrGraph CsrGraph::build(std::size_t count_nodes, const EdgeColumns& edges) {
    CsrGraph graph;
    graph.count_nodes_ = count_nodes;
    std::size_t live = edges.count;
    if (edges.dead) live -= static_cast<std::size_t>(std::count(edges.dead, edges.dead + edges.count, std::uint8_t{1}));
    graph.count_edges_ = live;
    // The two directions are independent: build them on two threads when there is enough work.
    if (edges.count >= (1u << 18)) {
        detail::for_each_range(2, 2, [&](std::size_t direction, std::size_t, std::size_t) {
            if (direction == 0) build_direction(count_nodes, edges, edges.src, edges.dst, graph.out_);
            else build_direction(count_nodes, edges, edges.dst, edges.src, graph.in_);
        });
    } else {
        build_direction(count_nodes, edges, edges.src, edges.dst, graph.out_);
        build_direction(count_nodes, edges, edges.dst, edges.src, graph.in_);
    }
    return graph;
}

}  // namespace vecgraph
