// The engine: one graph with its key maps, node and edge columns, int8 vector stores, base
// CSR plus delta adjacency, HNSW seed index and optional write-ahead log, and graph-guided
// search over them.
//
// Writes. One writer at a time checks, logs and applies: a second concurrent write waits for
// the first (writer_mutex_), but not for its HNSW inserts or its fsync (below).
// A write is checked completely first (a rejected batch changes nothing and is not logged),
// then appended to the WAL, then applied, then (sync "always") made durable before the call
// returns. Applying takes the exclusive lock only to append or flip rows in memory (no
// quantization, no HNSW work, no I/O inside it; a growing column is copied before the lock
// and swapped in under it). A write's HNSW inserts run after it releases writer_mutex_,
// before its fsync: concurrently with searches (USearch locks the members it links) and with
// the inserts and fsyncs of the writes after it. So searches wait for a writer at most for
// an in-memory append (and a key-map rehash when it doubles), never for a disk sync, an HNSW
// insert or a column copy, and writers wait for each other only for the same append (and,
// when it moves the row buffer or grows the seed index, for the inserts still running).
//
// Delta graph and compaction. Edges added since the base CSR was built live in a delta
// (DeltaAdjacency, per-node sorted lists; delta_graph.hpp) that traversal merges with the CSR
// in the same (weight desc, edge id asc) order. Compaction builds the next CSR from the edge
// columns off to the side (searches and the CSR they read are untouched), then swaps it in
// under the exclusive lock. It runs on compact(), and on a background thread once the delta holds
// more than max(auto_compact_edges, base edges / 8) edges or deleted edges.
//
// Deletes are tombstones: a deleted node keeps its row and id (its key is released and can
// be added again as a new node); searches skip it in the seed index (through the filter
// predicate), in exact scans and in traversal, and its edges are flagged deleted. Compaction
// leaves deleted edges out of the new CSR; node rows are reclaimed when a snapshot is loaded.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vecgraph/csr_graph.hpp"
#include "vecgraph/delta_graph.hpp"
#include "vecgraph/detail/context_pool.hpp"
#include "vecgraph/detail/interner.hpp"
#include "vecgraph/detail/key_index.hpp"
#include "vecgraph/detail/member_lists.hpp"
#include "vecgraph/detail/string_column.hpp"
#include "vecgraph/seed_index.hpp"
#include "vecgraph/status.hpp"
#include "vecgraph/traversal.hpp"
#include "vecgraph/types.hpp"
#include "vecgraph/vector_store.hpp"
#include "vecgraph/wal_reader.hpp"
#include "vecgraph/wal_writer.hpp"

namespace vecgraph {

struct EngineConfig {
    std::size_t dim = 0;
    Metric metric = Metric::cos;
    HnswParams hnsw;
    std::size_t threads = 0;  // threads for bulk work (quantization, HNSW build); 0: all cores
    std::size_t auto_compact_edges = 100000;  // background compaction past this many delta edges; 0: never
    std::vector<PropSpec> filterable;         // node properties kept in typed columns for filters
};

/// Columns of a batch of nodes; optional columns may be nullptr (label "", tenant "", ts 0, text "", props "").
/// Vectors come as floats (`vectors`) or already quantized (`rows`, the store's row layout,
/// as read from a log or a snapshot).
struct NodeBatch {
    std::size_t count = 0;
    const std::string* keys = nullptr;   // encoded keys (types.hpp)
    const float* vectors = nullptr;      // count x dim, row-major
    const std::int8_t* rows = nullptr;   // count x VectorStore::stride_bytes(), when vectors is nullptr
    const std::string* labels = nullptr;
    const std::string* tenants = nullptr;
    const std::int64_t* ts = nullptr;    // microseconds since the epoch, caller's clock
    const std::string* texts = nullptr;
    const std::string* props = nullptr;  // JSON text, opaque to the core
};

/// Columns of a batch of edges; optional columns may be nullptr (rel "", weight 1, ts 0, no vector).
struct EdgeBatch {
    std::size_t count = 0;
    const std::string* src = nullptr;    // encoded keys of existing nodes
    const std::string* dst = nullptr;
    const node_id_t* src_ids = nullptr;  // or node ids of live nodes instead of keys (snapshot loads)
    const node_id_t* dst_ids = nullptr;
    const std::int64_t* src_ints = nullptr;  // or int keys, each the key encode_int_key gives
    const std::int64_t* dst_ints = nullptr;  // (src and dst each take one of the three forms)
    const std::string* rels = nullptr;   // one per edge, or with rel_index the distinct names
    const std::uint32_t* rel_index = nullptr;  // or nullptr: edge i's rel is rels[rel_index[i]]
    std::size_t count_rel_names = 0;     // with rel_index: how many names rels holds
    const float* weights = nullptr;
    const std::int64_t* ts = nullptr;
    const std::string* texts = nullptr;
    const std::string* props = nullptr;
    const float* vectors = nullptr;      // count x dim, or nullptr: the batch has no edge vectors
    const std::int8_t* rows = nullptr;   // quantized rows instead of vectors (log, snapshot)
    const std::uint8_t* has_vector = nullptr;  // with rows: per edge, 0 = no vector (its row is ignored)
};

/// Edges to delete: every live edge from src[i] to dst[i] (with rel rels[i], or any rel when rels is nullptr).
struct EdgeSelection {
    std::size_t count = 0;
    const std::string* src = nullptr;
    const std::string* dst = nullptr;
    const std::string* rels = nullptr;
};

/// The live state at one LSN, for snapshots: node and edge positions in id order.
struct ExportedState {
    std::uint64_t lsn = 0;
    std::vector<node_id_t> nodes;   // live node ids, ascending
    std::vector<edge_id_t> edges;   // live edge ids, ascending
    std::vector<std::uint32_t> edge_src, edge_dst;  // positions in `nodes`
};

struct SearchRequest {
    std::int64_t k = 10;
    std::int64_t seeds = 8;
    std::int64_t hops = 2;
    std::int64_t max_visited = 2000;
    std::int64_t max_fanout = 256;
    Direction direction = Direction::both;
    bool filter_rels = false;
    std::vector<std::string> rels;
    bool filter_labels = false;
    std::vector<std::string> labels;
    bool filter_tenants = false;
    std::vector<std::string> tenants;
    std::int64_t ts_min = INT64_MIN;
    std::int64_t ts_max = INT64_MAX;
    double hop_decay = 1.0;
    /// Conditions on filterable properties (all must pass), with inclusive bounds.
    struct PropQuery {
        std::string name;
        std::vector<std::string> strings;  // a str property: the admitted values
        bool in_set = false;               // a number property: only these values (and the range)
        std::vector<std::int64_t> int_values;
        std::vector<double> real_values;
        std::int64_t int_min = INT64_MIN, int_max = INT64_MAX;  // int64 / timestamp
        double real_min = -HUGE_VAL, real_max = HUGE_VAL;      // float64
    };
    std::vector<PropQuery> where;
    /// Encoded keys of nodes to seed from before the similarity seeds (named entities), in
    /// this order; keys not in the graph or rejected by the filters are skipped. With
    /// extra seeds, `seeds` may be 0: no similarity seeds at all.
    std::vector<std::string> extra_seeds;
    /// Encoded keys of nodes that the search neither returns nor walks through (a filter that
    /// rejects exactly them); keys not in the graph are ignored.
    std::vector<std::string> exclude;
    /// Seed-propagated scoring (empty: off): one weight >= 0 per extra seed, and seeds must be
    /// 0. Each node the walk reaches then scores the weight of the seed its path starts from,
    /// times hop_decay ** (hop - 1) past the first hop (see TraversalParams::seed_weights).
    std::vector<float> seed_weights;
    /// Nodes fewer hops than this from their seed are walked through but not returned.
    std::int64_t min_hop = 0;
    bool exact = false;     // brute-force seeds instead of HNSW
    std::int64_t ef = 0;    // HNSW expansion at search; 0: the graph's default
};

struct SearchResult {
    std::vector<Hit> hits;                   // best first
    std::vector<std::uint32_t> path_offsets; // hits.size() + 1; path of hit i: path_edges[off[i], off[i+1])
    std::vector<edge_id_t> path_edges;       // edge ids, from the seed towards the hit
    std::size_t count_seeds = 0;
    std::size_t count_visited = 0;
};

struct NodeRecord {
    std::string key;
    std::string label, tenant, text, props, aliases;
    std::int64_t ts = 0;
    std::vector<float> vector;  // dequantized
};

struct EdgeRecord {
    edge_id_t edge;
    node_id_t src, dst;
    std::string rel;
    float weight;
    std::int64_t ts;
};

struct EngineStats {
    std::size_t count_nodes, count_edges, count_edge_vectors, count_labels, count_tenants, count_rels;
    std::size_t vector_bytes, csr_bytes, hnsw_bytes, key_bytes, text_bytes;
    std::size_t count_deleted_nodes, count_deleted_edges, count_delta_edges, count_compactions;
    std::size_t count_index_pending;  // nodes waiting for their HNSW insert (deferred or background)
    std::size_t count_index_relinked;  // HNSW members re-linked after side-by-side inserts left them unreachable
    std::size_t prop_bytes;
    std::size_t member_list_bytes;  // the label and tenant member lists
    // Seed searches since the engine started, by how their seeds were found: an exact scan of
    // every node (exact=True, or a graph of at most full_scan_max_nodes rows), a scan of the
    // member lists of the labels or tenants a filter names, or the HNSW graph.
    std::uint64_t count_seed_full_scans, count_seed_list_scans, count_seed_hnsw_searches;
    std::uint64_t count_seed_scan_fallbacks;  // HNSW searches whose walk gave up for an exact scan (a filter admitting very few)
    std::uint64_t last_lsn;
    bool read_only;
};

class Engine {
  public:
    static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
    ~Engine();

    const EngineConfig& config() const noexcept { return config_; }
    /// Graphs of at most this many node rows (deleted ones included until a reopen from a later
    /// snapshot drops them) find seeds by an exact scan instead of HNSW: a scan of a few thousand
    /// rows is as fast as an HNSW search, and exact. 0 (the default): HNSW always.
    std::size_t full_scan_max_nodes() const noexcept { return full_scan_max_nodes_.load(std::memory_order_relaxed); }
    void set_full_scan_max_nodes(std::size_t count) noexcept { full_scan_max_nodes_.store(count, std::memory_order_relaxed); }
    /// A search whose label or tenant filter admits at most this many live nodes finds its seeds
    /// by scanning just those nodes (from the member lists) instead of HNSW, which walks past
    /// many rejected nodes for each admitted one; exact, like exact=True. 0 (the default): never.
    /// filter_scan_auto: the limit scales with the graph (filter_scan_limit()).
    std::size_t filter_scan_max_nodes() const noexcept { return filter_scan_max_nodes_.load(std::memory_order_relaxed); }
    void set_filter_scan_max_nodes(std::size_t count) noexcept { filter_scan_max_nodes_.store(count, std::memory_order_relaxed); }
    /// The filter_scan_max_nodes() setting that scales the limit with the graph.
    static constexpr std::size_t filter_scan_auto = ~std::size_t{0};
    /// The automatic limit: max(filter_scan_auto_floor, floor(sqrt(filter_scan_auto_factor * rows))).
    /// A scan of L listed rows costs about L gathered rows; a filtered HNSW walk that must meet
    /// ef admitted nodes walks about ef * rows / L members, so the two meet where L grows as
    /// sqrt(rows). Measured (AVX2, 384-d, seeds only): they meet near 14,000 admitted nodes of
    /// 100,000 and 30,000-38,000 of 1,000,000; the floor keeps small graphs at the list scan,
    /// which wins there well past sqrt(1000 * rows).
    static constexpr std::size_t filter_scan_auto_floor = 10'000;
    static constexpr std::size_t filter_scan_auto_factor = 1'000;
    static std::size_t filter_scan_limit(std::size_t setting, std::size_t rows) noexcept;
    /// The limit in force for this graph's current node rows (deleted ones included until
    /// reclaimed, as for full_scan_max_nodes()).
    std::size_t filter_scan_limit() const;
    std::size_t count_nodes() const;
    std::size_t count_edges() const;
    /// Edge ids in use, deleted edges included (ids are [0, count_edge_ids())).
    std::size_t count_edge_ids() const;

    /// Adds a batch atomically: every row is checked first; on any error nothing changes.
    Status add_nodes(const NodeBatch& batch);
    Status add_edges(const EdgeBatch& batch);
    /// Adds new keys and replaces the label, ts, text, props and vector of existing ones (their
    /// edges and aliases stay). The tenant too when the batch has a tenants column; without one
    /// an existing node keeps its tenant (a new one gets ""). Keys must not repeat within the batch.
    Status upsert_nodes(const NodeBatch& batch);
    /// Changes only the given columns of existing nodes: a nullptr column keeps each node's
    /// value; with neither vectors nor rows the vector stays and the node is not indexed again.
    /// Every key must be in the graph (not_found otherwise, nothing changes) and appear once;
    /// edges and aliases stay. Logged as the upsert of the nodes' resulting rows, so a replay
    /// of the WAL gives the same nodes.
    Status update_nodes(const NodeBatch& batch);
    /// Deletes nodes and their edges. A key that is not in the graph is an error (nothing
    /// changes) unless `missing_ok`. `deleted` receives the number of nodes deleted.
    Status delete_nodes(const std::string* keys, std::size_t count, bool missing_ok, std::size_t* deleted);
    /// Deletes the selected edges; a selection matching no live edge is an error unless `missing_ok`.
    Status delete_edges(const EdgeSelection& selection, bool missing_ok, std::size_t* deleted);
    /// Deletes every node of `tenant` and their edges, as one logged write.
    Status delete_tenant(const std::string& tenant, std::size_t* deleted);
    /// Replaces the aliases of existing nodes (an opaque string each, kept with the node,
    /// logged, snapshotted; an upsert keeps them). A key not in the graph: not_found, nothing changes.
    Status set_aliases(const std::string* keys, const std::string* aliases, std::size_t count);
    /// Builds the next CSR from base + delta (dropping deleted edges) and swaps it in; searches
    /// keep running on the current one meanwhile. Returns once the swap is done.
    Status compact();

    /// Durability. attach_wal logs every later write to the WAL in `dir` (recover first).
    Status attach_wal(const std::string& dir, const wal::Uuid& uuid, std::uint64_t next_lsn,
                      const wal::WriterOptions& options);
    /// Replays the WAL in `dir` from `from_lsn` (records before it are checked, not applied),
    /// cutting a torn tail when `truncate_tail`. Corruption in the middle is an error.
    /// `tail_marker_path`: as for wal::recover (the tail marker the writer keeps; see
    /// wal::check_tail for the check that belongs before the replay).
    Result<wal::RecoveryReport> replay_wal(const std::string& dir, const wal::Uuid& uuid, std::uint64_t from_lsn,
                                           bool truncate_tail, const std::string& tail_marker_path = {});
    /// Makes every logged write durable (whatever the sync policy).
    Status sync();
    /// Deletes WAL segments that hold only records below `lsn`.
    Status drop_wal_before(std::uint64_t lsn);
    /// Syncs and closes the WAL; later writes are refused (read_only).
    Status close_wal();
    /// Refuses every later write with read_only and `why` (a graph opened to read only), or
    /// with io_error when `storage` (a graph opened while its disk is full).
    void refuse_writes(std::string why, bool storage = false);
    /// LSN of the last write applied (0: none).
    std::uint64_t last_lsn() const;
    /// LSN of the last write that changed which node texts exist (a node with text added, an
    /// upsert, a delete), for indexes kept beside the graph; set_last_text_lsn seeds it after
    /// a snapshot load.
    std::uint64_t last_text_lsn() const { return last_text_lsn_.load(); }
    void set_last_text_lsn(std::uint64_t lsn) { last_text_lsn_.store(lsn); }
    /// Runs fn with writes held back (they wait): a snapshot taken inside it is one LSN's state.
    void pause_writes(const std::function<void()>& fn) const;
    /// Live node and edge ids at the current LSN (call inside pause_writes). With a WAL and
    /// `roll_wal`, first starts a new segment, so that a checkpoint at this LSN can drop every older one.
    Result<ExportedState> export_state(bool roll_wal = true);
    /// Raw columns for snapshots (ids from export_state).
    const VectorStore& node_store() const noexcept { return node_vectors_; }
    const VectorStore& edge_store() const noexcept { return edge_vectors_; }
    /// Row of an edge's vector in edge_store(), or invalid_id.
    std::uint32_t edge_vector_row(edge_id_t edge) const;
    std::string_view edge_text(edge_id_t edge) const;
    std::string_view edge_props(edge_id_t edge) const;  // views: valid while writes are paused
    /// Copies of an edge's text and props (safe while writes run).
    void edge_strings(edge_id_t edge, std::string* text, std::string* props) const;

    /// Deferred indexing, for bulk loads: while on, added and upserted nodes are checked,
    /// logged and applied, but not inserted into HNSW (seeds do not find them yet; traversal
    /// and exact search do). Turning it off inserts them in one parallel pass.
    /// Turning it off with at least `background_min` nodes waiting starts a background pass
    /// instead and returns at once: until it has indexed a node, searches find that node as a
    /// seed by an exact scan of the nodes still waiting (correct, slower); writes, deletes and
    /// searches go on meanwhile. Turning deferral on waits for a running pass.
    Status defer_indexing(bool on, std::size_t background_min = SIZE_MAX);
    bool indexing_deferred() const;
    /// Nodes waiting for their HNSW insert (deferred ones only).
    std::size_t count_deferred() const;
    /// Nodes waiting for their HNSW insert: deferred, or not yet reached by a background pass.
    std::size_t count_index_pending() const;
    /// Waits for a background pass to finish; returns its status (OK when none ran). Any
    /// number of threads may wait. A pass that failed (out of memory) is reported once; the
    /// next call runs it again over the nodes it did not reach and returns how that ended
    /// (until then those nodes are found by an exact scan).
    Status wait_for_indexing();
    /// True when the HNSW graph holds exactly the live nodes once each (what save_seed_index
    /// needs to write it).
    bool seed_index_complete() const;
    /// Writes the HNSW graph to `path` if it holds exactly the nodes [0, count_nodes()) once
    /// each and none is deleted or waiting (then `saved` is true); otherwise writes nothing.
    /// Call inside pause_writes (it relies on the writer lock held there), so the file matches one LSN.
    Status save_seed_index(const std::string& path, bool* saved);
    /// With indexing deferred and nothing indexed yet (right after loading a snapshot's nodes),
    /// takes the HNSW graph from a file of save_seed_index instead of building it; the nodes
    /// loaded so far no longer wait. A file that does not fit gives Status::corruption and
    /// changes nothing (the nodes still wait, to be built).
    Status load_seed_index(const std::string& path);
    /// Checks the invariants searches rely on: the CSR (offsets, endpoints, edge ids, out and
    /// in agreeing), the delta, the tombstone counts, the key map, and the seed index against
    /// the store. Returns at most `limit` problems; empty means sound.
    std::vector<std::string> verify(std::size_t limit) const;

    /// Checks a request's parameters (not its vector).
    Status validate(const SearchRequest& request) const;
    /// Checks `count` row-major queries of `dim` floats (finite; non-zero under cos).
    Status validate_queries(const float* queries, std::size_t count, std::size_t dim) const;
    /// Graph-guided search for one query of `dim` floats.
    Result<SearchResult> search(const float* query, std::size_t dim, const SearchRequest& request) const;
    /// Searches `count` row-major queries on up to `threads` threads (0: all cores).
    Result<std::vector<SearchResult>> search_batch(const float* queries, std::size_t count, std::size_t dim,
                                                   const SearchRequest& request, std::size_t threads) const;

    /// The node of an encoded key, or not_found.
    Result<node_id_t> find(std::string_view key) const;
    /// For each encoded key: 1 when it is a live node that the request's filters (labels,
    /// tenants, ts window, where) admit, else 0.
    Result<std::vector<std::uint8_t>> admits(const std::string* keys, std::size_t count, const SearchRequest& request) const;
    /// The encoded keys of the live nodes that the request's filters (labels, tenants, ts window,
    /// where) admit, in node id order, into `keys` (cleared first). Reads the label's or
    /// tenant's member lists when such a filter admits at most `limit` nodes, else scans every
    /// node row. Returns false, with `keys` cleared, as soon as more than `limit` are admitted:
    /// a caller that can use a short list (BM25 under a selective where) stops early on a
    /// broad filter. A request without any filter admits every live node.
    Result<bool> admitted_keys(const SearchRequest& request, std::size_t limit, std::vector<std::string>& keys) const;
    /// Similarity of the query to each edge's vector (NaN for an edge without one), by the graph's metric.
    Result<std::vector<float>> score_edges(const float* query, std::size_t dim, const edge_id_t* edges,
                                           std::size_t count) const;
    /// A node's fields; `with_vector` false leaves `vector` empty (no dequantization).
    NodeRecord node(node_id_t node, bool with_vector = true) const;
    /// Key bytes of a node (valid while the engine lives).
    std::string_view key(node_id_t node) const;
    /// Key bytes of each hit, under one lock.
    std::vector<std::string_view> keys_of(const std::vector<Hit>& hits) const;
    /// Edges at a node in traversal order ((weight desc, edge id asc)); rels empty with filter_rels admits none.
    std::vector<EdgeRecord> neighbors(node_id_t node, Direction direction, bool filter_rels,
                                      const std::vector<std::string>& rels) const;
    EdgeRecord edge(edge_id_t edge) const;
    /// Which kinds of names a graph interns: node labels, tenants, edge relation types.
    enum class NameKind { label, tenant, rel };
    /// The names of `names` the graph has never held as a `kind` (a filter naming them matches
    /// nothing), in the order given.
    std::vector<std::string> unknown_names(NameKind kind, const std::vector<std::string>& names) const;
    EngineStats stats() const;
    /// Waits for a background compaction to finish (for tests and close).
    void wait_for_compaction();

    /// Quantized vector of a node (codes copied into `codes`, dim bytes); for tests and tools.
    void node_codes(node_id_t node, std::int8_t* codes, float* scale) const;

  private:
    struct PreparedNodes;
    struct PreparedEdges;
    struct KeptColumns;
    enum class NodeWrite { add, upsert, update };
    explicit Engine(const EngineConfig& config);
    std::shared_lock<std::shared_mutex> read_lock() const;
    std::unique_lock<std::shared_mutex> write_lock() const;
    // Write path pieces; each runs with writer_mutex_ held.
    Status writable() const;
    /// `found`: the nodes of the batch's keys (invalid_id: not in the graph), when known.
    Result<PreparedNodes> prepare_nodes(const NodeBatch& batch, bool upsert, const node_id_t* found = nullptr) const;
    Status apply_nodes(const NodeBatch& batch, PreparedNodes& prepared);
    Result<PreparedEdges> prepare_edges(const EdgeBatch& batch) const;
    Status apply_edges(const EdgeBatch& batch, PreparedEdges& prepared);
    Result<std::vector<node_id_t>> select_nodes(const std::string* keys, std::size_t count, bool missing_ok) const;
    Result<std::vector<edge_id_t>> select_edges(const EdgeSelection& selection, bool missing_ok) const;
    std::vector<node_id_t> tenant_nodes(const std::string& tenant) const;
    void apply_node_deletes(const std::vector<node_id_t>& nodes);
    void apply_edge_deletes(const std::vector<edge_id_t>& edges);
    Status write_nodes(const NodeBatch& batch, NodeWrite mode);
    /// The batch an upsert or update writes: `batch` with the columns it keeps read from the
    /// graph into `kept` (an update: every column not given; an upsert without tenants: the
    /// tenants of the keys already in the graph). An update of a key not in the graph: not_found.
    Result<NodeBatch> keep_columns(const NodeBatch& batch, NodeWrite mode, KeptColumns& kept) const;
    Result<std::vector<node_id_t>> alias_targets(const std::string* keys, std::size_t count) const;
    void apply_aliases(const std::vector<node_id_t>& nodes, const std::string* aliases);
    /// Appends a record whose payload `encode(PayloadWriter&)` writes (only when a WAL is attached); its LSN.
    template <typename encode_at>
    Result<std::uint64_t> log(std::uint8_t type, encode_at&& encode);
    /// Runs `apply()` (returns a Status) for a write whose record is already in the log. If it
    /// fails, or throws std::bad_alloc, the graph and the log disagree until a reopen replays
    /// the record: the engine turns read-only and the error says so.
    template <typename apply_at>
    Status apply_logged(apply_at&& apply);
    /// Makes the engine read-only for `why` (writer lock held; the first reason stays) and
    /// returns `failure`'s code with `why`.
    Status read_only_after(const Status& failure, std::string why);
    /// Ends a write whose record has LSN `lsn` and which is applied: releases `writer`, runs the
    /// HNSW inserts `to_index` holds (if any; see insert_mutex_), then (sync "always") syncs.
    Status finish_write(std::unique_lock<std::mutex>& writer, std::uint64_t lsn, PreparedNodes* to_index = nullptr);
    /// The HNSW inserts of an applied add/upsert (finish_write, writer lock released).
    Status index_applied(const PreparedNodes& applied);
    /// Inserts `nodes` (reserved; `reindexed` of them upserted, counted first) into the seed index
    /// beside searches and other inserts, holding insert_mutex_ shared, then re-links what inserts
    /// side by side left unreachable (relink_unreachable_members(wait_for_relink)).
    Status insert_seeds(const std::vector<node_id_t>& nodes, std::size_t reindexed, bool wait_for_relink,
                        std::size_t* added = nullptr);
    /// Reserves `count` seed-index members (exclusive lock held). Growing the index moves its
    /// storage, so `moving` (on insert_mutex_) is locked first when the reservation does not fit.
    Status reserve_seed_index(std::size_t count, std::unique_lock<std::shared_mutex>& moving);
    /// Waits until no write's HNSW inserts are running (writer lock held, so none can start):
    /// the seed index then holds every applied node that is not deferred.
    void wait_for_inserts_in_flight() const;
    Status replay_record(std::uint8_t type, std::uint64_t lsn, std::string_view payload);
    /// Builds the next CSR from the live edge columns and installs it (writer lock held).
    void rebuild_base();
    /// Swaps in a CSR of edges [0, count_edges) built with deleted flags `dead_at_build` (nullptr:
    /// the current ones); later edges go back into the delta (writer lock held).
    void install_base(CsrGraph next, std::size_t count_edges, const std::uint8_t* dead_at_build);
    void maybe_start_compaction();
    /// Position of a declared filterable property, or SIZE_MAX; and the error text for an undeclared one.
    std::size_t prop_index(const std::string& name) const;
    std::string declared_props_text(const std::string& name) const;
    /// Points prop_views_ at the current column buffers (exclusive lock held).
    void refresh_prop_views();
    /// Starts deferring HNSW inserts unless already deferring.
    void begin_deferral();
    /// Inserts the deferred nodes (deleted ones left out) into HNSW in one parallel pass.
    Status flush_deferred(std::size_t background_min = SIZE_MAX);
    /// Starts the background pass over `nodes` (`reindexed` of them upserted). With `failed`, starts
    /// none: the nodes wait as after a failed pass, and `reindexed` are the repeats its rerun adds.
    void start_background_index(std::vector<node_id_t> nodes, std::size_t reindexed, const Status* failed = nullptr);
    void background_index_pass();
    // Re-links the HNSW members that inserts running side by side left unreachable
    // (SeedIndex::relink_unreachable). Caller holds the read lock or insert_mutex_ shared, not
    // hnsw_walk_mutex_.
    // Without `wait` it gives up while another insert runs (that insert's own call checks).
    void relink_unreachable_members(bool wait);
    void stop_background_index();
    void join_background_index();
    std::size_t background_pending() const;  // nodes a running pass has not reached
    void unindexed_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                         const NodeColumns& columns, TraversalScratch& scratch) const;
    GraphView graph_view() const noexcept;
    NodeColumns node_columns() const noexcept;
    Status search_locked(const float* query, const SearchRequest& request, std::size_t slot,
                         SearchResult& result) const;
    /// Fills `filter` from the request's label, tenant, ts and where conditions.
    void build_filter(const SearchRequest& request, NodeFilter& filter) const;
    /// Breadth-first expansion from scratch.seeds, scoring and paths (search_locked's second half).
    Status expand_and_score(const SearchRequest& request, TraversalScratch& scratch, const NodeColumns& columns,
                            const NodeFilter* active_filter, SearchResult& result) const;
    EdgeRecord edge_locked(edge_id_t edge) const;
    void exact_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                     const NodeColumns& columns, TraversalScratch& scratch) const;
    /// The member lists that hold every node the request's label or tenant filter admits, and
    /// how many live nodes they hold: the tenants' lists when a tenant filter is set and
    /// admits no more than the label filter, else the labels' (no lists: no such filter).
    /// Reads the ids from scratch.filter's masks, so build_filter() comes first. (Into
    /// scratch.member_lists; the count stops growing past `limit`, and the lists are then
    /// incomplete: they are used only at or below it.)
    std::size_t filter_lists(const SearchRequest& request, std::size_t limit, TraversalScratch& scratch) const;
    /// Scores the gathered rows `rows[0, count)` against `query` and offers each to the heap of
    /// the best `wanted` in scratch.seeds (exact_seeds' and listed_seeds' shared step).
    void offer_rows(const QuantizedVector& query, const node_id_t* rows, std::size_t count, std::size_t wanted,
                    TraversalScratch& scratch) const;
    /// The nodes of `lists` that `filter` admits, each once, in list order, into `out`. Uses the
    /// visited set of `scratch` (begun for the graph's rows; left as it was) to drop repeats.
    void admitted_in_lists(const std::vector<const std::vector<node_id_t>*>& lists, const NodeFilter& filter,
                           const NodeColumns& columns, TraversalScratch& scratch, std::vector<node_id_t>& out) const;
    /// exact_seeds over the nodes of `lists` only (`filter` is applied to each).
    void listed_seeds(const QuantizedVector& query, std::size_t wanted, const std::vector<const std::vector<node_id_t>*>& lists,
                      const NodeFilter& filter, const NodeColumns& columns, TraversalScratch& scratch) const;

    EngineConfig config_;
    mutable std::shared_mutex mutex_;
    // Turnstile: a writer holds it while it waits for mutex_, so a stream of searches cannot
    // starve writes (glibc's rwlock prefers readers); a search passes through it before locking.
    mutable std::mutex turnstile_;

    // Nodes.
    detail::KeyIndex keys_;  // key by node id; node id by live key
    std::vector<label_id_t> node_labels_;
    std::vector<tenant_id_t> node_tenants_;
    std::vector<std::int64_t> node_ts_;
    detail::StringColumn node_texts_, node_props_, node_aliases_;
    detail::Interner labels_, tenants_, rels_;
    detail::MemberLists label_members_, tenant_members_;  // nodes by label id and by tenant id
    VectorStore node_vectors_;

    // Filterable properties: one typed column per declared property (config_.filterable order),
    // derived from each node's props JSON when the node is written; views for the filters.
    struct PropColumn {
        PropType type = PropType::str;
        detail::Interner strings;
        std::vector<std::uint32_t> str_ids;
        std::vector<std::int64_t> ints;
        std::vector<double> reals;
        std::vector<std::uint8_t> present;
    };
    std::vector<PropColumn> prop_columns_;
    std::vector<PropColumnView> prop_views_;

    // Edges (edge id = position).
    std::vector<node_id_t> edge_src_, edge_dst_;
    std::vector<rel_id_t> edge_rels_;
    std::vector<float> edge_weights_;
    std::vector<std::int64_t> edge_ts_;
    detail::StringColumn edge_texts_, edge_props_;
    std::vector<std::uint32_t> edge_vector_rows_;  // row in edge_vectors_, or invalid_id; empty until an edge has a vector
    VectorStore edge_vectors_;

    // Tombstones.
    std::vector<std::uint8_t> node_dead_, edge_dead_;
    std::size_t count_dead_nodes_ = 0, count_dead_edges_ = 0, dead_edges_since_compaction_ = 0;

    // Base CSR (edges [0, base_edges_) that were live when it was built) and the delta since.
    CsrGraph csr_;
    std::size_t base_edges_ = 0;
    DeltaAdjacency delta_;
    std::size_t count_compactions_ = 0;
    std::unique_ptr<SeedIndex> seed_index_;

    // Writers, compaction, WAL.
    mutable std::mutex writer_mutex_;
    std::mutex compaction_mutex_;  // one compaction at a time
    std::mutex thread_mutex_;      // guards compaction_thread_
    std::thread compaction_thread_;
    std::atomic<bool> compaction_running_{false};
    std::atomic<std::size_t> full_scan_max_nodes_{0}, filter_scan_max_nodes_{0};
    mutable std::atomic<std::uint64_t> count_seed_full_scans_{0}, count_seed_list_scans_{0}, count_seed_hnsw_searches_{0},
        count_seed_scan_fallbacks_{0};
    std::shared_ptr<wal::Writer> wal_;  // shared: a write syncing after it released the writer lock keeps it alive
    wal::SyncPolicy sync_policy_ = wal::SyncPolicy::off;
    std::string read_only_;  // why writes are refused; empty: writable
    bool refused_storage_ = false;  // refuse_writes(..., storage=true): io_error, not read_only
    std::atomic<std::uint64_t> last_lsn_{0};
    std::atomic<std::uint64_t> last_text_lsn_{0};
    bool text_changed_ = false;  // set by apply_*, taken by finish_write / replay (writer lock held)
    // Replay and deferred indexing append rows and leave HNSW inserts to one parallel pass
    // (flush_deferred). Nodes from indexed_before_defer_ on were not indexed when deferral began.
    bool replaying_ = false, defer_index_ = false;
    std::size_t indexed_before_defer_ = 0, deferred_reindexed_ = 0;
    std::vector<node_id_t> deferred_hnsw_;
    // The background HNSW pass of open (start_background_index): its thread, the nodes it inserts
    // and how far it got. nodes is fixed while it runs (set under the write lock before it
    // starts); done of them are indexed.
    struct BackgroundIndexing {
        std::mutex mutex;  // guards thread, status, pass_active, failure_reported, failed_added
        std::thread thread;
        std::vector<node_id_t> nodes;
        Status status;
        std::atomic<std::size_t> done{0};
        std::atomic<bool> running{false};
        std::atomic<bool> stop{false};
        bool pass_active = false;
        bool failure_reported = false;  // a call returned the failure
        // After a failure, the repeats that running the insert again adds and nothing counted yet
        // (members the failed chunk added; upserted nodes of a deferred batch whose insert failed
        // before it began).
        std::size_t failed_added = 0;
        std::condition_variable done_cv;  // notified when a pass ends
    };
    BackgroundIndexing background_;
    // HNSW adds hold it shared; walks over every member (stats, verify, save) exclusive, as
    // USearch counts a member before it is stored.
    mutable std::shared_mutex hnsw_walk_mutex_;
    // A write's HNSW inserts run without the writer lock or the engine lock (finish_write). They
    // hold insert_mutex_ shared: it keeps the node row buffer and the seed index's storage in
    // place. Moving either (a growing row buffer, a seed-index reservation past its capacity) or
    // rewriting a row (upsert) takes it alone, after the exclusive lock. inserts_in_flight_
    // counts those inserts; it is raised under writer_mutex_, so whoever holds writer_mutex_
    // and waits for zero (wait_for_inserts_in_flight) sees every applied node indexed.
    mutable std::shared_mutex insert_mutex_;
    mutable std::mutex in_flight_mutex_;
    mutable std::condition_variable in_flight_cv_;
    std::size_t inserts_in_flight_ = 0;  // guarded by in_flight_mutex_
    mutable detail::ContextPool contexts_;
    mutable std::vector<TraversalScratch> scratch_;  // one per context slot
};

}  // namespace vecgraph
