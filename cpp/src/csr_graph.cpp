// CSR construction by counting sort (see csr_graph.hpp).
#include "vecgraph/csr_graph.hpp"

#include <algorithm>
#include <numeric>
#include <thread>

namespace vecgraph {

std::size_t Adjacency::memory_bytes() const noexcept {
    return offsets.capacity() * sizeof(std::uint32_t) + neighbors.capacity() * sizeof(node_id_t) +
           edges.capacity() * sizeof(edge_id_t) + rels.capacity() * sizeof(rel_id_t) +
           weights.capacity() * sizeof(float);
}

namespace {

// Fills `adj` keyed by `from` and pointing at `to`.
void build_direction(std::size_t count_nodes, const EdgeColumns& edges, const node_id_t* from, const node_id_t* to,
                     Adjacency& adj) {
    adj.offsets.assign(count_nodes + 1, 0);
    for (std::size_t e = 0; e < edges.count; ++e) ++adj.offsets[from[e] + 1];
    std::partial_sum(adj.offsets.begin(), adj.offsets.end(), adj.offsets.begin());
    adj.neighbors.resize(edges.count);
    adj.edges.resize(edges.count);
    adj.rels.resize(edges.count);
    adj.weights.resize(edges.count);
    std::vector<std::uint32_t> cursor(adj.offsets.begin(), adj.offsets.end() - 1);
    for (std::size_t e = 0; e < edges.count; ++e) {  // edge ids ascending within each node
        std::uint32_t slot = cursor[from[e]]++;
        adj.neighbors[slot] = to[e];
        adj.edges[slot] = static_cast<edge_id_t>(e);
        adj.rels[slot] = edges.rel[e];
        adj.weights[slot] = edges.weight[e];
    }
    // Order by weight descending; the sort is stable so edge ids stay ascending among equal weights.
    std::vector<std::uint32_t> order;
    std::vector<node_id_t> tmp_neighbors;
    std::vector<edge_id_t> tmp_edges;
    std::vector<rel_id_t> tmp_rels;
    std::vector<float> tmp_weights;
    for (std::size_t u = 0; u < count_nodes; ++u) {
        std::uint32_t begin = adj.offsets[u], end = adj.offsets[u + 1];
        if (end - begin < 2) continue;
        const float* w = adj.weights.data();
        if (std::is_sorted(w + begin, w + end, [](float a, float b) { return a > b; })) continue;
        std::size_t n = end - begin;
        order.resize(n);
        std::iota(order.begin(), order.end(), begin);
        std::stable_sort(order.begin(), order.end(), [w](std::uint32_t a, std::uint32_t b) { return w[a] > w[b]; });
        tmp_neighbors.resize(n);
        tmp_edges.resize(n);
        tmp_rels.resize(n);
        tmp_weights.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            tmp_neighbors[i] = adj.neighbors[order[i]];
            tmp_edges[i] = adj.edges[order[i]];
            tmp_rels[i] = adj.rels[order[i]];
            tmp_weights[i] = adj.weights[order[i]];
        }
        std::copy(tmp_neighbors.begin(), tmp_neighbors.end(), adj.neighbors.begin() + begin);
        std::copy(tmp_edges.begin(), tmp_edges.end(), adj.edges.begin() + begin);
        std::copy(tmp_rels.begin(), tmp_rels.end(), adj.rels.begin() + begin);
        std::copy(tmp_weights.begin(), tmp_weights.end(), adj.weights.begin() + begin);
    }
}

}  // namespace

CsrGraph CsrGraph::build(std::size_t count_nodes, const EdgeColumns& edges) {
    CsrGraph graph;
    graph.count_nodes_ = count_nodes;
    graph.count_edges_ = edges.count;
    // The two directions are independent: build them on two threads when there is enough work.
    if (edges.count >= (1u << 18)) {
        std::thread in_thread([&] { build_direction(count_nodes, edges, edges.dst, edges.src, graph.in_); });
        build_direction(count_nodes, edges, edges.src, edges.dst, graph.out_);
        in_thread.join();
    } else {
        build_direction(count_nodes, edges, edges.src, edges.dst, graph.out_);
        build_direction(count_nodes, edges, edges.dst, edges.src, graph.in_);
    }
    return graph;
}

}  // namespace vecgraph
