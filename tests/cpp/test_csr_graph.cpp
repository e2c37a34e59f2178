// CSR construction: offsets, neighbour sets, ordering by (weight desc, edge id asc), in/out symmetry.
#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "check.hpp"
#include "vecgraph/csr_graph.hpp"

using namespace vecgraph;

namespace {

struct EdgeList {
    std::vector<node_id_t> src, dst;
    std::vector<rel_id_t> rel;
    std::vector<float> weight;
    EdgeColumns columns() const { return {src.data(), dst.data(), rel.data(), weight.data(), src.size()}; }
};

EdgeList random_edges(std::size_t nodes, std::size_t edges, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<node_id_t> node(0, static_cast<node_id_t>(nodes - 1));
    std::uniform_int_distribution<int> weight(0, 3);  // few distinct weights: many ties
    EdgeList list;
    for (std::size_t e = 0; e < edges; ++e) {
        list.src.push_back(node(rng));
        list.dst.push_back(e % 7 == 0 ? list.src.back() : node(rng));  // some self-loops
        list.rel.push_back(static_cast<rel_id_t>(e % 3));
        list.weight.push_back(static_cast<float>(weight(rng)) * 0.5f);
    }
    return list;
}

// For one direction, the expected entries of node u: (weight desc, edge asc).
std::vector<std::tuple<float, edge_id_t, node_id_t, rel_id_t>> expected(const EdgeList& list, node_id_t u, bool out) {
    std::vector<std::tuple<float, edge_id_t, node_id_t, rel_id_t>> entries;
    for (edge_id_t e = 0; e < list.src.size(); ++e) {
        node_id_t from = out ? list.src[e] : list.dst[e];
        node_id_t to = out ? list.dst[e] : list.src[e];
        if (from == u) entries.emplace_back(-list.weight[e], e, to, list.rel[e]);
    }
    std::sort(entries.begin(), entries.end());
    return entries;
}

void check_direction(const Adjacency& adj, const EdgeList& list, std::size_t nodes, bool out) {
    REQUIRE(adj.offsets.size() == nodes + 1);
    CHECK_EQ(adj.offsets.back(), list.src.size());
    for (node_id_t u = 0; u < nodes; ++u) {
        auto want = expected(list, u, out);
        REQUIRE(adj.degree(u) == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
            std::size_t pos = adj.offsets[u] + i;
            CHECK_EQ(adj.entries[pos].weight, -std::get<0>(want[i]));
            CHECK_EQ(adj.entries[pos].edge, std::get<1>(want[i]));
            CHECK_EQ(adj.entries[pos].neighbor, std::get<2>(want[i]));
            CHECK_EQ(adj.entries[pos].rel, std::get<3>(want[i]));
        }
    }
}

}  // namespace

TEST_CASE("empty graph and isolated nodes") {
    EdgeList none;
    CsrGraph graph = CsrGraph::build(5, none.columns());
    CHECK_EQ(graph.count_nodes(), 5u);
    CHECK_EQ(graph.count_edges(), 0u);
    for (node_id_t u = 0; u < 5; ++u) {
        CHECK_EQ(graph.out().degree(u), 0u);
        CHECK_EQ(graph.in().degree(u), 0u);
    }
    CsrGraph zero = CsrGraph::build(0, none.columns());
    CHECK_EQ(zero.out().offsets.size(), 1u);
}

TEST_CASE("small graph matches a sorted edge list, both directions") {
    EdgeList list = random_edges(20, 120, 1);
    CsrGraph graph = CsrGraph::build(20, list.columns());
    check_direction(graph.out(), list, 20, true);
    check_direction(graph.in(), list, 20, false);
}

TEST_CASE("large graph (two build threads) matches a sorted edge list") {
    EdgeList list = random_edges(3000, 300000, 2);
    CsrGraph graph = CsrGraph::build(3000, list.columns());
    check_direction(graph.out(), list, 3000, true);
    check_direction(graph.in(), list, 3000, false);
}

TEST_CASE("multi-edges and self-loops are kept") {
    EdgeList list;
    list.src = {0, 0, 1, 1};
    list.dst = {1, 1, 1, 0};
    list.rel = {0, 1, 0, 0};
    list.weight = {1.f, 2.f, 1.f, 1.f};
    CsrGraph graph = CsrGraph::build(2, list.columns());
    CHECK_EQ(graph.out().degree(0), 2u);
    CHECK_EQ(graph.out().entries[graph.out().offsets[0]].edge, 1u);  // heavier first
    CHECK_EQ(graph.out().degree(1), 2u);
    CHECK_EQ(graph.in().degree(1), 3u);
}

TEST_MAIN()
