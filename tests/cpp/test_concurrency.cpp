// Concurrency: 4 searching threads and 1 writing thread (adds, upserts, edge adds and deletes,
// node deletes, compactions). No crash (also under VECGRAPH_SANITIZE), no deleted key returned
// by a search that started after its delete returned, and at the end every live node is found
// first by an exact search for its own vector.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "engines.hpp"
#include "vecgraph/engine.hpp"

using namespace vecgraph;

namespace {

constexpr std::size_t dim = 16;

std::vector<float> vector_of(std::size_t i) {
    std::mt19937 rng(static_cast<unsigned>(i * 7919 + 1));
    std::normal_distribution<float> normal;
    std::vector<float> v(dim);
    for (float& x : v) x = normal(rng);
    return v;
}

std::string key_of(std::size_t i) { return encode_text_key("n" + std::to_string(i)); }

// Adds (or upserts) node i with its own vector.
Status write_node(Engine& engine, std::size_t i, bool upsert = false) {
    std::string key = key_of(i);
    std::vector<float> v = vector_of(i);
    NodeBatch batch;
    batch.count = 1;
    batch.keys = &key;
    batch.vectors = v.data();
    return upsert ? engine.upsert_nodes(batch) : engine.add_nodes(batch);
}

SearchRequest request_of(int k, int seeds, int hops, bool exact = false) {
    SearchRequest request;
    request.k = k;
    request.seeds = seeds;
    request.hops = hops;
    request.exact = exact;
    return request;
}

// Live nodes whose own vector does not find them first by an exact search.
std::size_t missing_by_exact_search(Engine& engine, const std::set<std::size_t>& live) {
    const SearchRequest request = request_of(1, 1, 0, true);
    std::size_t missing = 0;
    for (std::size_t i : live) {
        std::vector<float> v = vector_of(i);
        auto result = engine.search(v.data(), dim, request);
        REQUIRE(result.ok());
        if (result.value().hits.empty() || std::string(engine.key(result.value().hits[0].node)) != key_of(i)) ++missing;
    }
    return missing;
}

std::unique_ptr<Engine> make_engine(std::size_t auto_compact_edges = EngineConfig{}.auto_compact_edges) {
    EngineConfig config;
    config.dim = dim;
    config.auto_compact_edges = auto_compact_edges;
    return vecgraph_test::create_engine(config);
}

double seconds() {
    const char* env = std::getenv("VECGRAPH_STRESS_SECONDS");
    return env ? std::atof(env) : 3.0;
}

}  // namespace

TEST_CASE("4 searchers and 1 writer: deleted keys never come back, live keys are found") {
    auto owner = make_engine(200);  // compactions run often, beside the searches
    Engine& engine = *owner;

    std::mutex deleted_mutex;
    std::vector<std::string> deleted;  // in delete order; keys are never re-added
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> violations{0}, searches{0}, writes{0};
    std::size_t next_key = 0;
    std::set<std::size_t> live;

    auto writer = [&] {
        std::mt19937 rng(1);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds());
        while (std::chrono::steady_clock::now() < deadline) {
            int op = static_cast<int>(rng() % 10);
            if (op < 4 || live.size() < 20) {  // add a node
                REQUIRE(write_node(engine, next_key).ok());
                live.insert(next_key++);
            } else if (op < 7) {  // add an edge between live nodes
                auto a = std::next(live.begin(), static_cast<long>(rng() % live.size()));
                auto b = std::next(live.begin(), static_cast<long>(rng() % live.size()));
                std::string src = key_of(*a), dst = key_of(*b);
                EdgeBatch batch;
                batch.count = 1;
                batch.src = &src;
                batch.dst = &dst;
                REQUIRE(engine.add_edges(batch).ok());
            } else if (op < 8) {  // upsert with the same vector (the check below needs it)
                auto a = std::next(live.begin(), static_cast<long>(rng() % live.size()));
                std::string key = key_of(*a);
                std::vector<float> v = vector_of(*a);
                std::string text = "upserted";
                NodeBatch batch;
                batch.count = 1;
                batch.keys = &key;
                batch.vectors = v.data();
                batch.texts = &text;
                REQUIRE(engine.upsert_nodes(batch).ok());
            } else {  // delete a node
                auto a = std::next(live.begin(), static_cast<long>(rng() % live.size()));
                std::string key = key_of(*a);
                std::size_t count = 0;
                REQUIRE(engine.delete_nodes(&key, 1, false, &count).ok());
                CHECK_EQ(count, std::size_t{1});
                live.erase(a);
                std::lock_guard<std::mutex> lock(deleted_mutex);
                deleted.push_back(key);
            }
            ++writes;
        }
        stop = true;
    };

    auto searcher = [&](unsigned seed) {
        std::mt19937 rng(seed);
        SearchRequest request = request_of(20, 4, 2);
        while (!stop) {
            std::set<std::string> gone;
            {
                std::lock_guard<std::mutex> lock(deleted_mutex);
                gone.insert(deleted.begin(), deleted.end());
            }
            std::vector<float> q = vector_of(rng() % (next_key + 1) + 1000000);
            request.exact = rng() % 2;
            auto result = engine.search(q.data(), dim, request);
            REQUIRE(result.ok());
            for (const Hit& hit : result.value().hits)
                if (gone.count(std::string(engine.key(hit.node)))) ++violations;
            ++searches;
        }
    };

    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 4; ++t) threads.emplace_back(searcher, t + 10);
    writer();
    for (auto& thread : threads) thread.join();
    engine.wait_for_compaction();

    CHECK_EQ(violations.load(), std::size_t{0});
    CHECK(searches.load() > 0u);
    CHECK(writes.load() > 0u);
    CHECK_EQ(engine.count_nodes(), live.size());
    CHECK_EQ(missing_by_exact_search(engine, live), std::size_t{0});
}

TEST_CASE("background HNSW pass: searches, writes and deletes run beside it; at the end the index is whole") {
    auto owner = make_engine();
    Engine& engine = *owner;
    constexpr std::size_t loaded = 6000;
    REQUIRE(engine.defer_indexing(true).ok());
    for (std::size_t first = 0; first < loaded; first += 500) {
        std::vector<std::string> keys;
        std::vector<float> vectors;
        for (std::size_t i = first; i < first + 500; ++i) {
            keys.push_back(key_of(i));
            std::vector<float> v = vector_of(i);
            vectors.insert(vectors.end(), v.begin(), v.end());
        }
        NodeBatch batch;
        batch.count = keys.size();
        batch.keys = keys.data();
        batch.vectors = vectors.data();
        REQUIRE(engine.add_nodes(batch).ok());
    }
    REQUIRE(engine.defer_indexing(false, 1).ok());  // returns at once: the pass runs beside us
    CHECK(engine.count_index_pending() > 0u);

    std::atomic<bool> stop{false};
    std::atomic<std::size_t> searches{0}, self_found{0}, deleted_returned{0};
    std::mutex deleted_mutex;
    std::set<std::string> deleted;
    auto searcher = [&](unsigned seed) {
        std::mt19937 rng(seed);
        const SearchRequest request = request_of(1, 1, 0);
        while (!stop) {
            std::size_t i = rng() % loaded;
            std::set<std::string> gone;  // deletes that returned before this search starts
            {
                std::lock_guard<std::mutex> lock(deleted_mutex);
                gone = deleted;
            }
            std::vector<float> v = vector_of(i);
            auto result = engine.search(v.data(), dim, request);
            REQUIRE(result.ok());
            std::string key = result.value().hits.empty() ? "" : std::string(engine.key(result.value().hits[0].node));
            if (gone.count(key)) ++deleted_returned;
            if (gone.count(key_of(i))) continue;  // its own node is gone (or going): nothing to find
            if (key == key_of(i)) ++self_found;
            ++searches;
        }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 3; ++t) threads.emplace_back(searcher, t + 100);
    std::mt19937 rng(5);
    std::set<std::size_t> live;
    for (std::size_t i = 0; i < loaded; ++i) live.insert(i);
    std::size_t next_key = loaded;
    while (engine.count_index_pending() > 0) {  // writes during the pass
        int op = static_cast<int>(rng() % 3);
        if (op == 0) {
            REQUIRE(write_node(engine, next_key).ok());
            live.insert(next_key++);
        } else if (op == 1) {  // upsert, same vector: waiting or indexed, it is indexed once more
            std::size_t i = rng() % loaded;
            if (live.count(i)) REQUIRE(write_node(engine, i, true).ok());
        } else {
            std::size_t i = rng() % loaded;
            if (!live.count(i)) continue;
            std::string key = key_of(i);
            std::size_t count = 0;
            REQUIRE(engine.delete_nodes(&key, 1, false, &count).ok());
            live.erase(i);
            std::lock_guard<std::mutex> lock(deleted_mutex);
            deleted.insert(key);
        }
    }
    REQUIRE(engine.wait_for_indexing().ok());
    stop = true;
    for (auto& thread : threads) thread.join();
    CHECK(searches.load() > 0u);
    CHECK_EQ(deleted_returned.load(), std::size_t{0});
    CHECK(self_found.load() * 100 >= searches.load() * 99);  // HNSW is approximate once a node is indexed
    CHECK_EQ(engine.count_index_pending(), std::size_t{0});
    auto problems = engine.verify(10);
    for (const std::string& line : problems) std::printf("verify: %s\n", line.c_str());
    CHECK(problems.empty());
    CHECK_EQ(missing_by_exact_search(engine, live), std::size_t{0});
}

TEST_CASE("4 writers at once: each node is an HNSW seed when its add returns; verify() beside them") {
    // Writes from several threads take turns; each call returns once its node is an HNSW
    // member, a verify() running beside the writers finds nothing wrong at any point, and at
    // the end the nodes are found as their own nearest seeds (all but HNSW's rare misses).
    auto owner = make_engine();
    Engine& engine = *owner;
    constexpr std::size_t writers = 4, per_writer = 600;
    std::atomic<std::size_t> missed_own{0}, verify_problems{0}, verifies{0};
    std::atomic<bool> stop{false};
    auto writer = [&](std::size_t t) {
        // ef far above the index size: a search reaches every member that has an in-link.
        SearchRequest request = request_of(1, 1, 0);
        request.ef = 4 * writers * per_writer;
        for (std::size_t j = 0; j < per_writer; ++j) {
            std::size_t i = j * writers + t;
            REQUIRE(write_node(engine, i).ok());
            if (j % 5 == 4) REQUIRE(write_node(engine, i, true).ok());  // upsert, same vector
            std::vector<float> v = vector_of(i);
            auto result = engine.search(v.data(), dim, request);
            REQUIRE(result.ok());
            if (result.value().hits.empty() || std::string(engine.key(result.value().hits[0].node)) != key_of(i))
                ++missed_own;
        }
    };
    std::thread checker([&] {
        while (!stop) {
            auto problems = engine.verify(10);
            for (const std::string& line : problems) std::printf("verify during writes: %s\n", line.c_str());
            verify_problems += problems.size();
            ++verifies;
            // verify() excludes writes while it runs, and a mutex need not be fair: a checker
            // that calls again at once can keep the writers out for minutes on a slow machine.
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < writers; ++t) threads.emplace_back(writer, t);
    for (auto& thread : threads) thread.join();
    stop = true;
    checker.join();
    CHECK(verifies.load() > 0u);
    CHECK_EQ(verify_problems.load(), std::size_t{0});
    // HNSW pruning can leave a node without in-links now and then even when inserts run one at
    // a time (seen: 1 of 2,400 in a sanitizer build); an add that returned before its insert
    // would miss its node every time.
    CHECK(missed_own.load() * 200 <= writers * per_writer);
    CHECK_EQ(engine.count_nodes(), writers * per_writer);
    CHECK(engine.verify(10).empty());
    const SearchRequest request = request_of(1, 1, 0);
    std::size_t missed = 0;
    for (std::size_t i = 0; i < writers * per_writer; ++i) {
        std::vector<float> v = vector_of(i);
        auto result = engine.search(v.data(), dim, request);
        REQUIRE(result.ok());
        missed += result.value().hits.empty() || std::string(engine.key(result.value().hits[0].node)) != key_of(i);
    }
    CHECK(missed * 200 <= writers * per_writer);
}

TEST_MAIN()
