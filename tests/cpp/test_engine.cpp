// Engine: batches are all-or-nothing, search follows the documented rules on hand-made graphs,
// filters apply to every node reached, and concurrent searches during writes stay consistent.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "engines.hpp"
#include "temp_dir.hpp"
#include "vecgraph/engine.hpp"

using namespace vecgraph;

namespace {

std::unique_ptr<Engine> make(std::size_t dim, Metric metric = Metric::cos) {
    EngineConfig config;
    config.dim = dim;
    config.metric = metric;
    return vecgraph_test::create_engine(config);
}

// n nodes with int keys first, first + 1, ... and standard normal vectors, as one batch.
struct RandomNodes {
    std::vector<std::string> keys;
    std::vector<float> vectors;
    NodeBatch batch;

    RandomNodes(std::size_t n, std::size_t dim, std::mt19937& rng, std::int64_t first = 0) : vectors(n * dim) {
        std::normal_distribution<float> normal;
        for (std::size_t i = 0; i < n; ++i) keys.push_back(encode_int_key(first + static_cast<std::int64_t>(i)));
        for (auto& v : vectors) v = normal(rng);
        batch.count = n;
        batch.keys = keys.data();
        batch.vectors = vectors.data();
    }
    RandomNodes(const RandomNodes&) = delete;  // batch points into this object
    RandomNodes& operator=(const RandomNodes&) = delete;
};

std::vector<std::string> text_keys(std::initializer_list<const char*> names) {
    std::vector<std::string> keys;
    for (const char* name : names) keys.push_back(encode_text_key(name));
    return keys;
}

std::vector<std::string> keys_of(const Engine& engine, const SearchResult& result) {
    std::vector<std::string> keys;
    for (const Hit& hit : result.hits) keys.push_back(std::string(engine.key(hit.node)).substr(1));
    return keys;
}

// A path a -> b -> c -> d with one-hot-ish vectors; e is isolated.
std::unique_ptr<Engine> chain() {
    auto engine = make(4);
    auto keys = text_keys({"a", "b", "c", "d", "e"});
    std::vector<float> vectors = {1, 0, 0, 0, 0.9f, 0.1f, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    std::vector<std::string> labels = {"x", "x", "y", "x", "x"};
    NodeBatch nodes;
    nodes.count = 5;
    nodes.keys = keys.data();
    nodes.vectors = vectors.data();
    nodes.labels = labels.data();
    REQUIRE(engine->add_nodes(nodes).ok());
    auto src = text_keys({"a", "b", "c"});
    auto dst = text_keys({"b", "c", "d"});
    std::vector<std::string> rels = {"next", "next", "other"};
    EdgeBatch edges;
    edges.count = 3;
    edges.src = src.data();
    edges.dst = dst.data();
    edges.rels = rels.data();
    REQUIRE(engine->add_edges(edges).ok());
    return engine;
}

}  // namespace

TEST_CASE("the automatic filter scan limit is max(floor, isqrt(factor * rows)); a set limit is itself") {
    // isqrt by bisection on exact integers: the plain reference for the engine's corrected estimate.
    auto isqrt = [](unsigned __int128 x) {
        std::uint64_t lo = 0, hi = std::uint64_t{1} << 32;
        while (hi - lo > 1) {
            const std::uint64_t mid = lo + (hi - lo) / 2;
            if (static_cast<unsigned __int128>(mid) * mid <= x) lo = mid; else hi = mid;
        }
        return lo;
    };
    auto want = [&](std::uint64_t rows) {
        const std::uint64_t root = isqrt(static_cast<unsigned __int128>(Engine::filter_scan_auto_factor) * rows);
        return std::max<std::uint64_t>(Engine::filter_scan_auto_floor, root);
    };
    std::vector<std::uint64_t> rows_list = {0, 1, 99'999, 100'000, 100'001, 1'000'000, 10'000'000, 4'294'967'295u};
    for (std::uint64_t r = 1; r < 3'000'000; r += 1 + r / 7) rows_list.push_back(r);
    for (std::uint64_t k = 3'000; k < 70'000; k += 997) {  // both sides of each perfect square k^2 / 1000
        const std::uint64_t at = k * k / Engine::filter_scan_auto_factor;
        for (std::uint64_t r : {at - 1, at, at + 1}) rows_list.push_back(r);
    }
    for (std::uint64_t rows : rows_list) {
        CHECK_EQ(Engine::filter_scan_limit(Engine::filter_scan_auto, rows), want(rows));
        CHECK_EQ(Engine::filter_scan_limit(123, rows), 123u);
        CHECK_EQ(Engine::filter_scan_limit(0, rows), 0u);
    }
    CHECK_EQ(Engine::filter_scan_limit(Engine::filter_scan_auto, 100'000), 10'000u);
    CHECK_EQ(Engine::filter_scan_limit(Engine::filter_scan_auto, 1'000'000), 31'622u);
}

TEST_CASE("expansion follows hops, direction, rels and max_visited") {
    auto engine = chain();
    std::vector<float> q = {1, 0, 0, 0};
    SearchRequest request;
    request.k = 10;
    request.seeds = 1;
    request.exact = true;
    request.direction = Direction::out;
    request.hops = 3;
    auto result = engine->search(q.data(), 4, request);
    REQUIRE(result.ok());
    auto keys = keys_of(*engine, result.value());
    REQUIRE(keys.size() == 4u);
    CHECK_EQ(keys[0], "a");
    CHECK_EQ(keys[1], "b");
    CHECK_EQ(result.value().hits[3].hop, 3u);
    // The path of d walks a->b, b->c, c->d.
    const SearchResult& r = result.value();
    std::size_t d_index = 0;
    for (std::size_t i = 0; i < r.hits.size(); ++i)
        if (keys[i] == "d") d_index = i;
    CHECK_EQ(r.path_offsets[d_index + 1] - r.path_offsets[d_index], 3u);

    request.direction = Direction::in;  // nothing points at a
    CHECK_EQ(engine->search(q.data(), 4, request).value().hits.size(), 1u);

    request.direction = Direction::both;
    request.filter_rels = true;
    request.rels = {"next"};  // c -> d is "other"
    CHECK_EQ(engine->search(q.data(), 4, request).value().hits.size(), 3u);
    request.rels = {"no such rel"};
    CHECK_EQ(engine->search(q.data(), 4, request).value().hits.size(), 1u);

    request.filter_rels = false;
    request.max_visited = 2;
    CHECK_EQ(engine->search(q.data(), 4, request).value().count_visited, 2u);
    request.max_visited = 2000;
    request.hops = 0;
    request.seeds = 3;
    CHECK_EQ(engine->search(q.data(), 4, request).value().hits.size(), 3u);
}

TEST_CASE("filters apply to every node reached: a rejected node is not walked through") {
    auto engine = chain();
    std::vector<float> q = {1, 0, 0, 0};
    SearchRequest request;
    request.seeds = 1;
    request.exact = true;
    request.hops = 3;
    request.filter_labels = true;
    request.labels = {"x"};  // c is "y": d is unreachable through it
    auto result = engine->search(q.data(), 4, request);
    REQUIRE(result.ok());
    auto keys = keys_of(*engine, result.value());
    CHECK_EQ(keys.size(), 2u);
    request.labels = {"unknown"};
    CHECK_EQ(engine->search(q.data(), 4, request).value().hits.size(), 0u);
}

TEST_CASE("excluded keys are neither returned nor walked through") {
    auto engine = chain();
    std::vector<float> q = {1, 0, 0, 0};
    SearchRequest request;
    request.seeds = 1;
    request.exact = true;
    request.hops = 3;
    request.direction = Direction::out;
    request.exclude = text_keys({"b", "no such key"});
    auto result = engine->search(q.data(), 4, request);
    REQUIRE(result.ok());
    auto keys = keys_of(*engine, result.value());  // a is the seed; c and d lie behind b
    REQUIRE(keys.size() == 1u);
    CHECK_EQ(keys[0], "a");
    request.exclude = text_keys({"a"});  // the next best seed is b, and the walk goes on from it
    keys = keys_of(*engine, engine->search(q.data(), 4, request).value());
    REQUIRE(keys.size() == 3u);
    CHECK_EQ(keys[0], "b");
}

TEST_CASE("seed-propagated scores: a node scores its seed's weight, halved per hop past the first") {
    auto engine = chain();
    std::vector<float> q = {0, 0, 0, 1};  // most like e, which links nowhere
    SearchRequest request;
    request.seeds = 0;
    request.hops = 3;
    request.direction = Direction::out;
    request.hop_decay = 0.5;
    request.min_hop = 1;
    request.extra_seeds = text_keys({"a", "e"});
    request.seed_weights = {0.8f, 1.0f};
    auto result = engine->search(q.data(), 4, request);
    REQUIRE(result.ok());
    const SearchResult& r = result.value();
    auto keys = keys_of(*engine, r);
    REQUIRE(keys.size() == 3u);  // the seeds a and e are walked from, not returned (min_hop 1)
    CHECK_EQ(keys[0], "b");
    CHECK_EQ(keys[1], "c");
    CHECK_EQ(keys[2], "d");
    CHECK_EQ(r.hits[0].score, 0.8f);
    CHECK_EQ(r.hits[1].score, 0.4f);
    CHECK_EQ(r.hits[2].score, 0.2f);
    request.seed_weights = {0.8f};  // one weight per extra seed
    CHECK(!engine->search(q.data(), 4, request).ok());
    request.seed_weights = {0.8f, -1.0f};
    CHECK(!engine->search(q.data(), 4, request).ok());
    request.seed_weights = {0.8f, 1.0f};
    request.seeds = 2;  // similarity seeds have no weight
    CHECK(!engine->search(q.data(), 4, request).ok());
}

TEST_CASE("rejected batches change nothing") {
    auto engine = chain();
    float nan = std::nanf("");
    auto keys = text_keys({"f", "g"});
    std::vector<float> vectors = {1, 1, 1, 1, 1, nan, 1, 1};
    NodeBatch nodes;
    nodes.count = 2;
    nodes.keys = keys.data();
    nodes.vectors = vectors.data();
    CHECK(engine->add_nodes(nodes).code() == StatusCode::invalid_argument);
    auto dup = text_keys({"f", "a"});
    vectors[5] = 1;
    nodes.keys = dup.data();
    CHECK(engine->add_nodes(nodes).code() == StatusCode::already_exists);
    auto twice = text_keys({"f", "f"});
    nodes.keys = twice.data();
    CHECK(engine->add_nodes(nodes).code() == StatusCode::already_exists);
    CHECK_EQ(engine->count_nodes(), 5u);
    CHECK(!engine->find(encode_text_key("f")).ok());

    auto src = text_keys({"a", "zz"});
    auto dst = text_keys({"e", "a"});
    EdgeBatch edges;
    edges.count = 2;
    edges.src = src.data();
    edges.dst = dst.data();
    Status s = engine->add_edges(edges);
    CHECK(s.code() == StatusCode::not_found);
    CHECK(s.message().find("'zz'") != std::string::npos);
    CHECK_EQ(engine->count_edges(), 3u);
}

TEST_CASE("edge batches take int64 key columns and dictionary-coded relation names") {
    auto engine = make(4);
    std::vector<float> vectors(4 * 4, 0.f);
    for (int i = 0; i < 4; ++i) vectors[i * 4 + i] = 1.f;
    std::vector<std::string> keys = {encode_int_key(-7), encode_int_key(0), encode_int_key(1LL << 40),
                                     encode_text_key("t")};
    NodeBatch nodes;
    nodes.count = 4;
    nodes.keys = keys.data();
    nodes.vectors = vectors.data();
    REQUIRE(engine->add_nodes(nodes).ok());
    const node_id_t a = engine->find(keys[0]).value(), b = engine->find(keys[1]).value(), c = engine->find(keys[2]).value();

    // src as ints, dst as encoded keys; "unused" is named by no row and must not be interned.
    std::vector<std::int64_t> src = {-7, 0, -7};
    std::vector<std::string> dst = {keys[1], keys[2], keys[2]};
    std::vector<std::string> names = {"unused", "y", "x"};
    std::vector<std::uint32_t> index = {2, 1, 1};
    EdgeBatch edges;
    edges.count = 3;
    edges.src_ints = src.data();
    edges.dst = dst.data();
    edges.rels = names.data();
    edges.rel_index = index.data();
    edges.count_rel_names = names.size();
    REQUIRE(engine->add_edges(edges).ok());
    CHECK_EQ(engine->stats().count_rels, 2u);
    auto out = engine->neighbors(a, Direction::out, false, {});
    REQUIRE(out.size() == 2u);
    CHECK_EQ(out[0].dst, b);  // equal weights: edge id order
    CHECK_EQ(out[0].rel, "x");
    CHECK_EQ(out[1].dst, c);
    CHECK_EQ(out[1].rel, "y");
    CHECK_EQ(engine->neighbors(b, Direction::out, true, {"y"}).size(), 1u);

    // An index beyond the names, or an int key that is no node: refused, nothing added.
    index = {2, 3, 0};
    Status s = engine->add_edges(edges);
    CHECK(s.code() == StatusCode::invalid_argument);
    CHECK(s.message().find("row 1") != std::string::npos);
    index = {2, 1, 1};
    src = {-7, 5, -7};
    s = engine->add_edges(edges);
    CHECK(s.code() == StatusCode::not_found);
    CHECK(s.message().find("src key 5") != std::string::npos);
    CHECK_EQ(engine->count_edges(), 3u);
    CHECK_EQ(engine->stats().count_rels, 2u);
    CHECK(engine->verify(10).empty());
}

TEST_CASE("node batches: labels and tenants new, known, in runs and upserted keep their names") {
    // Label and tenant ids are found before the exclusive lock; names new to the graph get
    // theirs then and are interned under it. A model of each node's names must hold after
    // batches mixing new and known names, upserts that move nodes to new names, and rejected
    // batches (which must intern nothing); label and tenant filters must find the same nodes.
    auto engine = make(4);
    std::mt19937 rng(5);
    std::map<std::string, std::pair<std::string, std::string>> model;  // key -> (label, tenant)
    const std::vector<std::string> pool = {"", "person", "place", "p\xc3\xa9", "pe\xcc\x81", "\xf0\x9f\x98\x80", "thing"};
    std::size_t next_key = 0, fresh_names = 0;
    for (int round = 0; round < 30; ++round) {
        const std::size_t n = 1 + rng() % 40;
        std::vector<std::string> keys, labels, tenants;
        std::vector<float> vectors;
        const bool upsert = round % 3 == 2 && !model.empty();
        for (std::size_t i = 0; i < n; ++i) {
            if (upsert && i % 2 == 0) {
                auto it = model.begin();
                std::advance(it, rng() % model.size());
                if (std::find(keys.begin(), keys.end(), it->first) != keys.end()) continue;
                keys.push_back(it->first);
            } else {
                keys.push_back(encode_int_key(static_cast<std::int64_t>(next_key++)));
            }
            // Runs of one name, names from the pool, and names never seen before.
            const bool fresh = rng() % 5 == 0;
            const std::string label = fresh ? "label " + std::to_string(fresh_names++) : pool[(round + i / 4) % pool.size()];
            labels.push_back(label);
            tenants.push_back(rng() % 3 ? pool[rng() % pool.size()] : "tenant " + std::to_string(fresh_names++));
            for (int d = 0; d < 4; ++d) vectors.push_back(static_cast<float>(rng() % 7) + 1.f);
        }
        NodeBatch batch;
        batch.count = keys.size();
        batch.keys = keys.data();
        batch.vectors = vectors.data();
        batch.labels = labels.data();
        batch.tenants = tenants.data();
        const std::size_t labels_before = engine->stats().count_labels, tenants_before = engine->stats().count_tenants;
        // The same batch with its last key repeated is refused and interns nothing.
        std::vector<std::string> repeated = keys;
        repeated.back() = repeated.front();
        NodeBatch refused = batch;
        refused.keys = repeated.data();
        CHECK(!(upsert ? engine->upsert_nodes(refused) : engine->add_nodes(refused)).ok());
        CHECK_EQ(engine->stats().count_labels, labels_before);
        CHECK_EQ(engine->stats().count_tenants, tenants_before);
        REQUIRE((upsert ? engine->upsert_nodes(batch) : engine->add_nodes(batch)).ok());
        for (std::size_t i = 0; i < keys.size(); ++i) model[keys[i]] = {labels[i], tenants[i]};
    }
    std::set<std::string> label_names, tenant_names;
    for (const auto& [key, names] : model) {
        const NodeRecord record = engine->node(engine->find(key).value(), false);
        CHECK_EQ(record.label, names.first);
        CHECK_EQ(record.tenant, names.second);
        label_names.insert(names.first);
        tenant_names.insert(names.second);
    }
    // Every name interned was used by some row (upserts can leave a name with no node).
    CHECK(engine->stats().count_labels >= label_names.size());
    CHECK(engine->stats().count_tenants >= tenant_names.size());
    CHECK(fresh_names > 20);
    for (const std::string& label : label_names) {
        std::vector<std::string> keys;
        for (const auto& [key, names] : model)
            if (names.first == label) keys.push_back(key);
        SearchRequest request;
        request.k = 1000;
        request.seeds = 1000;  // hops 0: the results are the seeds
        request.hops = 0;
        request.exact = true;
        request.filter_labels = true;
        request.labels = {label};
        std::vector<float> q = {1, 1, 1, 1};
        auto result = engine->search(q.data(), 4, request).value();
        std::vector<std::string> found;
        for (const Hit& hit : result.hits) found.emplace_back(engine->key(hit.node));
        std::sort(found.begin(), found.end());
        std::sort(keys.begin(), keys.end());
        CHECK(found == keys);
    }
    CHECK(engine->verify(10).empty());
}

TEST_CASE("request validation names the parameter and the value") {
    auto engine = chain();
    std::vector<float> q = {1, 0, 0, 0};
    SearchRequest request;
    request.k = 0;
    Status s = engine->search(q.data(), 4, request).status();
    CHECK(s.code() == StatusCode::invalid_argument);
    CHECK(s.message() == "k must be >= 1, got 0");
    request.k = 1;
    request.hops = -1;
    CHECK(engine->search(q.data(), 4, request).status().code() == StatusCode::invalid_argument);
    request.hops = 1;
    CHECK(engine->search(q.data(), 3, request).status().code() == StatusCode::dimension_mismatch);
    std::vector<float> zero = {0, 0, 0, 0};
    CHECK(engine->search(zero.data(), 4, request).status().code() == StatusCode::invalid_argument);
}

TEST_CASE("HNSW seeds match exact seeds on a small graph (recall@10 >= 0.95 at ef = n)") {
    auto engine = make(16);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    RandomNodes nodes(500, 16, rng);
    REQUIRE(engine->add_nodes(nodes.batch).ok());
    SearchRequest request;
    request.hops = 0;
    request.k = 10;
    request.seeds = 10;
    request.ef = 500;
    std::size_t same = 0;
    for (int t = 0; t < 50; ++t) {
        std::vector<float> q(16);
        for (auto& v : q) v = normal(rng);
        request.exact = false;
        auto approx = engine->search(q.data(), 16, request).value();
        request.exact = true;
        auto exact = engine->search(q.data(), 16, request).value();
        REQUIRE(approx.hits.size() == 10u);
        // HNSW is approximate even with ef = n, so count the exact top 10 found, not positions.
        for (const Hit& want : exact.hits)
            for (const Hit& got : approx.hits) same += got.node == want.node;
    }
    CHECK(same >= 475u);  // recall@10 >= 0.95 over 50 queries
}

TEST_CASE("inserts on two threads leave no node unreachable: each is its own nearest seed") {
    // Side-by-side inserts can leave a member with no in-link (SeedIndex::relink_unreachable);
    // batches of 1,000 are checked by a walk of the whole graph, batches of 300 into a larger
    // index by each member's own links. Either way every node must be found from its vector,
    // but for at most one that HNSW (approximate) reaches only through farther members (1 of
    // 210 builds of 6,000 nodes in a stress run had one), which a search as wide as the index finds.
    for (std::size_t batch : {1000u, 300u}) {
        EngineConfig config;
        config.dim = 16;
        config.threads = 2;
        auto engine = vecgraph_test::create_engine(config);
        std::mt19937 rng(static_cast<unsigned>(batch));
        std::vector<std::unique_ptr<RandomNodes>> parts;
        for (std::size_t first = 0; first < 6000; first += batch) {
            parts.push_back(std::make_unique<RandomNodes>(batch, 16, rng, static_cast<std::int64_t>(first)));
            REQUIRE(engine->add_nodes(parts.back()->batch).ok());
        }
        SearchRequest request;
        request.hops = 0;
        request.k = 1;
        std::size_t missed = 0;
        for (const auto& part : parts)
            for (std::size_t i = 0; i < part->keys.size(); ++i) {
                auto result = engine->search(part->vectors.data() + i * 16, 16, request).value();
                if (!result.hits.empty() && engine->key(result.hits[0].node) == part->keys[i]) continue;
                ++missed;
                SearchRequest wide = request;
                wide.ef = 6000;
                auto again = engine->search(part->vectors.data() + i * 16, 16, wide).value();
                CHECK(!again.hits.empty() && engine->key(again.hits[0].node) == part->keys[i]);
            }
        CHECK(missed <= 1u);
        CHECK(engine->verify(10).empty());
    }
}

TEST_CASE("deferred indexing, HNSW save and load, and verify") {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    const std::size_t n = 400, dim = 8;
    RandomNodes data(n, dim, rng);
    NodeBatch& nodes = data.batch;
    const std::vector<std::string>& keys = data.keys;
    const std::vector<float>& vectors = data.vectors;
    auto built = make(dim);
    REQUIRE(built->defer_indexing(true).ok());
    REQUIRE(built->add_nodes(nodes).ok());
    CHECK(built->count_deferred() == n);
    CHECK(built->verify(10).empty());  // waiting nodes are not "missing" from HNSW
    SearchRequest request;
    request.hops = 0;
    request.k = 5;
    request.seeds = 5;
    CHECK(built->search(vectors.data(), dim, request).value().hits.empty());  // no HNSW seed yet
    REQUIRE(built->defer_indexing(false).ok());
    CHECK(built->count_deferred() == 0u);
    CHECK(built->verify(10).empty());
    // Edges by node id, and the verify of the CSR and delta they make.
    std::vector<node_id_t> src, dst;
    for (node_id_t i = 0; i + 1 < n; ++i) src.push_back(i), dst.push_back(i + 1);
    EdgeBatch edges;
    edges.count = src.size();
    edges.src_ids = src.data();
    edges.dst_ids = dst.data();
    REQUIRE(built->add_edges(edges).ok());
    CHECK(built->verify(10).empty());
    REQUIRE(built->compact().ok());
    CHECK(built->verify(10).empty());

    vecgraph_test::TempDir tmp("vecgraph_engine");
    const std::string path = tmp.path("hnsw.usearch");
    bool saved = false;
    built->pause_writes([&] { REQUIRE(built->save_seed_index(path, &saved).ok()); });
    CHECK(saved);
    auto loaded = make(dim);
    CHECK(loaded->load_seed_index(path).code() == StatusCode::invalid_argument);  // not deferring
    REQUIRE(loaded->defer_indexing(true).ok());
    REQUIRE(loaded->add_nodes(nodes).ok());
    REQUIRE(loaded->load_seed_index(path).ok());
    CHECK(loaded->count_deferred() == 0u);
    REQUIRE(loaded->defer_indexing(false).ok());
    CHECK(loaded->verify(10).empty());
    for (std::size_t q = 0; q < 20; ++q) {
        auto a = built->search(vectors.data() + q * dim, dim, request).value();
        auto b = loaded->search(vectors.data() + q * dim, dim, request).value();
        REQUIRE(a.hits.size() == b.hits.size());
        for (std::size_t i = 0; i < a.hits.size(); ++i) CHECK(a.hits[i].node == b.hits[i].node);
    }
    // A file for a bigger graph names nodes this one does not have: corruption, nothing changes.
    auto smaller = make(dim);
    nodes.count = n / 2;
    REQUIRE(smaller->defer_indexing(true).ok());
    REQUIRE(smaller->add_nodes(nodes).ok());
    Status status = smaller->load_seed_index(path);
    CHECK(status.code() == StatusCode::corruption);
    CHECK(smaller->count_deferred() == n / 2);
    // A truncated file likewise.
    {
        std::ifstream in(path, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    }
    auto other = make(dim);
    nodes.count = n;
    REQUIRE(other->defer_indexing(true).ok());
    REQUIRE(other->add_nodes(nodes).ok());
    CHECK(other->load_seed_index(path).code() == StatusCode::corruption);
    REQUIRE(smaller->defer_indexing(false).ok());
    CHECK(smaller->verify(10).empty());
    std::remove(path.c_str());
    // After a delete or an upsert the HNSW graph no longer maps one member per node: not saved.
    auto key = keys[3];
    std::size_t deleted = 0;
    REQUIRE(built->delete_nodes(&key, 1, false, &deleted).ok());
    built->pause_writes([&] { REQUIRE(built->save_seed_index(path, &saved).ok()); });
    CHECK(!saved);
    CHECK(!std::filesystem::exists(path));
    CHECK(built->verify(10).empty());
}

TEST_CASE("searches from several threads while a writer adds nodes and edges") {
    auto engine = make(8);
    std::atomic<bool> done{false};
    std::atomic<std::size_t> searches{0}, inconsistent{0};
    auto reader = [&] {
        std::mt19937 rng(11);
        std::normal_distribution<float> normal;
        SearchRequest request;
        std::vector<float> q(8);
        while (!done) {
            for (auto& v : q) v = normal(rng);
            auto result = engine->search(q.data(), 8, request);
            if (!result.ok()) ++inconsistent;
            else
                for (const Hit& hit : result.value().hits)
                    if (hit.node >= engine->count_nodes()) ++inconsistent;
            ++searches;
        }
    };
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) readers.emplace_back(reader);
    std::mt19937 rng(13);
    for (int batch = 0; batch < 50; ++batch) {
        RandomNodes nodes(20, 8, rng, batch * 20);
        REQUIRE(engine->add_nodes(nodes.batch).ok());
        std::vector<std::string> src, dst;
        for (int i = 0; i < 20; ++i) {
            src.push_back(encode_int_key(batch * 20 + i));
            dst.push_back(encode_int_key((batch * 20 + i * 7) % ((batch + 1) * 20)));
        }
        EdgeBatch edges;
        edges.count = 20;
        edges.src = src.data();
        edges.dst = dst.data();
        REQUIRE(engine->add_edges(edges).ok());
    }
    done = true;
    for (auto& thread : readers) thread.join();
    CHECK_EQ(engine->count_nodes(), 1000u);
    CHECK_EQ(engine->count_edges(), 1000u);
    CHECK_EQ(inconsistent.load(), 0u);
    CHECK(searches.load() > 0u);
}

TEST_MAIN()

TEST_CASE("update_nodes changes only the given columns; an upsert without tenants keeps the tenant") {
    auto engine = make(4);
    auto keys = text_keys({"a", "b", "c"});
    std::vector<float> vectors = {1, 2, 3, 4, 4, 3, 2, 1, 1, 0, 0, 1};
    std::vector<std::string> labels = {"person", "person", "org"}, tenants = {"u1", "u1", "u2"};
    std::vector<std::string> texts = {"alpha", "beta", "gamma"}, props = {"{\"x\":1}", "", "{\"y\":2}"};
    std::vector<std::int64_t> ts = {10, 20, 30};
    NodeBatch nodes{3, keys.data(), vectors.data(), nullptr, labels.data(), tenants.data(), ts.data(), texts.data(), props.data()};
    REQUIRE(engine->add_nodes(nodes).ok());
    auto codes_of = [&](const std::string& key) {  // the stored codes and scale, exactly
        std::vector<std::int8_t> codes(4);
        float scale = 0;
        engine->node_codes(engine->find(key).value(), codes.data(), &scale);
        return std::make_pair(codes, scale);
    };
    const auto codes_b = codes_of(keys[1]);
    const std::uint64_t lsn = engine->last_lsn();

    // Texts only: every other column and the vector's codes stay.
    std::string b = keys[1];
    std::string new_text = "beta two";
    NodeBatch text_only;
    text_only.count = 1;
    text_only.keys = &b;
    text_only.texts = &new_text;
    REQUIRE(engine->update_nodes(text_only).ok());
    NodeRecord r = engine->node(engine->find(b).value(), false);
    CHECK_EQ(r.text, std::string("beta two"));
    CHECK_EQ(r.label, std::string("person"));
    CHECK_EQ(r.tenant, std::string("u1"));
    CHECK_EQ(r.ts, std::int64_t{20});
    CHECK_EQ(r.props, std::string(""));
    CHECK(codes_of(b) == codes_b);
    CHECK_EQ(engine->last_lsn(), lsn + 1);

    // A key not in the graph: not_found naming it, nothing changes, nothing logged.
    std::vector<std::string> two = {keys[0], encode_text_key("zz")};
    std::vector<std::string> two_texts = {"changed", "changed"};
    NodeBatch missing;
    missing.count = 2;
    missing.keys = two.data();
    missing.texts = two_texts.data();
    Status s = engine->update_nodes(missing);
    CHECK(s.code() == StatusCode::not_found);
    CHECK(s.message().find("'zz' (row 1)") != std::string::npos);
    CHECK_EQ(engine->node(engine->find(keys[0]).value(), false).text, std::string("alpha"));
    CHECK_EQ(engine->last_lsn(), lsn + 1);
    // A key twice: refused.
    std::vector<std::string> twice = {keys[0], keys[0]};
    missing.keys = twice.data();
    CHECK(engine->update_nodes(missing).code() == StatusCode::already_exists);

    // An upsert without tenants keeps c's tenant ("u2") and gives a new key ""; other columns reset.
    std::vector<std::string> up = {keys[2], encode_text_key("d")};
    std::vector<float> up_vectors = {0, 1, 1, 0, 1, 1, 1, 1};
    NodeBatch upsert;
    upsert.count = 2;
    upsert.keys = up.data();
    upsert.vectors = up_vectors.data();
    REQUIRE(engine->upsert_nodes(upsert).ok());
    r = engine->node(engine->find(keys[2]).value(), false);
    CHECK_EQ(r.tenant, std::string("u2"));
    CHECK_EQ(r.label, std::string(""));
    CHECK_EQ(r.text, std::string(""));
    CHECK_EQ(engine->node(engine->find(up[1]).value(), false).tenant, std::string(""));
    // With tenants given, the upsert moves it.
    std::vector<std::string> moved = {"u3", "u3"};
    upsert.tenants = moved.data();
    REQUIRE(engine->upsert_nodes(upsert).ok());
    CHECK_EQ(engine->node(engine->find(keys[2]).value(), false).tenant, std::string("u3"));

    // An update of the vector and the tenant: a tenant filter finds the node under its new tenant only.
    std::vector<float> new_vector = {-1, 0, 0, 0};
    std::string u4 = "u4";
    NodeBatch vector_and_tenant;
    vector_and_tenant.count = 1;
    vector_and_tenant.keys = &keys[0];
    vector_and_tenant.vectors = new_vector.data();
    vector_and_tenant.tenants = &u4;
    REQUIRE(engine->update_nodes(vector_and_tenant).ok());
    r = engine->node(engine->find(keys[0]).value(), true);
    CHECK_EQ(r.tenant, std::string("u4"));
    CHECK_EQ(r.text, std::string("alpha"));
    CHECK_EQ(r.props, std::string("{\"x\":1}"));
    CHECK(r.vector[0] < -0.99f);
    for (const char* tenant : {"u1", "u4"}) {
        SearchRequest request;
        request.k = 10;
        request.seeds = 10;
        request.hops = 0;
        request.filter_tenants = true;
        request.tenants = {tenant};
        auto found = engine->search(new_vector.data(), 4, request);
        REQUIRE(found.ok());
        const auto hits = keys_of(*engine, found.value());
        CHECK_EQ(std::count(hits.begin(), hits.end(), std::string("a")), std::string(tenant) == "u4" ? 1 : 0);
    }
    CHECK(engine->verify(10).empty());
}
