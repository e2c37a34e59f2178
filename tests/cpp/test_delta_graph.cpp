// The delta graph (delta_graph.hpp): per-node delta lists in traversal order, the base + delta
// merge that traversal walks (out, in and both directions, tombstones skipped), and the
// compaction hand-off, which must leave the merged view exactly as it was. Checked against a
// slow reference: every live edge at a node, sorted by (weight desc, edge id asc).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "check.hpp"
#include "engines.hpp"
#include "vecgraph/delta_graph.hpp"
#include "vecgraph/engine.hpp"
#include "vecgraph/traversal.hpp"

using namespace vecgraph;

namespace {

using Walked = std::vector<std::pair<node_id_t, edge_id_t>>;  // (neighbour, edge id), in order

// An edge list (edge id = position) and its tombstones.
struct Edges {
    std::vector<node_id_t> src, dst;
    std::vector<rel_id_t> rel;
    std::vector<float> weight;
    std::vector<std::uint8_t> dead;

    void add(node_id_t s, node_id_t d, float w, rel_id_t r = 0) {
        src.push_back(s);
        dst.push_back(d);
        weight.push_back(w);
        rel.push_back(r);
        dead.push_back(0);
    }
    std::size_t size() const { return src.size(); }
    // Whether node u is an end of an edge from `first` on (the ones a delta holds).
    bool touches(node_id_t u, std::size_t first) const {
        for (std::size_t e = first; e < size(); ++e)
            if (src[e] == u || dst[e] == u) return true;
        return false;
    }
    // The first `count` edges; with `with_dead`, their tombstones too (CsrGraph::build leaves them out).
    EdgeColumns columns(std::size_t count, bool with_dead = false) const {
        return {src.data(), dst.data(), rel.data(), weight.data(), count, with_dead ? dead.data() : nullptr};
    }
};

// The reference: the live edges at u in `direction` (under both, an edge once, a self-loop
// included), with an allowed rel, sorted by (weight desc, edge id asc), the first `fanout`.
Walked reference(const Edges& edges, node_id_t u, Direction direction, const std::vector<std::uint8_t>* rel_ok = nullptr,
                 std::size_t fanout = SIZE_MAX) {
    std::vector<std::tuple<float, edge_id_t, node_id_t>> found;  // (-weight, edge, neighbour)
    for (std::size_t e = 0; e < edges.size(); ++e) {
        if (edges.dead[e] || (rel_ok && !(*rel_ok)[edges.rel[e]])) continue;
        const bool out = direction != Direction::in && edges.src[e] == u;
        const bool in = direction != Direction::out && edges.dst[e] == u;
        if (out) found.emplace_back(-edges.weight[e], static_cast<edge_id_t>(e), edges.dst[e]);
        else if (in) found.emplace_back(-edges.weight[e], static_cast<edge_id_t>(e), edges.src[e]);
    }
    std::sort(found.begin(), found.end());
    Walked walked;
    for (const auto& [weight, edge, neighbor] : found) {
        if (walked.size() == fanout) break;
        walked.emplace_back(neighbor, edge);
    }
    return walked;
}

// What traversal walks at u: for_each_allowed_edge over the base, the delta and the tombstones.
Walked walk(const GraphView& graph, node_id_t u, Direction direction, const std::vector<std::uint8_t>* rel_ok = nullptr,
            std::size_t fanout = SIZE_MAX) {
    TraversalParams params;
    params.direction = direction;
    params.max_fanout = fanout;
    params.rel_ok = rel_ok;
    Walked walked;
    for_each_allowed_edge(graph, u, params, [&](node_id_t neighbor, edge_id_t edge) {
        walked.emplace_back(neighbor, edge);
        return true;
    });
    return walked;
}

// One direction's merged run of u (base then delta, no filtering), as EdgeRun yields it.
Walked run_of(const GraphView& graph, node_id_t u, bool out) {
    const DeltaAdjacency::Lists* lists = graph.delta ? graph.delta->lists_at(u) : nullptr;
    const std::vector<AdjEntry>* list = lists ? (out ? &lists->out : &lists->in) : nullptr;
    detail::EdgeRun run = detail::EdgeRun::of(out ? graph.base->out() : graph.base->in(),
                                              u < graph.base->count_nodes(), u, list);
    Walked walked;
    while (!run.empty()) {
        const AdjEntry* entry = run.front();
        walked.emplace_back(entry->neighbor, entry->edge);
        run.pop(entry);
    }
    return walked;
}

Walked entries(const std::vector<AdjEntry>& list) {
    Walked walked;
    for (const AdjEntry& entry : list) walked.emplace_back(entry.neighbor, entry.edge);
    return walked;
}

// A delta with one slot per node (as the engine grows them with its node rows).
DeltaAdjacency delta_for(std::size_t count_nodes) {
    DeltaAdjacency delta;
    delta.slot.assign(count_nodes, 0);
    return delta;
}

constexpr Direction directions[] = {Direction::out, Direction::in, Direction::both};

// Random edges over `nodes` nodes with few distinct weights (many ties), some self-loops and repeats.
void add_random(Edges& edges, std::size_t count, std::size_t nodes, std::mt19937& rng) {
    std::uniform_int_distribution<node_id_t> node(0, static_cast<node_id_t>(nodes - 1));
    std::uniform_int_distribution<int> weight(0, 3);
    for (std::size_t i = 0; i < count; ++i) {
        const node_id_t s = node(rng);
        const node_id_t d = i % 9 == 0 ? s : node(rng);
        edges.add(s, d, static_cast<float>(weight(rng)) * 0.5f, static_cast<rel_id_t>(i % 3));
    }
}

}  // namespace

TEST_CASE("delta lists: traversal order per node, no lists for nodes without delta edges") {
    DeltaAdjacency delta = delta_for(6);
    delta.add(0, 1, 0, 1.0f, 0);
    delta.add(0, 2, 1, 2.0f, 0);
    delta.add(3, 0, 2, 1.0f, 0);
    delta.add(0, 1, 3, 2.0f, 1);  // a repeat of 0 -> 1, heavier: before edge 0
    delta.add(2, 2, 4, 1.0f, 0);  // a self-loop: in 2's out- and in-list
    CHECK_EQ(delta.count_edges, 5u);
    CHECK_EQ(delta.lists.size(), 4u);  // nodes 0, 1, 2 and 3
    REQUIRE(delta.lists_at(0) != nullptr);
    CHECK(entries(delta.lists_at(0)->out) == (Walked{{2, 1}, {1, 3}, {1, 0}}));
    CHECK(entries(delta.lists_at(0)->in) == (Walked{{3, 2}}));
    REQUIRE(delta.lists_at(1) != nullptr);
    CHECK(delta.lists_at(1)->out.empty());
    CHECK(entries(delta.lists_at(1)->in) == (Walked{{0, 3}, {0, 0}}));
    REQUIRE(delta.lists_at(2) != nullptr);
    CHECK(entries(delta.lists_at(2)->out) == (Walked{{2, 4}}));
    CHECK(entries(delta.lists_at(2)->in) == (Walked{{0, 1}, {2, 4}}));
    CHECK_EQ(delta.lists_at(3)->node, 3u);
    // Nodes without delta edges: a zero slot and no lists, also past the slots.
    CHECK(delta.lists_at(4) == nullptr);
    CHECK(delta.lists_at(5) == nullptr);
    CHECK(delta.lists_at(1000) == nullptr);
    CHECK_EQ(delta.slot[4], 0u);
    CHECK_EQ(delta.slot[5], 0u);
    CHECK(delta.memory_bytes() >= 5 * 2 * sizeof(AdjEntry));
    // An empty delta: no lists at all.
    DeltaAdjacency empty = delta_for(3);
    for (node_id_t u = 0; u < 3; ++u) CHECK(empty.lists_at(u) == nullptr);
}

TEST_CASE("base and delta merged in traversal order: a hand-made graph, every direction") {
    // Base: 0->1 (w 1, e0), 0->2 (w 3, e1), 2->0 (w 2, e2), 1->1 (w 1, e3, a self-loop).
    Edges edges;
    edges.add(0, 1, 1.0f);
    edges.add(0, 2, 3.0f);
    edges.add(2, 0, 2.0f);
    edges.add(1, 1, 1.0f);
    const CsrGraph base = CsrGraph::build(4, edges.columns(4));
    // Delta: 0->3 (w 2, e4), 3->0 (w 3, e5), 0->1 (w 1, e6: ties e0, after it), 1->1 (w 1, e7).
    edges.add(0, 3, 2.0f);
    edges.add(3, 0, 3.0f);
    edges.add(0, 1, 1.0f);
    edges.add(1, 1, 1.0f);
    DeltaAdjacency delta = delta_for(4);
    delta.add_range(edges.columns(edges.size()), 4);
    CHECK_EQ(delta.count_edges, 4u);
    const GraphView graph{&base, &delta, nullptr};

    // Node 0, written out by hand: out (w3 e1 ->2) (w2 e4 ->3) (w1 e0 ->1) (w1 e6 ->1); in (w3 e5 <-3) (w2 e2 <-2).
    CHECK(walk(graph, 0, Direction::out) == (Walked{{2, 1}, {3, 4}, {1, 0}, {1, 6}}));
    CHECK(walk(graph, 0, Direction::in) == (Walked{{3, 5}, {2, 2}}));
    CHECK(walk(graph, 0, Direction::both) == (Walked{{2, 1}, {3, 5}, {2, 2}, {3, 4}, {1, 0}, {1, 6}}));
    CHECK(run_of(graph, 0, true) == walk(graph, 0, Direction::out));
    CHECK(run_of(graph, 0, false) == walk(graph, 0, Direction::in));
    // Node 1: two self-loops (base e3, delta e7), each once under both.
    CHECK(walk(graph, 1, Direction::out) == (Walked{{1, 3}, {1, 7}}));
    CHECK(walk(graph, 1, Direction::in) == (Walked{{0, 0}, {1, 3}, {0, 6}, {1, 7}}));
    CHECK(walk(graph, 1, Direction::both) == (Walked{{0, 0}, {1, 3}, {0, 6}, {1, 7}}));
    // Node 2 has no delta edges: its base run alone (and no delta lists).
    CHECK(delta.lists_at(2) == nullptr);
    CHECK(walk(graph, 2, Direction::both) == (Walked{{0, 1}, {0, 2}}));
    // A fanout of 3 keeps the first 3; a fn that returns false stops the walk there.
    CHECK(walk(graph, 0, Direction::both, nullptr, 3) == (Walked{{2, 1}, {3, 5}, {2, 2}}));
    TraversalParams params;
    params.direction = Direction::both;
    std::size_t calls = 0;
    CHECK(!for_each_allowed_edge(graph, 0, params, [&](node_id_t, edge_id_t) { return ++calls < 2; }));
    CHECK_EQ(calls, 2u);
    // Tombstones: a deleted base edge (e1) and a deleted delta edge (e5) are skipped; the runs keep them.
    edges.dead[1] = edges.dead[5] = 1;
    const GraphView with_dead{&base, &delta, edges.dead.data()};
    CHECK(walk(with_dead, 0, Direction::both) == (Walked{{2, 2}, {3, 4}, {1, 0}, {1, 6}}));
    CHECK(walk(with_dead, 0, Direction::both) == reference(edges, 0, Direction::both));
    CHECK_EQ(run_of(with_dead, 0, true).size(), 4u);
    // Every node and direction against the reference.
    for (node_id_t u = 0; u < 4; ++u)
        for (Direction d : directions) CHECK(walk(with_dead, u, d) == reference(edges, u, d));
}

TEST_CASE("random graphs: the merged view matches the sorted reference") {
    std::mt19937 rng(7);
    for (int round = 0; round < 6; ++round) {
        const std::size_t base_nodes = 30, nodes = 40;  // nodes 30..39 came after the base was built
        Edges edges;
        add_random(edges, 150, base_nodes, rng);
        const std::size_t base_edges = edges.size();
        const CsrGraph base = CsrGraph::build(base_nodes, edges.columns(base_edges));
        add_random(edges, round * 40, nodes, rng);  // round 0: no delta edges
        DeltaAdjacency delta = delta_for(nodes);
        delta.add_range(edges.columns(edges.size()), base_edges);
        CHECK_EQ(delta.count_edges, edges.size() - base_edges);
        std::bernoulli_distribution deleted(0.15);
        for (auto& flag : edges.dead) flag = deleted(rng);
        const std::vector<std::uint8_t> rel_ok = {1, 0, 1};
        const GraphView graph{&base, round ? &delta : nullptr, edges.dead.data()};  // no delta: as the engine passes it
        for (node_id_t u = 0; u < nodes; ++u) {
            // Nodes without delta edges cost nothing: no lists.
            CHECK(edges.touches(u, base_edges) == (delta.lists_at(u) != nullptr));
            for (Direction d : directions) {
                CHECK(walk(graph, u, d) == reference(edges, u, d));
                CHECK(walk(graph, u, d, &rel_ok) == reference(edges, u, d, &rel_ok));
                CHECK(walk(graph, u, d, nullptr, 2) == reference(edges, u, d, nullptr, 2));
            }
        }
    }
}

TEST_CASE("compaction hand-off: the merged view is the same before and after the new base") {
    std::mt19937 rng(3);
    for (int round = 0; round < 4; ++round) {
        // The current pair: a base of the first edges (deleted ones left out) and a delta since.
        const std::size_t nodes = 25;
        Edges edges;
        add_random(edges, 80, nodes, rng);
        edges.dead[3] = edges.dead[10] = 1;
        const std::size_t base_edges = edges.size();
        CsrGraph base = CsrGraph::build(nodes, edges.columns(base_edges, true));
        add_random(edges, 60, nodes, rng);
        DeltaAdjacency delta = delta_for(nodes);
        delta.slot.reserve(64);
        delta.add_range(edges.columns(edges.size()), base_edges);
        edges.dead[base_edges + 1] = 1;  // a delta edge deleted

        // Compaction starts: the edge columns as they stand, with their tombstones.
        const std::size_t built_edges = edges.size(), built_nodes = nodes;
        const std::vector<std::uint8_t> dead_at_build = edges.dead;
        // While it builds: nodes are added (their slots grow), edges added and deleted.
        const std::size_t more_nodes = nodes + 5;
        delta.slot.resize(more_nodes, 0);
        const std::size_t before_build = edges.size();
        add_random(edges, 20 + round * 10, more_nodes, rng);
        delta.add_range(edges.columns(edges.size()), before_build);
        edges.dead[0] = edges.dead[built_edges - 1] = edges.dead[edges.size() - 1] = 1;

        Edges at_build = edges;
        at_build.dead = dead_at_build;
        at_build.dead.resize(edges.size(), 0);
        const CsrGraph next = CsrGraph::build(built_nodes, at_build.columns(built_edges, true));
        const DeltaAdjacency rebased = delta.rebased(edges.columns(edges.size()), built_edges);
        // The new delta: exactly the edges added while the CSR was built, the same slots.
        CHECK_EQ(rebased.count_edges, edges.size() - built_edges);
        CHECK_EQ(rebased.slot.size(), delta.slot.size());
        CHECK(rebased.slot.capacity() >= delta.slot.capacity());
        CHECK_EQ(next.count_edges(), static_cast<std::size_t>(std::count(dead_at_build.begin(),
                                                                         dead_at_build.begin() + built_edges, 0)));

        const GraphView before{&base, &delta, edges.dead.data()};
        const GraphView after{&next, &rebased, edges.dead.data()};
        for (node_id_t u = 0; u < more_nodes; ++u) {
            CHECK(edges.touches(u, built_edges) == (rebased.lists_at(u) != nullptr));
            for (Direction d : directions) {
                const Walked want = reference(edges, u, d);
                CHECK(walk(before, u, d) == want);
                CHECK(walk(after, u, d) == want);
            }
        }
        // Nothing deleted since the build: the new CSR alone holds every live edge.
        if (round == 0) {
            Edges quiet;
            add_random(quiet, 50, nodes, rng);
            DeltaAdjacency quiet_delta = delta_for(nodes);
            quiet_delta.add_range(quiet.columns(quiet.size()), 0);
            const CsrGraph full = CsrGraph::build(nodes, quiet.columns(quiet.size()));
            const DeltaAdjacency none = quiet_delta.rebased(quiet.columns(quiet.size()), quiet.size());
            CHECK_EQ(none.count_edges, 0u);
            CHECK(none.lists.empty());
            const CsrGraph empty_base = CsrGraph::build(0, quiet.columns(0));
            for (node_id_t u = 0; u < nodes; ++u)
                for (Direction d : directions)
                    CHECK(walk(GraphView{&empty_base, &quiet_delta, nullptr}, u, d) ==
                          walk(GraphView{&full, &none, nullptr}, u, d));
        }
    }
}

TEST_CASE("engine: neighbours keep their order through compaction") {
    EngineConfig config;
    config.dim = 4;
    config.auto_compact_edges = 0;  // compaction only when asked
    auto engine = vecgraph_test::create_engine(config);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    const std::size_t nodes = 30;
    std::vector<std::string> keys;
    std::vector<float> vectors(nodes * config.dim);
    for (std::size_t i = 0; i < nodes; ++i) keys.push_back(encode_int_key(static_cast<std::int64_t>(i)));
    for (float& v : vectors) v = normal(rng);
    NodeBatch batch;
    batch.count = nodes;
    batch.keys = keys.data();
    batch.vectors = vectors.data();
    REQUIRE(engine->add_nodes(batch).ok());
    for (std::size_t i = 0; i < nodes; ++i) REQUIRE(engine->find(keys[i]).value() == i);  // node id = row

    Edges edges;
    auto add = [&](std::size_t count) {
        const std::size_t first = edges.size();
        add_random(edges, count, nodes, rng);
        std::vector<node_id_t> src(edges.src.begin() + first, edges.src.end()), dst(edges.dst.begin() + first, edges.dst.end());
        std::vector<float> weights(edges.weight.begin() + first, edges.weight.end());
        EdgeBatch edge_batch;
        edge_batch.count = count;
        edge_batch.src_ids = src.data();
        edge_batch.dst_ids = dst.data();
        edge_batch.weights = weights.data();
        REQUIRE(engine->add_edges(edge_batch).ok());
    };
    auto neighbours = [&](node_id_t u, Direction d) {
        Walked walked;
        for (const EdgeRecord& record : engine->neighbors(u, d, false, {}))
            walked.emplace_back(record.src == u ? record.dst : record.src, record.edge);
        return walked;
    };
    auto check_all = [&] {
        for (node_id_t u = 0; u < nodes; ++u)
            for (Direction d : directions) CHECK(neighbours(u, d) == reference(edges, u, d));
        CHECK(engine->verify(10).empty());
    };
    add(40);
    add(25);
    CHECK_EQ(engine->stats().count_delta_edges, 65u);
    check_all();
    // Delete one edge by its endpoints (every live edge between them goes).
    const std::string src_key = keys[edges.src[7]], dst_key = keys[edges.dst[7]];
    EdgeSelection selection;
    selection.count = 1;
    selection.src = &src_key;
    selection.dst = &dst_key;
    std::size_t deleted = 0;
    REQUIRE(engine->delete_edges(selection, false, &deleted).ok());
    for (std::size_t e = 0; e < edges.size(); ++e)
        if (edges.src[e] == edges.src[7] && edges.dst[e] == edges.dst[7]) edges.dead[e] = 1;
    CHECK_EQ(deleted, static_cast<std::size_t>(std::count(edges.dead.begin(), edges.dead.end(), 1)));
    std::vector<Walked> before;
    for (node_id_t u = 0; u < nodes; ++u)
        for (Direction d : directions) before.push_back(neighbours(u, d));
    check_all();

    REQUIRE(engine->compact().ok());
    const EngineStats stats = engine->stats();
    CHECK_EQ(stats.count_delta_edges, 0u);
    CHECK_EQ(stats.count_compactions, 1u);
    std::size_t i = 0;
    for (node_id_t u = 0; u < nodes; ++u)
        for (Direction d : directions) CHECK(neighbours(u, d) == before[i++]);
    check_all();
    // Edges after the compaction go to the new delta, merged with the new base.
    add(15);
    CHECK_EQ(engine->stats().count_delta_edges, 15u);
    check_all();
}

TEST_MAIN()
