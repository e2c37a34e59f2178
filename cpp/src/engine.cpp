// The engine facade (engine.hpp).
#include "vecgraph/engine.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "vecgraph/simd/kernels.hpp"

namespace vecgraph {

namespace {

constexpr std::size_t count_context_slots = 16;
constexpr std::size_t max_dim = 65536;  // keeps every int32 dot product exact
constexpr std::size_t max_expansion = 65536;  // HNSW beam widths (efConstruction, ef) beyond this only cost memory

std::size_t default_threads(std::size_t threads) {
    if (threads) return threads;
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
}

// Reserves room for `total` rows, growing geometrically so that many small batches stay
// amortised O(1) per row (an exact reserve per batch would copy everything every time).
template <typename container_at>
void reserve_rows(container_at& column, std::size_t total) {
    if (total > column.capacity()) column.reserve(std::max(total, column.capacity() + column.capacity() / 2));
}

template <typename key_at, typename value_at>
void reserve_rows(std::unordered_map<key_at, value_at>& map, std::size_t total) {
    if (total > map.bucket_count() * map.max_load_factor()) map.reserve(std::max(total, map.size() * 2));
}

const std::string& empty_string() {
    static const std::string empty;
    return empty;
}

}  // namespace

Engine::Engine(const EngineConfig& config)
    : config_(config),
      node_vectors_(config.dim, config.metric),
      edge_vectors_(config.dim, config.metric),
      contexts_(count_context_slots),
      scratch_(count_context_slots) {
    config_.threads = default_threads(config.threads);
    seed_index_ = std::make_unique<SeedIndex>(node_vectors_, config_.hnsw, count_context_slots);
}

Engine::~Engine() = default;

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
    return std::unique_ptr<Engine>(new Engine(config));
}

std::size_t Engine::count_nodes() const {
    auto lock = read_lock();
    return node_keys_.size();
}

std::size_t Engine::count_edges() const {
    auto lock = read_lock();
    return edge_src_.size();
}

Status Engine::add_nodes(const NodeBatch& batch) {
    if (batch.count == 0) return Status::OK();
    if (!batch.keys || !batch.vectors) return Status::invalid_argument("add_nodes needs keys and vectors");
    auto lock = write_lock();
    std::size_t first = node_keys_.size();
    if (batch.count > max_count_nodes - first)
        return Status::invalid_argument("a graph holds at most " + std::to_string(max_count_nodes) + " nodes");
    // Check everything before changing anything.
    std::unordered_set<std::string_view> batch_keys;
    batch_keys.reserve(batch.count);
    for (std::size_t i = 0; i < batch.count; ++i) {
        const std::string& key = batch.keys[i];
        if (key_to_node_.count(key))
            return Status::already_exists("key " + display_key(key) + " (row " + std::to_string(i) +
                                          ") is already in the graph; keys must be unique");
        if (!batch_keys.insert(key).second)
            return Status::already_exists("key " + display_key(key) + " appears twice in the batch (row " +
                                          std::to_string(i) + "); keys must be unique");
    }
    VG_RETURN_IF_ERROR(node_vectors_.validate(batch.vectors, batch.count, "vectors"));

    // Apply.
    std::size_t total = first + batch.count;
    reserve_rows(key_to_node_, total);
    reserve_rows(node_keys_, total);
    reserve_rows(node_labels_, total);
    reserve_rows(node_tenants_, total);
    reserve_rows(node_ts_, total);
    reserve_rows(node_texts_, total);
    reserve_rows(node_props_, total);
    for (std::size_t i = 0; i < batch.count; ++i) {
        auto node = static_cast<node_id_t>(first + i);
        auto inserted = key_to_node_.emplace(batch.keys[i], node).first;
        node_keys_.push_back(&inserted->first);
        node_labels_.push_back(labels_.intern(batch.labels ? batch.labels[i] : empty_string()));
        node_tenants_.push_back(tenants_.intern(batch.tenants ? batch.tenants[i] : empty_string()));
        node_ts_.push_back(batch.ts ? batch.ts[i] : 0);
        node_texts_.push_back(batch.texts ? batch.texts[i] : empty_string());
        node_props_.push_back(batch.props ? batch.props[i] : empty_string());
    }
    node_vectors_.append(batch.vectors, batch.count, config_.threads);
    Status status = seed_index_->add_range(static_cast<node_id_t>(first), batch.count, config_.threads);
    if (!status.ok()) return status;
    return Status::OK();
}

Status Engine::add_edges(const EdgeBatch& batch) {
    if (batch.count == 0) return Status::OK();
    if (!batch.src || !batch.dst) return Status::invalid_argument("add_edges needs src and dst keys");
    auto lock = write_lock();
    std::size_t first = edge_src_.size();
    if (batch.count > max_count_nodes - first)
        return Status::invalid_argument("a graph holds at most " + std::to_string(max_count_nodes) + " edges");
    std::vector<node_id_t> src(batch.count), dst(batch.count);
    for (std::size_t i = 0; i < batch.count; ++i) {
        auto s = key_to_node_.find(batch.src[i]);
        if (s == key_to_node_.end())
            return Status::not_found("edge row " + std::to_string(i) + ": src key " + display_key(batch.src[i]) +
                                     " is not a node of the graph; add the node first");
        auto d = key_to_node_.find(batch.dst[i]);
        if (d == key_to_node_.end())
            return Status::not_found("edge row " + std::to_string(i) + ": dst key " + display_key(batch.dst[i]) +
                                     " is not a node of the graph; add the node first");
        src[i] = s->second;
        dst[i] = d->second;
        if (batch.weights && !std::isfinite(batch.weights[i]))
            return Status::invalid_argument("edge row " + std::to_string(i) + ": weight is " +
                                            std::to_string(batch.weights[i]) + "; weights must be finite");
    }
    if (batch.vectors) VG_RETURN_IF_ERROR(edge_vectors_.validate(batch.vectors, batch.count, "edge vectors"));

    std::size_t total = first + batch.count;
    reserve_rows(edge_src_, total);
    reserve_rows(edge_dst_, total);
    edge_src_.insert(edge_src_.end(), src.begin(), src.end());
    edge_dst_.insert(edge_dst_.end(), dst.begin(), dst.end());
    reserve_rows(edge_rels_, total);
    reserve_rows(edge_weights_, total);
    reserve_rows(edge_ts_, total);
    reserve_rows(edge_texts_, total);
    reserve_rows(edge_props_, total);
    std::size_t first_vector_row = edge_vectors_.size();
    for (std::size_t i = 0; i < batch.count; ++i) {
        edge_rels_.push_back(rels_.intern(batch.rels ? batch.rels[i] : empty_string()));
        edge_weights_.push_back(batch.weights ? batch.weights[i] : 1.f);
        edge_ts_.push_back(batch.ts ? batch.ts[i] : 0);
        edge_texts_.push_back(batch.texts ? batch.texts[i] : empty_string());
        edge_props_.push_back(batch.props ? batch.props[i] : empty_string());
    }
    if (batch.vectors || !edge_vector_rows_.empty()) {
        edge_vector_rows_.resize(first, invalid_id);  // first edge vectors: earlier edges have none
        for (std::size_t i = 0; i < batch.count; ++i)
            edge_vector_rows_.push_back(batch.vectors ? static_cast<std::uint32_t>(first_vector_row + i) : invalid_id);
    }
    if (batch.vectors) edge_vectors_.append(batch.vectors, batch.count, config_.threads);
    csr_dirty_.store(true, std::memory_order_release);
    return Status::OK();
}

void Engine::refresh_csr() const {
    if (!csr_dirty_.load(std::memory_order_acquire)) return;
    auto lock = write_lock();
    if (!csr_dirty_.load(std::memory_order_relaxed)) return;
    EdgeColumns columns{edge_src_.data(), edge_dst_.data(), edge_rels_.data(), edge_weights_.data(), edge_src_.size()};
    csr_ = CsrGraph::build(node_keys_.size(), columns);
    csr_dirty_.store(false, std::memory_order_release);
}

Status Engine::validate(const SearchRequest& r) const {
    auto positive = [](const char* name, std::int64_t value) {
        return value >= 1 ? Status::OK()
                          : Status::invalid_argument(std::string(name) + " must be >= 1, got " + std::to_string(value));
    };
    VG_RETURN_IF_ERROR(positive("k", r.k));
    VG_RETURN_IF_ERROR(positive("seeds", r.seeds));
    VG_RETURN_IF_ERROR(positive("max_visited", r.max_visited));
    VG_RETURN_IF_ERROR(positive("max_fanout", r.max_fanout));
    if (r.hops < 0) return Status::invalid_argument("hops must be >= 0, got " + std::to_string(r.hops));
    if (r.ef < 0) return Status::invalid_argument("ef must be >= 0 (0: the graph's default), got " + std::to_string(r.ef));
    if (!std::isfinite(r.hop_decay) || r.hop_decay <= 0.0)
        return Status::invalid_argument("hop_decay must be a finite number > 0, got " + std::to_string(r.hop_decay));
    if (r.ts_min > r.ts_max)
        return Status::invalid_argument("ts_min (" + std::to_string(r.ts_min) + ") is after ts_max (" +
                                        std::to_string(r.ts_max) + ")");
    return Status::OK();
}

Status Engine::validate_queries(const float* queries, std::size_t count, std::size_t dim) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("queries have dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    for (std::size_t i = 0; i < count; ++i)
        VG_RETURN_IF_ERROR(validate_vector(queries + i * dim, dim, config_.metric, "queries", i));
    return Status::OK();
}

Result<SearchResult> Engine::search(const float* query, std::size_t dim, const SearchRequest& request) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("query has dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    VG_RETURN_IF_ERROR(validate(request));
    VG_RETURN_IF_ERROR(validate_vector(query, dim, config_.metric, "query", 0));
    refresh_csr();
    auto lock = read_lock();
    detail::ContextPool::Lease lease(contexts_);
    SearchResult result;
    VG_RETURN_IF_ERROR(search_locked(query, request, lease.slot(), result));
    return result;
}

Result<std::vector<SearchResult>> Engine::search_batch(const float* queries, std::size_t count, std::size_t dim,
                                                       const SearchRequest& request, std::size_t threads) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("queries have dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    VG_RETURN_IF_ERROR(validate(request));
    VG_RETURN_IF_ERROR(validate_queries(queries, count, dim));
    refresh_csr();
    auto lock = read_lock();
    std::vector<SearchResult> results(count);
    threads = std::max<std::size_t>(1, std::min({default_threads(threads), count, count_context_slots}));
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        detail::ContextPool::Lease lease(contexts_);
        for (std::size_t i; (i = next.fetch_add(1)) < count;)
            (void)search_locked(queries + i * dim, request, lease.slot(), results[i]);  // validated above
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& thread : pool) thread.join();
    return results;
}

Status Engine::search_locked(const float* query, const SearchRequest& request, std::size_t slot,
                             SearchResult& result) const {
    TraversalScratch& scratch = scratch_[slot];
    std::size_t count = node_keys_.size();
    scratch.begin(count);
    result = SearchResult{};
    result.path_offsets.push_back(0);
    if (count == 0) return Status::OK();

    // Filters: names the graph has never seen match nothing.
    NodeFilter& filter = scratch.filter;
    filter.reset();
    if (request.filter_labels) labels_.mask_of(request.labels, filter.allow_labels());
    if (request.filter_tenants) tenants_.mask_of(request.tenants, filter.allow_tenants());
    if (request.ts_min != INT64_MIN || request.ts_max != INT64_MAX) filter.set_ts_range(request.ts_min, request.ts_max);
    const NodeColumns columns{node_labels_.data(), node_tenants_.data(), node_ts_.data()};
    const NodeFilter* active_filter = filter.active() ? &filter : nullptr;

    // Seeds.
    node_vectors_.quantize_into(query, scratch.query);
    auto wanted_seeds = static_cast<std::size_t>(request.seeds);
    if (request.exact) {
        exact_seeds(scratch.query, wanted_seeds, active_filter, columns, scratch);
    } else {
        seed_index_->search(scratch.query, wanted_seeds, static_cast<std::size_t>(request.ef), active_filter, columns,
                            slot, scratch.seeds);
    }
    result.count_seeds = scratch.seeds.size();

    // Expansion and scoring.
    TraversalParams params;
    params.k = static_cast<std::size_t>(request.k);
    params.hops = static_cast<std::size_t>(request.hops);
    params.max_visited = static_cast<std::size_t>(request.max_visited);
    params.max_fanout = static_cast<std::size_t>(request.max_fanout);
    params.direction = request.direction;
    params.hop_decay = request.hop_decay;
    if (request.filter_rels) {
        rels_.mask_of(request.rels, scratch.rel_ok);
        params.rel_ok = &scratch.rel_ok;
    }
    traverse_and_score(csr_, node_vectors_, columns, active_filter, params, scratch, result.hits);
    result.count_visited = scratch.visited.size();
    std::vector<edge_id_t>& path = scratch.path;
    for (const Hit& hit : result.hits) {
        path_to(scratch, hit.node, edge_src_.data(), edge_dst_.data(), path);
        result.path_edges.insert(result.path_edges.end(), path.begin(), path.end());
        result.path_offsets.push_back(static_cast<std::uint32_t>(result.path_edges.size()));
    }
    return Status::OK();
}

void Engine::exact_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                         const NodeColumns& columns, TraversalScratch& scratch) const {
    // Brute force in blocks: the scan kernel over consecutive rows (or the gather kernel over the
    // admitted rows of a block), keeping the best `wanted` in a heap whose top is the worst kept.
    constexpr std::size_t block_rows = 4096;
    const std::size_t count = node_keys_.size();
    const std::size_t stride = node_vectors_.stride_bytes();
    auto worse = [](const ScoredNode& a, const ScoredNode& b) {  // a ranks before b
        return a.score != b.score ? a.score > b.score : a.node < b.node;
    };
    std::vector<ScoredNode>& heap = scratch.seeds;
    heap.clear();
    scratch.dots.resize(block_rows);
    for (std::size_t begin = 0; begin < count; begin += block_rows) {
        std::size_t end = std::min(count, begin + block_rows);
        std::size_t rows = 0;
        if (filter) {
            scratch.visited.clear();  // borrowed as the block's admitted ids; begin() resets it per query
            for (std::size_t node = begin; node < end; ++node)
                if (filter->admits(columns, static_cast<node_id_t>(node)))
                    scratch.visited.push_back(static_cast<node_id_t>(node));
            rows = scratch.visited.size();
            simd::active().dot_rows_i8(query.codes.data(), node_vectors_.codes_data(), stride, scratch.visited.data(),
                                       rows, config_.dim, scratch.dots.data());
        } else {
            rows = end - begin;
            simd::active().scan_i8(query.codes.data(), node_vectors_.codes(begin), stride, rows, config_.dim,
                                   scratch.dots.data());
        }
        for (std::size_t i = 0; i < rows; ++i) {
            auto node = filter ? scratch.visited[i] : static_cast<node_id_t>(begin + i);
            ScoredNode candidate{node, score_from_dot(config_.metric, scratch.dots[i], query.scale, query.sq_norm,
                                                      node_vectors_.scale(node), node_vectors_.sq_norm(node))};
            if (heap.size() < wanted) {
                heap.push_back(candidate);
                std::push_heap(heap.begin(), heap.end(), worse);
            } else if (worse(candidate, heap.front())) {
                std::pop_heap(heap.begin(), heap.end(), worse);
                heap.back() = candidate;
                std::push_heap(heap.begin(), heap.end(), worse);
            }
        }
    }
    std::sort_heap(heap.begin(), heap.end(), worse);  // best first
    scratch.visited.clear();
}

Result<node_id_t> Engine::find(std::string_view key) const {
    auto lock = read_lock();
    auto it = key_to_node_.find(std::string(key));
    if (it == key_to_node_.end()) return Status::not_found("key " + display_key(key) + " is not in the graph");
    return it->second;
}

std::string_view Engine::key(node_id_t node) const {
    auto lock = read_lock();
    return *node_keys_[node];
}

std::vector<std::string_view> Engine::keys_of(const std::vector<Hit>& hits) const {
    auto lock = read_lock();
    std::vector<std::string_view> keys;
    keys.reserve(hits.size());
    for (const Hit& hit : hits) keys.push_back(*node_keys_[hit.node]);
    return keys;
}

NodeRecord Engine::node(node_id_t node) const {
    auto lock = read_lock();
    NodeRecord record;
    record.key = *node_keys_[node];
    record.label = labels_.name(node_labels_[node]);
    record.tenant = tenants_.name(node_tenants_[node]);
    record.ts = node_ts_[node];
    record.text = std::string(node_texts_[node]);
    record.props = std::string(node_props_[node]);
    record.vector.resize(config_.dim);
    node_vectors_.dequantize(node, record.vector.data());
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
    refresh_csr();
    auto lock = read_lock();
    std::vector<std::uint8_t> rel_ok;
    if (filter_rels) rels_.mask_of(rels, rel_ok);
    // The same walk as traversal, with no fanout limit, collecting instead of visiting.
    std::vector<EdgeRecord> found;
    if (node >= csr_.count_nodes()) return found;
    TraversalParams params;
    params.direction = direction;
    params.max_fanout = SIZE_MAX;
    params.rel_ok = filter_rels ? &rel_ok : nullptr;
    for_each_allowed_edge(csr_, node, params, [&](node_id_t, edge_id_t edge) {
        found.push_back(edge_locked(edge));
        return true;
    });
    return found;
}

EngineStats Engine::stats() const {
    refresh_csr();
    auto lock = read_lock();
    EngineStats s{};
    s.count_nodes = node_keys_.size();
    s.count_edges = edge_src_.size();
    s.count_edge_vectors = edge_vectors_.size();
    s.count_labels = labels_.size();
    s.count_tenants = tenants_.size();
    s.count_rels = rels_.size();
    s.vector_bytes = node_vectors_.memory_bytes() + edge_vectors_.memory_bytes();
    s.text_bytes = node_texts_.memory_bytes() + node_props_.memory_bytes() + edge_texts_.memory_bytes() +
                   edge_props_.memory_bytes();
    s.csr_bytes = csr_.memory_bytes();
    s.hnsw_bytes = seed_index_->memory_bytes();
    std::size_t key_bytes = key_to_node_.bucket_count() * sizeof(void*) + node_keys_.capacity() * sizeof(void*);
    for (const auto& entry : key_to_node_) key_bytes += sizeof(entry) + 2 * sizeof(void*) + entry.first.capacity();
    s.key_bytes = key_bytes;
    return s;
}

}  // namespace vecgraph
