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

double seconds() {
    const char* env = std::getenv("VECGRAPH_STRESS_SECONDS");
    return env ? std::atof(env) : 3.0;
}

}  // namespace

TEST_CASE("4 searchers and 1 writer: deleted keys never come back, live keys are found") {
    EngineConfig config;
    config.dim = dim;
    config.auto_compact_edges = 200;  // compactions run often, beside the searches
    auto created = Engine::create(config);
    REQUIRE(created.ok());
    Engine& engine = *created.value();

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
                std::string key = key_of(next_key);
                std::vector<float> v = vector_of(next_key);
                NodeBatch batch;
                batch.count = 1;
                batch.keys = &key;
                batch.vectors = v.data();
                REQUIRE(engine.add_nodes(batch).ok());
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
        SearchRequest request;
        request.k = 20;
        request.seeds = 4;
        request.hops = 2;
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
    SearchRequest request;
    request.k = 1;
    request.seeds = 1;
    request.hops = 0;
    request.exact = true;
    std::size_t missing = 0;
    for (std::size_t i : live) {
        std::vector<float> v = vector_of(i);
        auto result = engine.search(v.data(), dim, request);
        REQUIRE(result.ok());
        if (result.value().hits.empty() || std::string(engine.key(result.value().hits[0].node)) != key_of(i)) ++missing;
    }
    CHECK_EQ(missing, std::size_t{0});
}

TEST_MAIN()
