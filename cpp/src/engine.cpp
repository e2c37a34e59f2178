// The engine facade (engine.hpp): creation, locks, counts, stats and the node and edge
// accessors. The rest of Engine is defined by topic in engine_write.cpp (the write path),
// engine_search.cpp (search and filters), engine_recovery.cpp (WAL, replay, snapshots' export,
// verify), engine_index.cpp (HNSW inserts: deferred, background, seed-index files) and
// engine_compaction.cpp (base CSR rebuilds).
#include "vecgraph/engine.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "engine_internal.hpp"

namespace vecgraph {

namespace {

constexpr std::size_t max_dim = 65536;  // keeps every int32 dot product exact
constexpr std::size_t max_expansion = 65536;  // HNSW beam widths (efConstruction, ef) beyond this only cost memory

}  // namespace

Engine::Engine(const EngineConfig& config)
    : config_(config),
      node_vectors_(config.dim, config.metric),
      edge_vectors_(config.dim, config.metric),
      contexts_(count_context_slots),
      scratch_(count_context_slots) {
    config_.threads = default_threads(config.threads);
    seed_index_ = std::make_unique<SeedIndex>(node_vectors_, config_.hnsw, count_context_slots);
    prop_columns_.resize(config_.filterable.size());
    for (std::size_t p = 0; p < prop_columns_.size(); ++p) prop_columns_[p].type = config_.filterable[p].type;
    refresh_prop_views();
}

Engine::~Engine() {
    stop_background_index();
    wait_for_compaction();
    if (wal_) (void)close_wal();
}

std::shared_lock<std::shared_mutex> Engine::read_lock() const {
    { std::lock_guard<std::mutex> pass(turnstile_); }
    return std::shared_lock<std::shared_mutex>(mutex_);
}

std::unique_lock<std::shared_mutex> Engine::write_lock() const {
    std::lock_guard<std::mutex> hold(turnstile_);
    return std::unique_lock<std::shared_mutex>(mutex_);
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
    if (config.dim == 0 || config.dim > max_dim)
        return Status::invalid_argument("dim must be in [1, " + std::to_string(max_dim) + "], got " +
                                        std::to_string(config.dim));
    if (config.hnsw.connectivity < 2 || config.hnsw.connectivity > 1024)
        return Status::invalid_argument("connectivity must be in [2, 1024], got " +
                                        std::to_string(config.hnsw.connectivity));
    for (auto [name, value] : {std::pair<const char*, std::size_t>{"expansion_add", config.hnsw.expansion_add},
                               {"expansion_search", config.hnsw.expansion_search}})
        if (value < 1 || value > max_expansion)
            return Status::invalid_argument(std::string(name) + " must be in [1, " + std::to_string(max_expansion) +
                                            "], got " + std::to_string(value));
    for (std::size_t p = 0; p < config.filterable.size(); ++p) {
        if (config.filterable[p].name.empty()) return Status::invalid_argument("a filterable property needs a name");
        for (std::size_t q = 0; q < p; ++q)
            if (config.filterable[q].name == config.filterable[p].name)
                return Status::invalid_argument("filterable property '" + config.filterable[p].name + "' is declared twice");
    }
    return std::unique_ptr<Engine>(new Engine(config));
}

std::size_t Engine::count_nodes() const {
    auto lock = read_lock();
    return keys_.count_ids() - count_dead_nodes_;
}

std::size_t Engine::count_edges() const {
    auto lock = read_lock();
    return edge_src_.size() - count_dead_edges_;
}

std::size_t Engine::count_edge_ids() const {
    auto lock = read_lock();
    return edge_src_.size();
}

GraphView Engine::graph_view() const noexcept {
    return GraphView{&csr_, delta_.count_edges ? &delta_ : nullptr, count_dead_edges_ ? edge_dead_.data() : nullptr};
}

NodeColumns Engine::node_columns() const noexcept {
    return NodeColumns{node_labels_.data(), node_tenants_.data(), node_ts_.data(),
                       count_dead_nodes_ ? node_dead_.data() : nullptr,
                       prop_views_.empty() ? nullptr : prop_views_.data()};
}

void Engine::refresh_prop_views() {
    prop_views_.resize(prop_columns_.size());
    for (std::size_t p = 0; p < prop_columns_.size(); ++p) {
        const PropColumn& column = prop_columns_[p];
        prop_views_[p] = PropColumnView{column.type, column.str_ids.data(), column.ints.data(), column.reals.data(),
                                        column.present.data()};
    }
}

std::uint32_t Engine::edge_vector_row(edge_id_t edge) const {
    auto lock = read_lock();
    return edge < edge_vector_rows_.size() ? edge_vector_rows_[edge] : invalid_id;
}

std::string_view Engine::edge_text(edge_id_t edge) const {
    auto lock = read_lock();
    return edge_texts_[edge];
}

void Engine::edge_strings(edge_id_t edge, std::string* text, std::string* props) const {
    auto lock = read_lock();
    text->assign(edge_texts_[edge]);
    props->assign(edge_props_[edge]);
}

std::string_view Engine::edge_props(edge_id_t edge) const {
    auto lock = read_lock();
    return edge_props_[edge];
}

Result<node_id_t> Engine::find(std::string_view key) const {
    auto lock = read_lock();
    const node_id_t node = keys_.find(key);
    if (node == invalid_id) return Status::not_found("key " + display_key(key) + " is not in the graph");
    return node;
}

std::string_view Engine::key(node_id_t node) const {
    auto lock = read_lock();
    return keys_.key(node);
}

std::vector<std::string_view> Engine::keys_of(const std::vector<Hit>& hits) const {
    auto lock = read_lock();
    std::vector<std::string_view> keys;
    keys.reserve(hits.size());
    for (const Hit& hit : hits) keys.push_back(keys_.key(hit.node));
    return keys;
}

std::vector<std::string> Engine::unknown_names(NameKind kind, const std::vector<std::string>& names) const {
    auto lock = read_lock();
    const detail::Interner& interned = kind == NameKind::label ? labels_ : kind == NameKind::tenant ? tenants_ : rels_;
    std::vector<std::string> unknown;
    std::uint32_t id = 0;
    for (const std::string& name : names)
        if (!interned.find(name, &id)) unknown.push_back(name);
    return unknown;
}

NodeRecord Engine::node(node_id_t node, bool with_vector) const {
    auto lock = read_lock();
    NodeRecord record;
    record.key = std::string(keys_.key(node));
    record.label = labels_.name(node_labels_[node]);
    record.tenant = tenants_.name(node_tenants_[node]);
    record.ts = node_ts_[node];
    record.text = std::string(node_texts_[node]);
    record.props = std::string(node_props_[node]);
    record.aliases = std::string(node_aliases_[node]);
    if (with_vector) {
        record.vector.resize(config_.dim);
        node_vectors_.dequantize(node, record.vector.data());
    }
    return record;
}

void Engine::node_codes(node_id_t node, std::int8_t* codes, float* scale) const {
    auto lock = read_lock();
    std::copy(node_vectors_.codes(node), node_vectors_.codes(node) + config_.dim, codes);
    *scale = node_vectors_.scale(node);
}

EdgeRecord Engine::edge_locked(edge_id_t edge) const {
    return {edge, edge_src_[edge], edge_dst_[edge], rels_.name(edge_rels_[edge]), edge_weights_[edge], edge_ts_[edge]};
}

EdgeRecord Engine::edge(edge_id_t edge) const {
    auto lock = read_lock();
    return edge_locked(edge);
}

std::vector<EdgeRecord> Engine::neighbors(node_id_t node, Direction direction, bool filter_rels,
                                          const std::vector<std::string>& rels) const {
    auto lock = read_lock();
    std::vector<std::uint8_t> rel_ok;
    if (filter_rels) rels_.mask_of(rels, rel_ok);
    // The same walk as traversal, with no fanout limit, collecting instead of visiting.
    std::vector<EdgeRecord> found;
    if (node >= keys_.count_ids() || node_dead_[node]) return found;
    TraversalParams params;
    params.direction = direction;
    params.max_fanout = SIZE_MAX;
    params.rel_ok = filter_rels ? &rel_ok : nullptr;
    for_each_allowed_edge(graph_view(), node, params, [&](node_id_t, edge_id_t edge) {
        found.push_back(edge_locked(edge));
        return true;
    });
    return found;
}

EngineStats Engine::stats() const {
    bool read_only;
    std::size_t deferred;
    {
        std::lock_guard<std::mutex> writer(writer_mutex_);  // before the read lock: writers lock in that order
        read_only = !read_only_.empty();
        deferred = deferred_hnsw_.size();
    }
    auto lock = read_lock();
    EngineStats s{};
    s.read_only = read_only;
    s.count_index_pending = deferred + background_pending();
    s.count_index_relinked = seed_index_->count_relinked();
    s.count_nodes = keys_.count_ids() - count_dead_nodes_;
    s.count_edges = edge_src_.size() - count_dead_edges_;
    s.count_deleted_nodes = count_dead_nodes_;
    s.count_deleted_edges = count_dead_edges_;
    s.count_delta_edges = delta_.count_edges;
    s.count_compactions = count_compactions_;
    s.last_lsn = last_lsn_.load();
    s.count_edge_vectors = edge_vectors_.size();
    s.count_labels = labels_.size();
    s.count_tenants = tenants_.size();
    s.count_rels = rels_.size();
    s.vector_bytes = node_vectors_.memory_bytes() + edge_vectors_.memory_bytes();
    s.text_bytes = node_texts_.memory_bytes() + node_props_.memory_bytes() + edge_texts_.memory_bytes() +
                   edge_props_.memory_bytes();
    s.csr_bytes = csr_.memory_bytes() + delta_.memory_bytes();
    {
        std::unique_lock<std::shared_mutex> still(hnsw_walk_mutex_);  // it walks every member
        s.hnsw_bytes = seed_index_->memory_bytes();
    }
    s.key_bytes = keys_.memory_bytes();
    s.member_list_bytes = label_members_.memory_bytes() + tenant_members_.memory_bytes();
    s.count_seed_full_scans = count_seed_full_scans_.load(std::memory_order_relaxed);
    s.count_seed_list_scans = count_seed_list_scans_.load(std::memory_order_relaxed);
    s.count_seed_hnsw_searches = count_seed_hnsw_searches_.load(std::memory_order_relaxed);
    s.count_seed_scan_fallbacks = count_seed_scan_fallbacks_.load(std::memory_order_relaxed);
    s.prop_bytes = 0;
    for (const PropColumn& column : prop_columns_)
        s.prop_bytes += column.str_ids.capacity() * sizeof(std::uint32_t) + column.ints.capacity() * sizeof(std::int64_t) +
                        column.reals.capacity() * sizeof(double) + column.present.capacity();
    return s;
}

}  // namespace vecgraph
