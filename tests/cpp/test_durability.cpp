// Engine + WAL: every write kind replays into a fresh engine to the same state; a failed fsync
// fails the write that saw it and turns the engine read-only (never retried); a rejected batch
// is not logged, and one too large for a WAL record leaves the engine writable; a logged write
// that cannot be applied (out of memory) turns the engine read-only, and a reopen applies it.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "child_process.hpp"
#include "temp_dir.hpp"
#include "vecgraph/engine.hpp"

using namespace vecgraph;

// While non-zero, an allocation of more bytes than this throws std::bad_alloc.
std::atomic<std::size_t> fail_allocations_over{0};
// While positive, counts allocations down; the one that brings it to zero throws std::bad_alloc.
// (The library's operator delete frees with std::free, which fits this operator new.)
std::atomic<long> fail_allocation_in{0};

// The same, counting only the allocations of threads other than the one that armed it (which
// clears its own counted_thread): the threads the engine starts.
std::atomic<long> fail_thread_allocation_in{0};
thread_local bool counted_thread = true;

void* operator new(std::size_t bytes) {
    const std::size_t limit = fail_allocations_over.load(std::memory_order_relaxed);
    if (limit && bytes > limit) throw std::bad_alloc();
    if (fail_allocation_in.load(std::memory_order_relaxed) > 0 && fail_allocation_in.fetch_sub(1) == 1)
        throw std::bad_alloc();
    if (counted_thread && fail_thread_allocation_in.load(std::memory_order_relaxed) > 0 &&
        fail_thread_allocation_in.fetch_sub(1) == 1)
        throw std::bad_alloc();
    if (void* p = std::malloc(bytes ? bytes : 1)) return p;
    throw std::bad_alloc();
}

namespace {

constexpr std::size_t dim = 8;
const wal::Uuid uuid = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

std::unique_ptr<Engine> make() {
    EngineConfig config;
    config.dim = dim;
    config.auto_compact_edges = 3;
    auto created = Engine::create(config);
    REQUIRE(created.ok());
    return std::move(created).value();
}

std::vector<float> vector_of(std::size_t i) {
    std::mt19937 rng(static_cast<unsigned>(i + 1));
    std::normal_distribution<float> normal;
    std::vector<float> v(dim);
    for (float& x : v) x = normal(rng);
    return v;
}

Status add_node(Engine& engine, const std::string& name, std::size_t seed, const std::string& tenant = "",
                bool upsert = false) {
    std::string key = encode_text_key(name);
    std::vector<float> v = vector_of(seed);
    NodeBatch batch;
    batch.count = 1;
    batch.keys = &key;
    batch.vectors = v.data();
    batch.tenants = &tenant;
    return upsert ? engine.upsert_nodes(batch) : engine.add_nodes(batch);
}

Status add_edge(Engine& engine, const std::string& a, const std::string& b, const std::string& rel) {
    std::string src = encode_text_key(a), dst = encode_text_key(b);
    EdgeBatch batch;
    batch.count = 1;
    batch.src = &src;
    batch.dst = &dst;
    batch.rels = &rel;
    return engine.add_edges(batch);
}

// Keys and scores of an exact search with traversal, as one comparable string.
std::string fingerprint(const Engine& engine, std::size_t seed) {
    std::vector<float> q = vector_of(seed);
    SearchRequest request;
    request.k = 20;
    request.seeds = 3;
    request.hops = 3;
    request.exact = true;
    auto result = engine.search(q.data(), dim, request);
    REQUIRE(result.ok());
    std::string out;
    for (const Hit& hit : result.value().hits)
        out += std::string(engine.key(hit.node)) + ":" + std::to_string(hit.score) + ":" + std::to_string(hit.hop) + " ";
    return out;
}

}  // namespace

TEST_CASE("every write kind replays into a fresh engine to the same state") {
    vecgraph_test::TempDir tmp("vecgraph_replay");
    const std::string dir = tmp.root.string();
    auto engine = make();
    wal::WriterOptions options;
    options.sync = wal::SyncPolicy::off;
    REQUIRE(engine->attach_wal(dir, uuid, 1, options).ok());
    for (std::size_t i = 0; i < 12; ++i)
        REQUIRE(add_node(*engine, "n" + std::to_string(i), i, i % 3 == 0 ? "t" : "").ok());
    for (std::size_t i = 0; i + 1 < 12; ++i)
        REQUIRE(add_edge(*engine, "n" + std::to_string(i), "n" + std::to_string(i + 1), i % 2 ? "r" : "s").ok());
    REQUIRE(add_node(*engine, "n4", 100, "", true).ok());  // upsert: new vector, edges stay
    std::string gone = encode_text_key("n7");
    std::size_t count = 0;
    REQUIRE(engine->delete_nodes(&gone, 1, false, &count).ok());
    CHECK_EQ(count, std::size_t{1});
    std::string s = encode_text_key("n1"), d = encode_text_key("n2");
    EdgeSelection selection{1, &s, &d, nullptr};
    REQUIRE(engine->delete_edges(selection, false, &count).ok());
    CHECK_EQ(count, std::size_t{1});
    REQUIRE(engine->delete_tenant("t", &count).ok());
    CHECK_EQ(count, std::size_t{4});  // n0, n3, n6, n9
    REQUIRE(add_node(*engine, "n7", 7).ok());  // a deleted key comes back as a new node
    // A rejected batch is not logged.
    CHECK(add_node(*engine, "n7", 8).code() == StatusCode::already_exists);
    std::uint64_t last = engine->last_lsn();
    CHECK_EQ(last, std::uint64_t{12 + 11 + 1 + 1 + 1 + 1 + 1});
    REQUIRE(engine->compact().ok());
    std::vector<std::string> before;
    for (std::size_t q = 0; q < 6; ++q) before.push_back(fingerprint(*engine, q * 5));
    std::size_t nodes = engine->count_nodes(), edges = engine->count_edges();
    REQUIRE(engine->close_wal().ok());

    auto again = make();
    auto report = again->replay_wal(dir, uuid, 1, true);
    REQUIRE(report.ok());
    CHECK_EQ(report.value().last_lsn, last);
    CHECK_EQ(report.value().replayed, last);
    CHECK_EQ(again->count_nodes(), nodes);
    CHECK_EQ(again->count_edges(), edges);
    CHECK_EQ(again->last_lsn(), last);
    for (std::size_t q = 0; q < 6; ++q) CHECK_EQ(fingerprint(*again, q * 5), before[q]);
    REQUIRE(again->compact().ok());  // base + delta and compacted base agree
    for (std::size_t q = 0; q < 6; ++q) CHECK_EQ(fingerprint(*again, q * 5), before[q]);
}

TEST_CASE("a failed fsync fails that write, is not retried, and makes the engine read-only") {
    vecgraph_test::TempDir tmp("vecgraph_fsync");
    const std::string dir = tmp.root.string();
    auto engine = make();
    int calls = 0;
    bool fail = false;
    wal::WriterOptions options;
    options.sync = wal::SyncPolicy::always;
    options.sync_hook = [&](int) {
        ++calls;
        if (fail) {
            errno = EIO;
            return -1;
        }
        return 0;
    };
    REQUIRE(engine->attach_wal(dir, uuid, 1, options).ok());
    REQUIRE(add_node(*engine, "a", 1).ok());
    int after_attach = calls;
    fail = true;
    Status failed = add_node(*engine, "b", 2);
    CHECK(failed.code() == StatusCode::io_error);
    int after_failure = calls;
    Status refused = add_node(*engine, "c", 3);
    CHECK(refused.code() == StatusCode::read_only);
    CHECK(refused.message().find("read-only") != std::string::npos);
    CHECK_EQ(calls, after_failure);  // no retry: the refused write did not sync again
    CHECK(after_failure > after_attach);
    std::string key = encode_text_key("a");
    std::size_t count = 0;
    CHECK(engine->delete_nodes(&key, 1, false, &count).code() == StatusCode::read_only);
    CHECK(engine->stats().read_only);
    CHECK(engine->find(encode_text_key("c")).status().code() == StatusCode::not_found);
}

TEST_CASE("a batch too large for one WAL record is rejected and the engine stays writable") {
    vecgraph_test::TempDir tmp("vecgraph_big_record");
    const std::string dir = tmp.root.string();
    auto engine = make();
    wal::WriterOptions options;
    options.sync = wal::SyncPolicy::off;
    options.max_record_bytes = 4096;  // the format allows 1 GiB; a lower limit keeps the test small
    REQUIRE(engine->attach_wal(dir, uuid, 1, options).ok());
    REQUIRE(add_node(*engine, "a", 1).ok());
    std::string key = encode_text_key("big"), text(5000, 'x');
    std::vector<float> v = vector_of(2);
    NodeBatch batch;
    batch.count = 1;
    batch.keys = &key;
    batch.vectors = v.data();
    batch.texts = &text;
    Status refused = engine->add_nodes(batch);
    CHECK(refused.code() == StatusCode::invalid_argument);
    CHECK(refused.message().find("split it into smaller batches") != std::string::npos);
    CHECK(refused.message().find("WAL limit is 4096") != std::string::npos);
    CHECK(engine->find(key).status().code() == StatusCode::not_found);
    CHECK_EQ(engine->last_lsn(), std::uint64_t{1});
    CHECK(!engine->stats().read_only);
    REQUIRE(add_node(*engine, "b", 3).ok());  // still writable; the refused batch took no LSN
    CHECK_EQ(engine->last_lsn(), std::uint64_t{2});
    REQUIRE(engine->close_wal().ok());
    auto again = make();
    auto report = again->replay_wal(dir, uuid, 1, true);
    REQUIRE(report.ok());
    CHECK_EQ(report.value().replayed, std::uint64_t{2});
    CHECK_EQ(again->count_nodes(), std::size_t{2});
    CHECK(again->find(key).status().code() == StatusCode::not_found);
}

TEST_CASE("a logged write that cannot be applied turns the engine read-only, and a reopen applies it") {
    vecgraph_test::TempDir tmp("vecgraph_apply_failure");
    const std::string dir = tmp.root.string();
    EngineConfig config;
    config.dim = dim;
    config.auto_compact_edges = 0;
    auto engine = std::move(Engine::create(config)).value();
    wal::WriterOptions options;
    options.sync = wal::SyncPolicy::off;
    REQUIRE(engine->attach_wal(dir, uuid, 1, options).ok());
    REQUIRE(add_node(*engine, "a", 1).ok());
    REQUIRE(add_node(*engine, "b", 2).ok());
    // One batch of 50,000 edges leaves the edge columns full: the next edge grows each of
    // them into a copy of 75,000 rows (300 KB for a column of 4-byte rows), after its record
    // (a few dozen bytes) is logged.
    constexpr std::size_t many = 50000;
    std::vector<std::string> src(many, encode_text_key("a")), dst(many, encode_text_key("b"));
    EdgeBatch batch;
    batch.count = many;
    batch.src = src.data();
    batch.dst = dst.data();
    REQUIRE(engine->add_edges(batch).ok());
    REQUIRE(engine->count_edges() == many);
    const std::uint64_t lsn_before = engine->last_lsn();
    fail_allocations_over = 100'000;
    Status failed = add_edge(*engine, "b", "a", "r");
    fail_allocations_over = 0;
    CHECK(failed.code() == StatusCode::internal);
    CHECK(failed.message().find("out of memory") != std::string::npos);
    CHECK(failed.message().find("reopen") != std::string::npos);
    CHECK(engine->stats().read_only);
    CHECK_EQ(engine->count_edges(), many);  // not applied
    Status refused = add_edge(*engine, "a", "b", "r");
    CHECK(refused.code() == StatusCode::read_only);
    CHECK(refused.message().find("could not be applied") != std::string::npos);
    REQUIRE(engine->close_wal().ok());
    auto again = make();
    auto report = again->replay_wal(dir, uuid, 1, true);
    REQUIRE(report.ok());
    CHECK_EQ(report.value().last_lsn, lsn_before + 1);  // the failed write's record, and no later one
    CHECK_EQ(again->count_edges(), many + 1);
}

namespace {

// What a write did in the child process of the allocation-failure sweep (its exit code).
enum Outcome : int { wrote = 0, logged_read_only = 1, rejected_writable = 2, inconsistent = 3, unindexed_read_only = 4 };

// A folder engine with 30 nodes (6 labels, texts) and 29 edges, its WAL synced by `sync`; then
// `write` with its K-th allocation failing. Runs in a child process: an abort there is one of the
// allowed outcomes.
int write_with_failing_allocation(const std::string& dir, int kind, wal::SyncPolicy sync, long k) {
    auto engine = make();
    wal::WriterOptions options;
    options.sync = sync;
    if (!engine->attach_wal(dir, uuid, 1, options).ok()) return inconsistent;
    for (std::size_t i = 0; i < 30; ++i)
        if (!add_node(*engine, "n" + std::to_string(i), i, "t" + std::to_string(i % 3)).ok()) return inconsistent;
    for (std::size_t i = 0; i + 1 < 30; ++i)
        if (!add_edge(*engine, "n" + std::to_string(i), "n" + std::to_string(i + 1), "r").ok()) return inconsistent;
    const std::uint64_t lsn_before = engine->last_lsn();
    const std::size_t nodes_before = engine->count_nodes(), edges_before = engine->count_edges();
    std::vector<std::string> keys = {encode_text_key(kind == 1 ? "n3" : "new1"), encode_text_key("new2"),
                                     encode_text_key("new3")};
    std::vector<std::string> labels = {"fresh label", "L1", "L2"}, texts = {"one", "", "three"};
    std::vector<float> vectors;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        std::vector<float> v = vector_of(100 + i);
        vectors.insert(vectors.end(), v.begin(), v.end());
    }
    std::vector<std::string> src = {encode_text_key("n0"), encode_text_key("n5"), encode_text_key("n9")};
    std::vector<std::string> dst = {encode_text_key("n7"), encode_text_key("n5"), encode_text_key("n2")};
    std::vector<std::string> rels = {"fresh rel", "r", "s"};
    auto write = [&]() -> Status {
        if (kind < 2) {
            NodeBatch batch;
            batch.count = keys.size();
            batch.keys = keys.data();
            batch.vectors = vectors.data();
            batch.labels = labels.data();
            batch.texts = texts.data();
            return kind == 1 ? engine->upsert_nodes(batch) : engine->add_nodes(batch);
        }
        EdgeBatch batch;
        batch.count = src.size();
        batch.src = src.data();
        batch.dst = dst.data();
        batch.rels = rels.data();
        return engine->add_edges(batch);
    };
    Status status;
    bool threw = false;  // std::bad_alloc before the record was logged: the write is refused
    fail_allocation_in = k;
    try {
        status = write();
    } catch (const std::bad_alloc&) {
        threw = true;
    }
    fail_allocation_in = 0;
    const std::vector<std::string> problems = engine->verify(10);
    const bool only_unindexed = std::all_of(problems.begin(), problems.end(), [](const std::string& problem) {
        return problem.find("not in the HNSW index") != std::string::npos;
    });
    if (status.ok() && !threw) return problems.empty() ? wrote : inconsistent;
    const bool unchanged = engine->count_nodes() == nodes_before && engine->count_edges() == edges_before;
    if (engine->stats().read_only) {
        // Logged, not applied.
        if (problems.empty() && unchanged && engine->last_lsn() == lsn_before) return logged_read_only;
        // Logged and applied; its HNSW insert failed (after the exclusive lock).
        if (!problems.empty() && only_unindexed && !unchanged && engine->last_lsn() == lsn_before + 1)
            return unindexed_read_only;
        return inconsistent;
    }
    // Refused before its record was logged: nothing changed, the engine takes the next write.
    return problems.empty() && unchanged && engine->last_lsn() == lsn_before && add_node(*engine, "later", 7).ok()
               ? rejected_writable
               : inconsistent;
}

}  // namespace

TEST_CASE("an allocation failing anywhere in a write: applied whole, refused whole, or the process stops") {
    // Each write kind, with its K-th allocation failing, K = 1, 2, ... until the write no longer
    // allocates that many times. Allowed: the write succeeds; it is refused and nothing is
    // logged (still writable); it is logged but not applied (read-only, reopen applies it); or
    // the process aborts (an exception under the exclusive lock). After each, the folder
    // reopens into a consistent graph holding the write if it was acknowledged.
    // Both WAL policies: "always" adds the fdatasync of each write (started while the HNSW
    // insert runs, waited for at the end).
    int outcomes[5] = {0, 0, 0, 0, 0}, aborted = 0;
    for (int run = 0; run < 6; ++run) {
        const int kind = run % 3;
        const wal::SyncPolicy sync = run < 3 ? wal::SyncPolicy::off : wal::SyncPolicy::always;
        int clean_runs = 0;  // K past the write's last allocation: it succeeds from then on
        for (long k = 1; clean_runs < 3 && k < 2000; ++k) {
            vecgraph_test::TempDir tmp("vecgraph_alloc_sweep");
            const std::string dir = tmp.root.string();
            const int wait_status =
                wait_status_of_child(inconsistent, [&] { return write_with_failing_allocation(dir, kind, sync, k); });
            const bool exited = WIFEXITED(wait_status);
            const bool aborts = WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGABRT;
            CHECK((exited || aborts));
            if (!exited && !aborts) std::printf("  run %d, K=%ld: killed by signal %d\n", run, k, WTERMSIG(wait_status));
            const int outcome = exited ? WEXITSTATUS(wait_status) : -1;
            CHECK(outcome != inconsistent);
            if (outcome == inconsistent) std::printf("  run %d, K=%ld: inconsistent engine\n", run, k);
            if (outcome >= 0 && outcome < 5) ++outcomes[outcome];
            if (aborts) ++aborted;
            clean_runs = outcome == wrote ? clean_runs + 1 : 0;
            // The folder reopens consistent; an acknowledged write is in it, a refused one is not.
            auto again = make();
            auto report = again->replay_wal(dir, uuid, 1, true);
            REQUIRE(report.ok());
            CHECK(again->verify(10).empty());
            const bool has_new2 = again->find(encode_text_key("new2")).ok(), has_new3 = again->find(encode_text_key("new3")).ok();
            const bool has_write = kind == 2 ? again->count_edges() == 29 + 3 : has_new2 && has_new3;
            const bool lacks_write = kind == 2 ? again->count_edges() == 29 : !has_new2 && !has_new3;
            CHECK((has_write || lacks_write));
            if (outcome == wrote || outcome == logged_read_only || outcome == unindexed_read_only) CHECK(has_write);
            if (outcome == rejected_writable) CHECK(again->find(encode_text_key("later")).ok());
        }
    }
    std::printf("  outcomes: %d wrote, %d refused, %d logged then read-only, %d applied but not indexed then "
                "read-only, %d aborted\n",
                outcomes[wrote], outcomes[rejected_writable], outcomes[logged_read_only], outcomes[unindexed_read_only],
                aborted);
    // The sweep reached every stage: before the log, after it, under the lock, the HNSW insert.
    CHECK(outcomes[rejected_writable] > 0);
    CHECK(outcomes[logged_read_only] > 0);
    CHECK(aborted > 0);
    CHECK(outcomes[unindexed_read_only] > 0);
}

TEST_CASE("the first write of a graph with sync always, its K-th allocation failing: done, refused, or read-only") {
    // The first write's fdatasync is the first to list a waiting caller, so it allocates where
    // later ones do not. A write reported failed (error or std::bad_alloc) must have changed
    // nothing, or have turned the engine read-only (a reopen applies what the WAL holds); never
    // failed while its node is in the graph or the WAL and the engine takes the next write.
    enum { done = 0, refused = 1, read_only = 2, failed_but_writable = 3, acknowledged_lost = 4, not_reached = 10 };
    int outcomes[3] = {0, 0, 0}, aborted = 0;
    long k = 1;
    for (; k < 1000; ++k) {
        vecgraph_test::TempDir tmp("vecgraph_first_sync");
        const std::string dir = tmp.root.string();
        const int wait_status = wait_status_of_child(failed_but_writable, [&] {
            auto engine = make();
            wal::WriterOptions options;
            options.sync = wal::SyncPolicy::always;
            if (!engine->attach_wal(dir, uuid, 1, options).ok()) return int(failed_but_writable);
            const std::string key = encode_text_key("a");
            const std::vector<float> v = vector_of(1);
            NodeBatch batch;
            batch.count = 1;
            batch.keys = &key;
            batch.vectors = v.data();
            bool failed = false;
            fail_allocation_in = k;
            try {
                failed = !engine->add_nodes(batch).ok();
            } catch (const std::bad_alloc&) {
                failed = true;
            }
            if (fail_allocation_in.exchange(0) > 0) return int(not_reached);
            const bool applied = engine->count_nodes() == 1;
            const bool writable = !engine->stats().read_only && add_node(*engine, "b", 2).ok();
            engine.reset();
            auto again = make();
            if (!again->replay_wal(dir, uuid, 1, true).ok()) return int(failed_but_writable);
            const bool logged = again->find(key).ok();
            if (!failed) return int(logged ? done : acknowledged_lost);
            if (!writable) return int(read_only);
            return int(applied || logged ? failed_but_writable : refused);
        });
        const bool aborts = WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGABRT;  // under the exclusive lock
        CHECK((WIFEXITED(wait_status) || aborts));
        if (aborts) {
            ++aborted;
            continue;
        }
        if (!WIFEXITED(wait_status)) continue;
        const int outcome = WEXITSTATUS(wait_status);
        if (outcome == not_reached) break;
        if (outcome > read_only) std::printf("  K=%ld: %s\n", k, outcome == failed_but_writable ? "failed but writable" : "acknowledged, then lost");
        CHECK(outcome <= read_only);
        if (outcome <= read_only) ++outcomes[outcome];
    }
    std::printf("  %d done, %d refused, %d read-only, %d aborted (K up to %ld)\n", outcomes[done], outcomes[refused],
                outcomes[read_only], aborted, k);
    CHECK(outcomes[refused] > 0);
    CHECK(outcomes[read_only] > 0);
    CHECK(k < 1000);
}

// Keys "n0", "n1", ... and their vectors (vector_of), for `count` nodes.
std::vector<std::string> node_keys(std::size_t count) {
    std::vector<std::string> keys(count);
    for (std::size_t i = 0; i < count; ++i) keys[i] = encode_text_key("n" + std::to_string(i));
    return keys;
}
std::vector<float> node_rows(std::size_t count) {
    std::vector<float> rows;
    for (std::size_t i = 0; i < count; ++i) {
        std::vector<float> v = vector_of(i);
        rows.insert(rows.end(), v.begin(), v.end());
    }
    return rows;
}

// An engine (2 threads) with the first `indexed` of `keys` / `rows` in its HNSW index, then
// indexing deferred and the next `deferred` added; nullptr when a step fails.
std::unique_ptr<Engine> engine_with_deferred(const std::vector<std::string>& keys, const std::vector<float>& rows,
                                             std::size_t indexed, std::size_t deferred) {
    EngineConfig config;
    config.dim = dim;
    config.threads = 2;
    auto created = Engine::create(config);
    if (!created.ok()) return nullptr;
    auto engine = std::move(created).value();
    NodeBatch nodes;
    nodes.count = indexed;
    nodes.keys = keys.data();
    nodes.vectors = rows.data();
    if (!engine->add_nodes(nodes).ok() || !engine->defer_indexing(true).ok()) return nullptr;
    nodes.count = deferred;
    nodes.keys = keys.data() + indexed;
    nodes.vectors = rows.data() + indexed * dim;
    if (!engine->add_nodes(nodes).ok()) return nullptr;
    return engine;
}

TEST_CASE("a failed background HNSW pass run again with allocations failing never hangs, and a later wait completes it") {
    // The pass fails at its thread's first allocation; one wait reports it; the next wait runs it
    // again with the K-th allocation of any thread failing (the new thread's start included).
    // Then at most three more waits (report, run again) must leave every node indexed.
    constexpr std::size_t first = 100, pass = 300;
    const std::vector<std::string> keys = node_keys(first + pass);
    const std::vector<float> rows = node_rows(first + pass);
    enum { settled = 0, not_settled = 3, not_reached = 10 };
    const AllocationSweep sweep = sweep_failing_allocations([&](long k, const std::string&) {
        ::alarm(20);  // a wait that never returns ends the child (SIGALRM)
        auto engine = engine_with_deferred(keys, rows, first, pass);
        if (!engine) return int(not_settled);
        counted_thread = false;
        fail_thread_allocation_in = 1;
        if (!engine->defer_indexing(false, 1).ok() || engine->wait_for_indexing().ok()) return int(not_settled);
        fail_thread_allocation_in = 0;
        fail_allocation_in = k;
        try {
            (void)engine->wait_for_indexing();
        } catch (const std::bad_alloc&) {
        }
        if (fail_allocation_in.exchange(0) > 0) return int(not_reached);
        Status status = engine->wait_for_indexing();
        for (int i = 0; i < 2 && !status.ok(); ++i) status = engine->wait_for_indexing();
        const bool whole = status.ok() && engine->count_index_pending() == 0 && engine->verify(10).empty();
        return int(whole ? settled : not_settled);
    }, settled, not_reached, not_settled);
    std::printf("  %d runs settled (K up to %ld)\n", sweep.wanted, sweep.end_k);
    CHECK(sweep.wanted > 1);
    CHECK(sweep.end_k < 400);
}

TEST_CASE("a deferred batch whose HNSW insert fails stays found by a scan, and a later wait inserts it") {
    // 100 indexed nodes; with indexing deferred, 300 new nodes and 20 upserts of indexed ones;
    // then the insert that ends the deferral runs with the K-th allocation of any thread failing.
    // When it fails, the 320 nodes must stay pending (each found as its own nearest seed), and at
    // most three waits (report, run again) must leave every node indexed.
    constexpr std::size_t first = 100, more = 300, upserts = 20;
    const std::vector<std::string> keys = node_keys(first + more);
    const std::vector<float> rows = node_rows(first + more);
    std::vector<float> upserted;
    for (std::size_t i = 0; i < upserts; ++i) {
        std::vector<float> v = vector_of(1000 + i);
        upserted.insert(upserted.end(), v.begin(), v.end());
    }
    enum { inserted = 0, failed_then_inserted = 1, lost = 3, not_reached = 10 };
    const AllocationSweep sweep = sweep_failing_allocations([&](long k, const std::string&) {
        auto engine = engine_with_deferred(keys, rows, first, more);
        if (!engine) return int(lost);
        NodeBatch again;
        again.count = upserts;
        again.keys = keys.data();
        again.vectors = upserted.data();
        if (!engine->upsert_nodes(again).ok()) return int(lost);
        fail_allocation_in = k;
        bool failed = false;
        try {
            failed = !engine->defer_indexing(false).ok();
        } catch (const std::bad_alloc&) {
            failed = true;
        }
        if (fail_allocation_in.exchange(0) > 0) return int(not_reached);
        if (failed) {
            if (engine->count_index_pending() == 0 || !engine->verify(10).empty()) return int(lost);
            SearchRequest request;
            request.k = 1;
            request.hops = 0;
            for (std::size_t i = first; i < first + more; i += 29) {
                auto found = engine->search(rows.data() + i * dim, dim, request);
                if (!found.ok() || found.value().hits.empty() || found.value().hits[0].node != i) return int(lost);
            }
        }
        Status status = engine->wait_for_indexing();
        for (int i = 0; i < 2 && !status.ok(); ++i) status = engine->wait_for_indexing();
        if (!status.ok() || engine->count_index_pending() != 0 || !engine->verify(10).empty()) return int(lost);
        return int(failed ? failed_then_inserted : inserted);
    }, inserted, not_reached, lost, false, 400, failed_then_inserted);
    std::printf("  %d inserts failed, then a wait inserted the nodes; %d went through (K up to %ld)\n", sweep.also_wanted,
                sweep.wanted, sweep.end_k);
    CHECK(sweep.also_wanted > 1);
    CHECK(sweep.end_k < 400);
}

TEST_CASE("a write whose background compaction cannot start leaves the next writes to start one") {
    // The fourth edge starts a background compaction; its add_edges runs with the K-th allocation
    // of any thread failing (the compaction thread's start included). Edges added after it must
    // still get compacted.
    enum { compacted = 0, never_compacted = 3, not_reached = 10 };
    // An abort is the engine's own, for an exception under the exclusive lock.
    const AllocationSweep sweep = sweep_failing_allocations([&](long k, const std::string&) {
        EngineConfig config;
        config.dim = dim;
        config.threads = 1;
        config.auto_compact_edges = 4;
        auto created = Engine::create(config);
        if (!created.ok()) return int(never_compacted);
        auto engine = std::move(created).value();
        for (std::size_t i = 0; i < 10; ++i)
            if (!add_node(*engine, "n" + std::to_string(i), i).ok()) return int(never_compacted);
        std::vector<std::string> src, dst;
        for (std::size_t i = 0; i < 40; ++i) {
            src.push_back(encode_text_key("n" + std::to_string(i % 10)));
            dst.push_back(encode_text_key("n" + std::to_string((i * 3 + 1) % 10)));
        }
        auto add = [&](std::size_t i) {
            EdgeBatch batch;
            batch.count = 1;
            batch.src = &src[i];
            batch.dst = &dst[i];
            return engine->add_edges(batch);
        };
        for (std::size_t i = 0; i < 3; ++i)
            if (!add(i).ok()) return int(never_compacted);
        fail_allocation_in = k;
        try {
            (void)add(3);
        } catch (const std::bad_alloc&) {
        }
        if (fail_allocation_in.exchange(0) > 0) return int(not_reached);
        engine->wait_for_compaction();
        if (engine->stats().read_only) return int(compacted);  // a failure after the WAL: not this test's case
        for (std::size_t i = 4; i < 40; ++i) (void)add(i);
        engine->wait_for_compaction();
        return int(engine->stats().count_compactions > 0 && engine->verify(10).empty() ? compacted : never_compacted);
    }, compacted, not_reached, never_compacted, true);
    std::printf("  %d runs compacted later, %d aborted (K up to %ld)\n", sweep.wanted, sweep.aborted, sweep.end_k);
    CHECK(sweep.wanted > 1);
    CHECK(sweep.end_k < 400);
}

TEST_CASE("an allocation failing on a thread the engine starts reaches the caller or ends that work; the process goes on") {
    // search_batch's pool, the CSR build's second thread (2^18 edges or more), the background
    // compaction and the background HNSW pass, each with the K-th allocation of the threads it
    // starts failing, K = 1, 2, ... until none fails. A std::bad_alloc escaping a thread's
    // function would end the process through std::terminate.
    constexpr std::size_t count_nodes = 3000, count_edges = std::size_t(1) << 18, pass_nodes = 600;
    std::vector<std::string> keys(count_nodes);
    std::vector<float> rows;
    for (std::size_t i = 0; i < count_nodes; ++i) {
        keys[i] = encode_text_key("n" + std::to_string(i));
        std::vector<float> v = vector_of(i);
        rows.insert(rows.end(), v.begin(), v.end());
    }
    std::vector<std::string> src(count_edges), dst(count_edges);
    for (std::size_t e = 0; e < count_edges; ++e) {
        src[e] = keys[e % count_nodes];
        dst[e] = keys[(e * 7 + 1) % count_nodes];
    }
    auto engine_for = [&](int scenario) {
        EngineConfig config;
        config.dim = dim;
        config.threads = 2;
        config.auto_compact_edges = scenario == 2 ? count_edges : 0;
        auto created = Engine::create(config);
        REQUIRE(created.ok());
        auto engine = std::move(created).value();
        NodeBatch nodes;
        nodes.count = scenario == 3 ? count_nodes - pass_nodes : count_nodes;
        nodes.keys = keys.data();
        nodes.vectors = rows.data();
        REQUIRE((engine->add_nodes(nodes)).ok());
        if (scenario == 1 || scenario == 2) {
            EdgeBatch edges;
            edges.count = count_edges - (scenario == 2 ? 1 : 0);  // the last one starts scenario 2's compaction
            edges.src = src.data();
            edges.dst = dst.data();
            REQUIRE((engine->add_edges(edges)).ok());
        }
        if (scenario == 3) {
            REQUIRE((engine->defer_indexing(true)).ok());
            NodeBatch rest = nodes;
            rest.count = pass_nodes;
            rest.keys = keys.data() + nodes.count;
            rest.vectors = rows.data() + nodes.count * dim;
            REQUIRE((engine->add_nodes(rest)).ok());
        }
        return engine;
    };
    // failed_then_whole: the background pass failed, the next wait ran it again, and the HNSW
    // index then held each node once (what lets a snapshot carry it).
    enum { done = 0, failed_cleanly = 1, failed_then_whole = 2, inconsistent_after = 3, not_reached = 10 };
    // In the child: arms the K-th allocation, runs the scenario, and says how it ended. The
    // first two count every thread's allocations (whichever thread takes the work, the caller
    // gets the std::bad_alloc); the background ones only the background threads'.
    auto run = [&](Engine& engine, int scenario, long k) -> int {
        std::atomic<long>& armed = scenario < 2 ? fail_allocation_in : fail_thread_allocation_in;
        counted_thread = false;
        armed = k;
        int outcome = done;
        try {
            if (scenario == 0) {
                SearchRequest request;
                request.k = 5;
                outcome = engine.search_batch(rows.data(), 64, dim, request, 2).ok() ? done : failed_cleanly;
            } else if (scenario == 1) {
                outcome = engine.compact().ok() ? done : failed_cleanly;
            } else if (scenario == 2) {
                EdgeBatch last;
                last.count = 1;
                last.src = &src[count_edges - 1];
                last.dst = &dst[count_edges - 1];
                if (!engine.add_edges(last).ok()) return inconsistent_after;  // the main thread's own allocations do not fail
                engine.wait_for_compaction();
                outcome = engine.stats().count_compactions == 1 ? done : failed_cleanly;
            } else {
                REQUIRE((engine.defer_indexing(false, 1)).ok());  // starts the background pass
                outcome = engine.wait_for_indexing().ok() ? done : failed_cleanly;
            }
        } catch (const std::bad_alloc&) {
            outcome = failed_cleanly;
        }
        if (armed.exchange(0) > 0) return not_reached;
        if (!engine.verify(10).empty()) return inconsistent_after;
        if (scenario == 3 && outcome == failed_cleanly) {
            // Reported once: the next wait runs the pass again over what it did not reach.
            if (!engine.wait_for_indexing().ok() || engine.count_index_pending() != 0) return inconsistent_after;
            if (!engine.verify(10).empty()) return inconsistent_after;
            if (engine.seed_index_complete()) return failed_then_whole;
        }
        return outcome;
    };
    const char* names[4] = {"search_batch", "compact (CSR build on two threads)", "background compaction",
                            "background HNSW pass"};
    for (int scenario = 0; scenario < 4; ++scenario) {
        auto engine = engine_for(scenario);
        int outcomes[4] = {0, 0, 0, 0};
        long k = 1;
        for (; k < 400; ++k) {
            const int wait_status = wait_status_of_child(inconsistent_after, [&] { return run(*engine, scenario, k); });
            CHECK(WIFEXITED(wait_status));
            if (!WIFEXITED(wait_status)) {
                std::printf("  %s, K=%ld: killed by signal %d\n", names[scenario], k, WTERMSIG(wait_status));
                continue;
            }
            const int outcome = WEXITSTATUS(wait_status);
            if (outcome == not_reached) break;
            CHECK(outcome != inconsistent_after);
            if (outcome < 4) ++outcomes[outcome];
        }
        std::printf("  %s: %d completed, %d failed cleanly, %d inconsistent (K up to %ld)\n", names[scenario],
                    outcomes[done], outcomes[failed_cleanly] + outcomes[failed_then_whole], outcomes[inconsistent_after], k);
        if (scenario == 3) std::printf("    %d of the failed passes left the index whole after a retry\n", outcomes[failed_then_whole]);
        CHECK(outcomes[failed_cleanly] + outcomes[failed_then_whole] > 0);  // the sweep reached the threads' allocations
        // A pass that failed before its chunk added a member leaves no repeat behind its retry.
        if (scenario == 3) CHECK(outcomes[failed_then_whole] > 0);
    }
}

TEST_MAIN()

TEST_CASE("an update and an upsert that keeps a tenant replay to the same nodes") {
    vecgraph_test::TempDir tmp("vecgraph_replay_update");
    const std::string dir = tmp.root.string();
    auto engine = make();
    wal::WriterOptions options;
    options.sync = wal::SyncPolicy::off;
    REQUIRE(engine->attach_wal(dir, uuid, 1, options).ok());
    for (std::size_t i = 0; i < 4; ++i) REQUIRE(add_node(*engine, "n" + std::to_string(i), i, "t" + std::to_string(i % 2)).ok());
    std::string key = encode_text_key("n1"), text = "kept vector", label = "changed";
    NodeBatch update;
    update.count = 1;
    update.keys = &key;
    update.texts = &text;
    update.labels = &label;
    REQUIRE(engine->update_nodes(update).ok());
    std::string other = encode_text_key("n2");
    std::vector<float> v = vector_of(50);
    NodeBatch upsert;
    upsert.count = 1;
    upsert.keys = &other;
    upsert.vectors = v.data();
    REQUIRE(engine->upsert_nodes(upsert).ok());  // no tenants: n2 stays in t0
    REQUIRE(engine->close_wal().ok());

    auto again = make();
    REQUIRE(again->replay_wal(dir, uuid, 1, true).ok());
    for (std::size_t i = 0; i < 4; ++i) {
        const std::string k = encode_text_key("n" + std::to_string(i));
        const NodeRecord a = engine->node(engine->find(k).value(), true), b = again->node(again->find(k).value(), true);
        CHECK_EQ(a.label, b.label);
        CHECK_EQ(a.tenant, b.tenant);
        CHECK_EQ(a.text, b.text);
        CHECK_EQ(a.ts, b.ts);
        CHECK(a.vector == b.vector);
    }
    CHECK_EQ(again->node(again->find(key).value(), false).text, std::string("kept vector"));
    CHECK_EQ(again->node(again->find(other).value(), false).tenant, std::string("t0"));
    CHECK(again->node(again->find(key).value(), true).vector == engine->node(engine->find(key).value(), true).vector);
}
