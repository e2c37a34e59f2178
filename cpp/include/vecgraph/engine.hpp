// The engine: one in-memory graph with its key maps, node and edge columns, int8 vector
// stores, CSR adjacency and HNSW seed index, and graph-guided search over them.
//
// Thread safety: any number of searches run concurrently; a write (add_nodes, add_edges)
// excludes searches while it applies. The CSR is rebuilt from the edge list on the first
// search after edges were added (O(V + E)), so bulk loads pay for it once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vecgraph/csr_graph.hpp"
#include "vecgraph/detail/context_pool.hpp"
#include "vecgraph/detail/interner.hpp"
#include "vecgraph/detail/string_column.hpp"
#include "vecgraph/seed_index.hpp"
#include "vecgraph/status.hpp"
#include "vecgraph/traversal.hpp"
#include "vecgraph/types.hpp"
#include "vecgraph/vector_store.hpp"

namespace vecgraph {

struct EngineConfig {
    std::size_t dim = 0;
    Metric metric = Metric::cos;
    HnswParams hnsw;
    std::size_t threads = 0;  // threads for bulk work (quantization, HNSW build); 0: all cores
};

/// Columns of a batch of nodes; optional columns may be nullptr (label "", tenant "", ts 0, text "", props "").
struct NodeBatch {
    std::size_t count = 0;
    const std::string* keys = nullptr;   // encoded keys (types.hpp)
    const float* vectors = nullptr;      // count x dim, row-major
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
    const std::string* rels = nullptr;
    const float* weights = nullptr;
    const std::int64_t* ts = nullptr;
    const std::string* texts = nullptr;
    const std::string* props = nullptr;
    const float* vectors = nullptr;      // count x dim, or nullptr: the batch has no edge vectors
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
    std::string label, tenant, text, props;
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
};

class Engine {
  public:
    static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
    ~Engine();

    const EngineConfig& config() const noexcept { return config_; }
    std::size_t count_nodes() const;
    std::size_t count_edges() const;

    /// Adds a batch atomically: every row is checked first; on any error nothing changes.
    Status add_nodes(const NodeBatch& batch);
    Status add_edges(const EdgeBatch& batch);

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
    NodeRecord node(node_id_t node) const;
    /// Key bytes of a node (valid while the engine lives).
    std::string_view key(node_id_t node) const;
    /// Key bytes of each hit, under one lock.
    std::vector<std::string_view> keys_of(const std::vector<Hit>& hits) const;
    /// Edges at a node in traversal order ((weight desc, edge id asc)); rels empty with filter_rels admits none.
    std::vector<EdgeRecord> neighbors(node_id_t node, Direction direction, bool filter_rels,
                                      const std::vector<std::string>& rels) const;
    EdgeRecord edge(edge_id_t edge) const;
    EngineStats stats() const;

    /// Quantized vector of a node (codes copied into `codes`, dim bytes); for tests and tools.
    void node_codes(node_id_t node, std::int8_t* codes, float* scale) const;

  private:
    explicit Engine(const EngineConfig& config);
    std::shared_lock<std::shared_mutex> read_lock() const;
    std::unique_lock<std::shared_mutex> write_lock() const;
    void refresh_csr() const;
    Status search_locked(const float* query, const SearchRequest& request, std::size_t slot,
                         SearchResult& result) const;
    EdgeRecord edge_locked(edge_id_t edge) const;
    void exact_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                     const NodeColumns& columns, TraversalScratch& scratch) const;

    EngineConfig config_;
    mutable std::shared_mutex mutex_;
    // Turnstile: a writer holds it while it waits for mutex_, so a stream of searches cannot
    // starve writes (glibc's rwlock prefers readers); a search passes through it before locking.
    mutable std::mutex turnstile_;

    // Nodes.
    std::unordered_map<std::string, node_id_t> key_to_node_;
    std::vector<const std::string*> node_keys_;
    std::vector<label_id_t> node_labels_;
    std::vector<tenant_id_t> node_tenants_;
    std::vector<std::int64_t> node_ts_;
    detail::StringColumn node_texts_, node_props_;
    detail::Interner labels_, tenants_, rels_;
    VectorStore node_vectors_;

    // Edges (edge id = position).
    std::vector<node_id_t> edge_src_, edge_dst_;
    std::vector<rel_id_t> edge_rels_;
    std::vector<float> edge_weights_;
    std::vector<std::int64_t> edge_ts_;
    detail::StringColumn edge_texts_, edge_props_;
    std::vector<std::uint32_t> edge_vector_rows_;  // row in edge_vectors_, or invalid_id; empty until an edge has a vector
    VectorStore edge_vectors_;

    // Derived structures.
    mutable CsrGraph csr_;
    mutable std::atomic<bool> csr_dirty_{false};
    std::unique_ptr<SeedIndex> seed_index_;
    mutable detail::ContextPool contexts_;
    mutable std::vector<TraversalScratch> scratch_;  // one per context slot
};

}  // namespace vecgraph
