// The engine facade (engine.hpp).
#include "vecgraph/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>

#include "vecgraph/detail/json_scalars.hpp"
#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/detail/ranges.hpp"
#include "vecgraph/simd/kernels.hpp"
#include "vecgraph/wal_records.hpp"

namespace vecgraph {

namespace {

// A double as a user wrote it (0.5, -1, 1e-300), for error messages.
std::string format_real(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.15g", value);
    if (std::strtod(text, nullptr) != value) std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

// Seeds rank by score, then by node id (a total order). A function object, so that the heap
// algorithms inline it.
struct RanksBefore {
    bool operator()(const ScoredNode& a, const ScoredNode& b) const {
        return a.score != b.score ? a.score > b.score : a.node < b.node;
    }
};
constexpr RanksBefore ranks_before{};

// Keeps the best `wanted` candidates offered in a heap whose front is the worst kept.
void offer_best(std::vector<ScoredNode>& heap, std::size_t wanted, const ScoredNode& candidate) {
    if (heap.size() < wanted) {
        heap.push_back(candidate);
        std::push_heap(heap.begin(), heap.end(), ranks_before);
    } else if (ranks_before(candidate, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), ranks_before);
        heap.back() = candidate;
        std::push_heap(heap.begin(), heap.end(), ranks_before);
    }
}

constexpr std::size_t count_context_slots = 16;
constexpr std::size_t max_dim = 65536;  // keeps every int32 dot product exact
constexpr std::size_t max_expansion = 65536;  // HNSW beam widths (efConstruction, ef) beyond this only cost memory

// WAL record types written by the engine (wal_format.hpp; payloads: wal_records.hpp).
namespace record {
constexpr auto add_nodes = static_cast<std::uint8_t>(wal::RecordType::add_nodes);
constexpr auto add_edges = static_cast<std::uint8_t>(wal::RecordType::add_edges);
constexpr auto upsert_nodes = static_cast<std::uint8_t>(wal::RecordType::upsert_nodes);
constexpr auto delete_nodes = static_cast<std::uint8_t>(wal::RecordType::delete_nodes);
constexpr auto delete_edges = static_cast<std::uint8_t>(wal::RecordType::delete_edges);
constexpr auto delete_tenant = static_cast<std::uint8_t>(wal::RecordType::delete_tenant);
constexpr auto set_aliases = static_cast<std::uint8_t>(wal::RecordType::set_aliases);
}

std::size_t default_threads(std::size_t threads) {
    if (threads) return threads;
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
}

// Declared just after the exclusive lock is taken for a change of several structures. An
// exception thrown before the change is complete (std::bad_alloc) would leave searches a graph
// half changed, so the process stops instead, saying why. A folder graph loses no acknowledged
// write by it: the write is in the WAL, and reopening the folder applies it.
class AbortIfThrown {
  public:
    explicit AbortIfThrown(const char* change) noexcept : change_(change), exceptions_(std::uncaught_exceptions()) {}
    AbortIfThrown(const AbortIfThrown&) = delete;
    AbortIfThrown& operator=(const AbortIfThrown&) = delete;
    ~AbortIfThrown() {
        if (std::uncaught_exceptions() <= exceptions_) return;
        std::fprintf(stderr,
                     "vecgraph: an exception (out of memory?) stopped %s half way under the exclusive lock; "
                     "stopping the process rather than serve a half-changed graph (a graph in a folder loses no "
                     "acknowledged write: reopen it)\n",
                     change_);
        std::abort();
    }

  private:
    const char* change_;
    int exceptions_;
};

// A column with room for `rows` rows holding `column`'s rows.
template <typename value_at>
std::vector<value_at> grown_copy(const std::vector<value_at>& column, std::size_t rows) {
    std::vector<value_at> copy;
    copy.reserve(rows);
    copy.assign(column.begin(), column.end());
    return copy;
}
detail::StringColumn grown_copy(const detail::StringColumn& column, std::size_t rows) {
    return column.copy_with_capacity(rows);
}
// A column with room for `total` rows may still allocate when rows are written to it: a string
// column whose rows are all empty does (its offsets) at its first non-empty value.
template <typename value_at>
bool allocates_on_write(const std::vector<value_at>&, bool) noexcept { return false; }
bool allocates_on_write(const detail::StringColumn& column, bool non_empty_values) noexcept {
    return non_empty_values && !column.materialized();
}
bool any_non_empty(const std::string* values, std::size_t count) noexcept {
    return values && std::any_of(values, values + count, [](const std::string& v) { return !v.empty(); });
}

// Rows to append to a column: rows[0..count), or `fill` `count` times when rows is nullptr
// (empty strings, for a string column).
template <typename value_at>
struct NewRows {
    const value_at* rows;
    std::size_t count;
    value_at fill;
};
template <typename value_at>
void append_rows(std::vector<value_at>& column, const NewRows<value_at>& add) {
    if (add.rows) column.insert(column.end(), add.rows, add.rows + add.count);
    else column.resize(column.size() + add.count, add.fill);
}
void append_rows(detail::StringColumn& column, const NewRows<std::string>& add) { column.append(add.rows, add.count); }
template <typename column_at>
struct row_of {
    using type = typename column_at::value_type;
};
template <>
struct row_of<detail::StringColumn> {
    using type = std::string;
};

// Growing a column copies it. The copy is made before the exclusive lock (searches keep
// reading the old buffer; other writers are held off by writer_mutex_), so that only an O(1)
// swap happens under the lock; the old buffer is freed after the lock is released. Rows given
// to append() go into the copy then too, so that a large batch writes (and page-faults) its
// rows before the lock; a column with room enough appends them in place at commit().
template <typename value_at>
void materialize(std::vector<value_at>&) noexcept {}
void materialize(detail::StringColumn& column) { column.materialize(); }

template <typename column_at>
class Regrow {
  public:
    /// `non_empty_values`: for a string column, whether the rows written include a non-empty
    /// value (then an all-empty column is copied and given its offsets here, before the lock).
    Regrow(column_at& column, std::size_t total, bool non_empty_values = false) : column_(column) {
        if (total <= column.capacity() && !allocates_on_write(column, non_empty_values)) return;
        grown_ = grown_copy(column, std::max(total, column.capacity() + column.capacity() / 2));
        if (non_empty_values) materialize(*grown_);
    }
    using row_t = typename row_of<column_at>::type;
    /// To the grown copy now, or to the column at commit(); `add.rows` must stay valid until then.
    void append(const NewRows<row_t>& add) {
        if (grown_) append_rows(*grown_, add);
        else pending_ = add;
    }
    /// Under the exclusive lock: swaps in the grown copy, or appends in place.
    void commit() {
        if (grown_) std::swap(column_, *grown_);
        else if (pending_) append_rows(column_, *pending_);
    }

  private:
    column_at& column_;
    std::optional<column_at> grown_;  // none while the column has room (no allocation for a small write)
    std::optional<NewRows<row_t>> pending_;
};

// Every live edge at a node (both directions, no fanout limit), or every live out-edge.
const TraversalParams every_edge = [] {
    TraversalParams params;
    params.direction = Direction::both;
    params.max_fanout = SIZE_MAX;
    return params;
}();
const TraversalParams every_out_edge = [] {
    TraversalParams params = every_edge;
    params.direction = Direction::out;
    return params;
}();

const std::string& empty_string() {
    static const std::string empty;
    return empty;
}

// Edge i's relation name ("" when the batch has none); a rel_index entry must have been
// checked against count_rel_names (prepare_edges does).
const std::string& rel_of(const EdgeBatch& batch, std::size_t i) {
    if (!batch.rels) return empty_string();
    return batch.rel_index ? batch.rels[batch.rel_index[i]] : batch.rels[i];
}

// Row i of a batch's keys, for messages: an encoded key, or an int key.
std::string batch_key(const std::string* keys, const std::int64_t* ints, std::size_t i) {
    return ints ? std::to_string(ints[i]) : display_key(keys[i]);
}

}  // namespace

struct Engine::PreparedNodes {
    std::vector<std::int8_t> rows;         // count x stride, quantized
    std::vector<node_id_t> existing;       // per row: the node an upsert replaces, or invalid_id
    std::size_t count_new = 0;
    // Per row, found before the exclusive lock; names new to the graph are interned by apply_nodes.
    std::vector<label_id_t> labels;
    std::vector<tenant_id_t> tenants;
    detail::BatchNames label_names, tenant_names;
    // Filterable property values, row-major (count x declared properties).
    struct PropValue {
        bool present = false;
        std::string text;
        std::int64_t integer = 0;
        double real = 0;
    };
    std::vector<PropValue> props;
    // Filled by apply_nodes when HNSW inserts are due (not deferred); finish_write runs them.
    std::vector<node_id_t> to_index;  // new nodes, then upserted ones (indexed again)
    std::size_t count_reindexed = 0;  // upserted nodes among them
};

struct Engine::PreparedEdges {
    std::vector<node_id_t> src, dst;
    std::vector<rel_id_t> rels;  // per edge (a name new to the graph: the id apply_edges interns it under)
    detail::BatchNames rel_names;  // the names new to the graph, interned by apply_edges
    std::vector<std::int8_t> rows;         // edge vector rows, when the batch has vectors
    std::vector<std::uint8_t> has_vector;  // per edge, when the batch has vectors
};

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

// ---------------------------------------------------------------------------------------------
// Write path: writable -> prepare (check everything) -> log -> apply -> finish (sync).

Status Engine::writable() const {
    if (!read_only_.empty()) return Status::read_only(read_only_);
    return Status::OK();
}

template <typename encode_at>
Result<std::uint64_t> Engine::log(std::uint8_t type, encode_at&& encode) {
    if (!wal_) return last_lsn_.load() + 1;  // in memory: LSNs still count the writes
    wal::PayloadWriter payload;
    {
        wal::PayloadWriter counting(true);
        encode(counting);
        payload.reserve(counting.size());
    }
    encode(payload);
    auto lsn = wal_->append(type, payload.payload().data(), payload.payload().size());
    if (!lsn.ok()) {
        const Status& failure = lsn.status();
        // The writer refuses a record with invalid_argument before writing any byte of it (only
        // a record over the size limit can get there): the batch is rejected, the graph stays
        // writable.
        if (failure.code() == StatusCode::invalid_argument)
            return Status::invalid_argument("the batch is too large for one WAL record (" + failure.message() +
                                            "); nothing was written: split it into smaller batches");
        read_only_ = failure.code() == StatusCode::read_only
                         ? failure.message()
                         : "the WAL could not be written (" + failure.message() +
                               "); the graph is read-only, reopen it to recover";
        return failure;
    }
    return lsn.value();
}

namespace {

// `run()`'s Status, with a std::bad_alloc it throws as an error when the write is in a log a
// reopen recovers it from (`logged`); rethrown otherwise.
template <typename run_at>
Status out_of_memory_as_error(run_at&& run, bool logged) {
    try {
        return run();
    } catch (const std::bad_alloc&) {
        if (!logged) throw;
        return Status::internal("out of memory");
    }
}

}  // namespace

template <typename apply_at>
Status Engine::apply_logged(apply_at&& apply) {
    Status status = out_of_memory_as_error(apply, wal_ != nullptr);
    if (status.ok() || !wal_) return status;
    return read_only_after(status, "a write in the WAL could not be applied (" + status.message() +
                                       "); the graph is read-only, reopen it to recover (the reopen applies that write)");
}

Status Engine::read_only_after(const Status& failure, std::string why) {
    if (read_only_.empty()) read_only_ = why;  // the first reason stays
    return Status(failure.code(), std::move(why));
}

Status Engine::finish_write(std::unique_lock<std::mutex>& writer, std::uint64_t lsn, PreparedNodes* to_index) {
    if (text_changed_) {
        last_text_lsn_.store(lsn);
        text_changed_ = false;
    }
    last_lsn_.store(lsn);
    bool sync = wal_ && sync_policy_ == wal::SyncPolicy::always;
    std::shared_ptr<wal::Writer> wal = wal_;
    if (to_index && !to_index->to_index.empty()) {
        std::lock_guard<std::mutex> guard(in_flight_mutex_);
        ++inserts_in_flight_;
    } else {
        to_index = nullptr;
    }
    writer.unlock();
    // The fdatasync runs on the WAL's syncer thread while this write inserts its nodes into the
    // HNSW index; the next write applies (and inserts, and syncs) meanwhile.
    if (sync && to_index) wal->start_sync();
    Status indexed = to_index ? out_of_memory_as_error([&] { return index_applied(*to_index); }, wal != nullptr)
                              : Status::OK();
    if (!indexed.ok() && wal) {
        // The nodes are in the graph and the log but not in the HNSW index: a reopen indexes them.
        std::lock_guard<std::mutex> again(writer_mutex_);
        indexed = read_only_after(indexed, "the nodes of a write in the WAL could not be inserted into the HNSW index (" +
                                               indexed.message() +
                                               "); the graph is read-only, reopen it to recover (the reopen indexes them)");
    }
    maybe_start_compaction();
    if (!sync) return indexed;
    Status status = wal->sync_to(lsn);  // group commit: concurrent writers share one fsync
    if (!status.ok()) {
        std::lock_guard<std::mutex> again(writer_mutex_);
        if (read_only_.empty())
            read_only_ = status.code() == StatusCode::read_only
                             ? status.message()
                             : "the WAL could not be synced (" + status.message() +
                                   "); the graph is read-only, reopen it to recover";
    }
    return status.ok() ? indexed : status;
}

Status Engine::index_applied(const PreparedNodes& applied) {
    struct Done {  // however the inserts end, an exception included: close() and verify() wait for this
        Engine& engine;
        ~Done() {
            {
                std::lock_guard<std::mutex> guard(engine.in_flight_mutex_);
                --engine.inserts_in_flight_;
            }
            engine.in_flight_cv_.notify_all();
        }
    } done{*this};
    return insert_seeds(applied.to_index, applied.count_reindexed, false);
}

Status Engine::insert_seeds(const std::vector<node_id_t>& nodes, std::size_t reindexed, bool wait_for_relink,
                            std::size_t* added) {
    // Counted before the second members go in, so that searches beside the insert already drop
    // repeats (a count above the members there are only makes them ask for a few more).
    if (reindexed) seed_index_->count_reindexed(reindexed);
    std::shared_lock<std::shared_mutex> in_place(insert_mutex_);
    {
        std::shared_lock<std::shared_mutex> adding(hnsw_walk_mutex_);
        VG_RETURN_IF_ERROR(seed_index_->add_nodes(nodes.data(), nodes.size(), config_.threads, contexts_, added));
    }
    relink_unreachable_members(wait_for_relink);
    return Status::OK();
}

void Engine::wait_for_inserts_in_flight() const {
    std::unique_lock<std::mutex> guard(in_flight_mutex_);
    in_flight_cv_.wait(guard, [this] { return inserts_in_flight_ == 0; });
}

Status Engine::reserve_seed_index(std::size_t count, std::unique_lock<std::shared_mutex>& moving) {
    if (!moving.owns_lock()) {
        if (seed_index_->reserve_in_place(count)) return Status::OK();
        moving.lock();
    }
    return seed_index_->reserve_more(count);
}

Result<Engine::PreparedNodes> Engine::prepare_nodes(const NodeBatch& batch, bool upsert) const {
    if (!batch.keys || (!batch.vectors && !batch.rows))
        return Status::invalid_argument("add_nodes needs keys and vectors");
    PreparedNodes prepared;
    prepared.existing.assign(batch.count, invalid_id);
    std::unordered_set<std::string_view> batch_keys;
    batch_keys.reserve(batch.count);
    keys_.find_many(batch.keys, batch.count, prepared.existing.data());
    for (std::size_t i = 0; i < batch.count; ++i) {
        const std::string& key = batch.keys[i];
        if (prepared.existing[i] != invalid_id && !upsert)
            return Status::already_exists("key " + display_key(key) + " (row " + std::to_string(i) +
                                          ") is already in the graph; keys must be unique (upsert_nodes replaces)");
        if (!batch_keys.insert(key).second)
            return Status::already_exists("key " + display_key(key) + " appears twice in the batch (row " +
                                          std::to_string(i) + "); keys must be unique");
    }
    prepared.count_new = static_cast<std::size_t>(
        std::count(prepared.existing.begin(), prepared.existing.end(), invalid_id));
    if (prepared.count_new > max_count_nodes - keys_.count_ids())
        return Status::invalid_argument("a graph holds at most " + std::to_string(max_count_nodes) + " nodes");
    std::size_t stride = node_vectors_.row_bytes();
    if (batch.vectors) {
        VG_RETURN_IF_ERROR(node_vectors_.validate(batch.vectors, batch.count, "vectors"));
        prepared.rows.resize(batch.count * stride);
        node_vectors_.quantize_rows(batch.vectors, batch.count, config_.threads, prepared.rows.data());
    } else {
        VG_RETURN_IF_ERROR(node_vectors_.validate_rows(batch.rows, batch.count, "vector rows"));
        prepared.rows.assign(batch.rows, batch.rows + batch.count * stride);
    }
    const std::vector<PropSpec>& declared = config_.filterable;
    if (!declared.empty() && batch.props) {
        prepared.props.resize(batch.count * declared.size());
        for (std::size_t i = 0; i < batch.count; ++i) {
            PreparedNodes::PropValue* values = prepared.props.data() + i * declared.size();
            detail::for_each_top_level_scalar(batch.props[i], [&](const std::string& name, const detail::JsonScalar& v) {
                for (std::size_t p = 0; p < declared.size(); ++p) {
                    if (declared[p].name != name) continue;
                    PreparedNodes::PropValue& out = values[p];
                    using Kind = detail::JsonScalar::Kind;
                    switch (declared[p].type) {
                        case PropType::str:
                            if ((out.present = v.kind == Kind::string)) out.text = v.text;
                            break;
                        case PropType::int64:
                        case PropType::timestamp:
                            // Integers, and reals with an integral value within int64 (e.g. 2.0e3).
                            if (v.kind == Kind::integer) {
                                out.present = true;
                                out.integer = v.integer;
                            } else if (v.kind == Kind::real && std::trunc(v.real) == v.real && v.real >= -9.2e18 &&
                                       v.real <= 9.2e18) {
                                out.present = true;
                                out.integer = static_cast<std::int64_t>(v.real);
                            }
                            break;
                        case PropType::float64:
                            if ((out.present = (v.kind == Kind::integer || v.kind == Kind::real) && std::isfinite(v.real)))
                                out.real = v.real;
                            break;
                    }
                }
            });
        }
    }
    // Label and tenant ids here, outside the exclusive lock that apply_nodes takes.
    prepared.label_names = detail::BatchNames(labels_);
    prepared.tenant_names = detail::BatchNames(tenants_);
    prepared.labels.resize(batch.count);
    prepared.tenants.resize(batch.count);
    auto name_or_empty = [&](const std::string* names) {
        return [names](std::size_t i) -> const std::string& { return names ? names[i] : empty_string(); };
    };
    prepared.label_names.ids_of_rows(batch.count, name_or_empty(batch.labels), prepared.labels.data());
    prepared.tenant_names.ids_of_rows(batch.count, name_or_empty(batch.tenants), prepared.tenants.data());
    return prepared;
}

Status Engine::apply_nodes(const NodeBatch& batch, PreparedNodes& prepared) {
    const std::size_t stride = node_vectors_.row_bytes();
    const std::size_t first = keys_.count_ids();
    std::vector<node_id_t> replaced;
    const std::size_t total = first + prepared.count_new;
    Regrow labels(node_labels_, total);
    Regrow tenants(node_tenants_, total);
    Regrow ts_column(node_ts_, total);
    Regrow dead(node_dead_, total);
    Regrow delta_slots(delta_.slot, total);
    Regrow texts(node_texts_, total, any_non_empty(batch.texts, batch.count));
    Regrow props(node_props_, total, any_non_empty(batch.props, batch.count));
    Regrow aliases(node_aliases_, total);
    VectorStore::Buffers rows = node_vectors_.grown_buffers(prepared.count_new);
    const bool rows_grown = rows.grown();
    // A batch of new keys only (no upsert) writes its rows into the grown copies now, so that
    // their page faults and copies happen before the lock; columns with room append them in
    // place at commit().
    const bool all_new = prepared.count_new == batch.count;
    replaced.reserve(batch.count - prepared.count_new);
    if (!replaying_ && !defer_index_) prepared.to_index.reserve(batch.count);
    if (all_new) {
        labels.append({prepared.labels.data(), batch.count, 0});
        tenants.append({prepared.tenants.data(), batch.count, 0});
        ts_column.append({batch.ts, batch.count, 0});
        dead.append({nullptr, batch.count, 0});
        delta_slots.append({nullptr, batch.count, 0});
        texts.append({batch.texts, batch.count, {}});
        props.append({batch.props, batch.count, {}});
        aliases.append({nullptr, batch.count, {}});
        if (rows_grown) node_vectors_.append_rows_to(rows, prepared.rows.data(), batch.count);
    }
    std::vector<Regrow<std::vector<std::uint32_t>>> prop_str;
    std::vector<Regrow<std::vector<std::int64_t>>> prop_int;
    std::vector<Regrow<std::vector<double>>> prop_real;
    std::vector<Regrow<std::vector<std::uint8_t>>> prop_present;
    // The new rows' keys go into the key index's arena, and its grown table, before the lock.
    std::vector<std::string_view> new_keys;
    new_keys.reserve(prepared.count_new);
    for (std::size_t i = 0; i < batch.count; ++i)
        if (prepared.existing[i] == invalid_id) new_keys.push_back(batch.keys[i]);
    detail::KeyIndex::Staged staged_keys = keys_.stage(new_keys.data(), new_keys.size());
    for (PropColumn& column : prop_columns_) {
        prop_str.emplace_back(column.str_ids, column.type == PropType::str ? total : 0);
        prop_int.emplace_back(column.ints, column.type == PropType::int64 || column.type == PropType::timestamp ? total : 0);
        prop_real.emplace_back(column.reals, column.type == PropType::float64 ? total : 0);
        prop_present.emplace_back(column.present, total);
    }
    {
        auto lock = write_lock();
        const AbortIfThrown whole("adding nodes");
        // Moving the row buffer or rewriting a row (upsert) waits for the HNSW inserts of
        // earlier writes that are still running (insert_mutex_); appending does not.
        std::unique_lock<std::shared_mutex> moving(insert_mutex_, std::defer_lock);
        if (rows_grown || !all_new) moving.lock();
        if (!replaying_ && !defer_index_) VG_RETURN_IF_ERROR(reserve_seed_index(batch.count, moving));
        for (std::size_t p = 0; p < prop_columns_.size(); ++p) {
            prop_str[p].commit();
            prop_int[p].commit();
            prop_real[p].commit();
            prop_present[p].commit();
        }
        labels.commit();
        tenants.commit();
        ts_column.commit();
        dead.commit();
        delta_slots.commit();
        texts.commit();
        props.commit();
        aliases.commit();
        node_vectors_.adopt_buffers(rows);  // with the new rows of an all-new batch when it grew
        if (all_new && !rows_grown) node_vectors_.append_rows(prepared.rows.data(), batch.count);
        keys_.commit(staged_keys);  // ids first, first + 1, ... for the new rows, in order
        // Node `node` takes the property values of batch row `row` (a missing value clears it).
        auto write_props = [&](node_id_t node, std::size_t row) {
            for (std::size_t p = 0; p < prop_columns_.size(); ++p) {
                PropColumn& column = prop_columns_[p];
                const PreparedNodes::PropValue* value =
                    prepared.props.empty() ? nullptr : &prepared.props[row * prop_columns_.size() + p];
                bool present = value && value->present;
                auto put = [&](auto& vec, auto v) {
                    if (node < vec.size()) vec[node] = v;
                    else vec.push_back(v);
                };
                put(column.present, static_cast<std::uint8_t>(present));
                switch (column.type) {
                    case PropType::str:
                        put(column.str_ids, present ? column.strings.intern(value->text) : std::uint32_t{0});
                        break;
                    case PropType::int64:
                    case PropType::timestamp:
                        put(column.ints, present ? value->integer : std::int64_t{0});
                        break;
                    case PropType::float64:
                        put(column.reals, present ? value->real : 0.0);
                        break;
                }
            }
        };
        std::size_t new_row = 0;
        prepared.label_names.intern_fresh(labels_);  // under the ids prepare_nodes gave them
        prepared.tenant_names.intern_fresh(tenants_);
        for (std::size_t i = 0; all_new && i < batch.count; ++i) {  // its columns hold its rows already
            const node_id_t node = static_cast<node_id_t>(first + i);
            label_members_.add(prepared.labels[i], node);
            tenant_members_.add(prepared.tenants[i], node);
            if (!prop_columns_.empty()) write_props(node, i);
        }
        for (std::size_t i = 0; !all_new && i < batch.count; ++i) {
            const label_id_t label = prepared.labels[i];
            const tenant_id_t tenant = prepared.tenants[i];
            const std::string& text = batch.texts ? batch.texts[i] : empty_string();
            const std::string& props = batch.props ? batch.props[i] : empty_string();
            std::int64_t ts = batch.ts ? batch.ts[i] : 0;
            const std::int8_t* row = prepared.rows.data() + i * stride;
            node_id_t node = prepared.existing[i];
            if (node != invalid_id) {  // upsert: replace in place, edges stay
                const label_id_t old_label = node_labels_[node];
                const tenant_id_t old_tenant = node_tenants_[node];
                node_labels_[node] = label;
                node_tenants_[node] = tenant;
                if (node_labels_[node] != old_label) {
                    label_members_.add(node_labels_[node], node);
                    label_members_.remove(old_label, node_labels_.data(), node_dead_.data());
                }
                if (node_tenants_[node] != old_tenant) {
                    tenant_members_.add(node_tenants_[node], node);
                    tenant_members_.remove(old_tenant, node_tenants_.data(), node_dead_.data());
                }
                node_ts_[node] = ts;
                node_texts_.set(node, text);
                node_props_.set(node, props);
                node_vectors_.set_row(node, row);
                replaced.push_back(node);
                write_props(node, i);
                continue;
            }
            node = static_cast<node_id_t>(first + new_row++);
            node_labels_.push_back(label);
            node_tenants_.push_back(tenant);
            node_dead_.push_back(0);  // before a later row's upsert can prune a list that holds this node
            label_members_.add(node_labels_.back(), node);
            tenant_members_.add(node_tenants_.back(), node);
            node_ts_.push_back(ts);
            node_texts_.push_back(text);
            node_props_.push_back(props);
            node_aliases_.push_back(empty_string());
            node_vectors_.append_rows(row, 1);
            write_props(node, i);
        }
        delta_.slot.resize(keys_.count_ids(), 0);
        if (!prop_columns_.empty()) refresh_prop_views();
        if (!replaced.empty()) text_changed_ = true;
        for (std::size_t i = 0; batch.texts && i < batch.count && !text_changed_; ++i) text_changed_ = !batch.texts[i].empty();
        if (replaying_ || defer_index_) {  // one parallel HNSW pass later (flush_deferred)
            for (std::size_t i = 0; i < prepared.count_new; ++i) deferred_hnsw_.push_back(static_cast<node_id_t>(first + i));
            for (node_id_t node : replaced) {
                if (node >= indexed_before_defer_) continue;  // not indexed yet: indexed once, later
                deferred_hnsw_.push_back(node);
                ++deferred_reindexed_;
            }
            return Status::OK();
        }
    }
    // The HNSW inserts run after the writer lock is released (finish_write, index_applied).
    // (No allocation from here on: the write is applied, it must not fail now.)
    prepared.to_index.resize(prepared.count_new);
    for (std::size_t i = 0; i < prepared.count_new; ++i) prepared.to_index[i] = static_cast<node_id_t>(first + i);
    prepared.to_index.insert(prepared.to_index.end(), replaced.begin(), replaced.end());
    prepared.count_reindexed = replaced.size();
    return Status::OK();
}

void Engine::relink_unreachable_members(bool wait) {
    // Called with the read lock held and no walk lock: cheap when no insert ran beside another.
    if (!seed_index_->needs_relink()) return;
    // Without `wait`, an insert still running (the background pass beside a write) puts the
    // check off to that insert's own call here, which comes after it: suspects are recorded
    // under the walk lock held shared and taken under it held alone. Anything else holding
    // the walk lock is waited for.
    std::unique_lock<std::shared_mutex> still(hnsw_walk_mutex_, std::defer_lock);
    if (!wait && !still.try_lock()) {
        if (seed_index_->adds_running()) return;
        wait = true;
    }
    if (wait) still.lock();
    if (seed_index_->needs_relink()) seed_index_->relink_unreachable(contexts_, config_.threads);
}

namespace {

void encode_nodes(const NodeBatch& batch, const std::vector<std::int8_t>& rows, std::size_t dim, std::size_t stride,
                  wal::PayloadWriter& out) {
    out.u32(static_cast<std::uint32_t>(batch.count));
    out.u32(static_cast<std::uint32_t>(dim));
    out.u32(static_cast<std::uint32_t>(stride));
    for (std::size_t i = 0; i < batch.count; ++i) {
        out.str(batch.keys[i]);
        out.str(batch.labels ? batch.labels[i] : empty_string());
        out.str(batch.tenants ? batch.tenants[i] : empty_string());
        out.i64(batch.ts ? batch.ts[i] : 0);
        out.str(batch.texts ? batch.texts[i] : empty_string());
        out.str(batch.props ? batch.props[i] : empty_string());
        out.bytes(rows.data() + i * stride, stride);
    }
}

}  // namespace

Status Engine::write_nodes(const NodeBatch& batch, bool upsert) {
    if (batch.count == 0) return Status::OK();
    std::unique_lock<std::mutex> writer(writer_mutex_);
    VG_RETURN_IF_ERROR(writable());
    auto prepared = prepare_nodes(batch, upsert);
    if (!prepared.ok()) return prepared.status();
    auto lsn = log(upsert ? record::upsert_nodes : record::add_nodes, [&](wal::PayloadWriter& out) {
        encode_nodes(batch, prepared.value().rows, config_.dim, node_vectors_.row_bytes(), out);
    });
    if (!lsn.ok()) return lsn.status();
    VG_RETURN_IF_ERROR(apply_logged([&] { return apply_nodes(batch, prepared.value()); }));
    return finish_write(writer, lsn.value(), &prepared.value());
}

Status Engine::add_nodes(const NodeBatch& batch) { return write_nodes(batch, false); }

Status Engine::upsert_nodes(const NodeBatch& batch) { return write_nodes(batch, true); }

Result<Engine::PreparedEdges> Engine::prepare_edges(const EdgeBatch& batch) const {
    const bool by_id = batch.src_ids && batch.dst_ids;
    if (!by_id && (!(batch.src || batch.src_ints) || !(batch.dst || batch.dst_ints)))
        return Status::invalid_argument("add_edges needs src and dst keys");
    if (batch.count > max_count_nodes - edge_src_.size())
        return Status::invalid_argument("a graph holds at most " + std::to_string(max_count_nodes) + " edges");
    PreparedEdges prepared;
    prepared.src.resize(batch.count);
    prepared.dst.resize(batch.count);
    // Checks rows [begin, end) and fills their node ids; the first bad row's error, or OK.
    auto check_rows = [&](std::size_t begin, std::size_t end) -> Status {
        if (!by_id) {
            if (batch.src_ints) keys_.find_many_ints(batch.src_ints + begin, end - begin, prepared.src.data() + begin);
            else keys_.find_many(batch.src + begin, end - begin, prepared.src.data() + begin);
            if (batch.dst_ints) keys_.find_many_ints(batch.dst_ints + begin, end - begin, prepared.dst.data() + begin);
            else keys_.find_many(batch.dst + begin, end - begin, prepared.dst.data() + begin);
        }
        for (std::size_t i = begin; i < end; ++i) {
            if (by_id) {
                for (node_id_t node : {batch.src_ids[i], batch.dst_ids[i]})
                    if (node >= keys_.count_ids() || node_dead_[node])
                        return Status::not_found("edge row " + std::to_string(i) + ": node id " + std::to_string(node) +
                                                 " is not a live node of the graph");
                prepared.src[i] = batch.src_ids[i];
                prepared.dst[i] = batch.dst_ids[i];
            } else {
                if (prepared.src[i] == invalid_id)
                    return Status::not_found("edge row " + std::to_string(i) + ": src key " + batch_key(batch.src, batch.src_ints, i) +
                                             " is not a node of the graph; add the node first");
                if (prepared.dst[i] == invalid_id)
                    return Status::not_found("edge row " + std::to_string(i) + ": dst key " + batch_key(batch.dst, batch.dst_ints, i) +
                                             " is not a node of the graph; add the node first");
            }
            if (batch.weights && !std::isfinite(batch.weights[i]))
                return Status::invalid_argument("edge row " + std::to_string(i) + ": weight is " +
                                                std::to_string(batch.weights[i]) + "; weights must be finite");
        }
        return Status::OK();
    };
    // A large batch's key lookups (random reads of the key map) on up to config_.threads
    // threads, in row ranges; the error reported is the first bad row's, as one pass finds.
    const std::size_t parts = by_id ? 1 : std::max<std::size_t>(1, std::min(config_.threads, batch.count / 65536));
    std::vector<Status> failures(parts);
    detail::for_each_range(batch.count, parts, [&](std::size_t part, std::size_t begin, std::size_t end) {
        failures[part] = check_rows(begin, end);
    });
    for (const Status& failure : failures) VG_RETURN_IF_ERROR(failure);
    // Relation ids are looked up here, outside the exclusive lock that apply_edges takes, so a
    // large batch does not hold up searches while millions of names are hashed. A name new to
    // the graph gets the id apply_edges will intern it under: writers hold writer_mutex_ from
    // prepare to apply, so nothing is interned in between.
    prepared.rels.resize(batch.count);
    prepared.rel_names = detail::BatchNames(rels_);
    if (batch.rels && batch.rel_index) {  // a dictionary column: each name used is looked up once
        constexpr rel_id_t unused = std::numeric_limits<rel_id_t>::max();
        std::vector<rel_id_t> ids(batch.count_rel_names, unused);
        for (std::size_t i = 0; i < batch.count; ++i) {
            const std::uint32_t j = batch.rel_index[i];
            if (j >= batch.count_rel_names)
                return Status::invalid_argument("edge row " + std::to_string(i) + ": rel index " + std::to_string(j) +
                                                " is not below the " + std::to_string(batch.count_rel_names) +
                                                " rel names");
            if (ids[j] == unused) ids[j] = prepared.rel_names.id_of(batch.rels[j]);
            prepared.rels[i] = ids[j];
        }
    } else {
        prepared.rel_names.ids_of_rows(batch.count, [&](std::size_t i) -> const std::string& { return rel_of(batch, i); },
                                       prepared.rels.data());
    }
    std::size_t stride = edge_vectors_.row_bytes();
    if (batch.vectors) {
        VG_RETURN_IF_ERROR(edge_vectors_.validate(batch.vectors, batch.count, "edge vectors"));
        prepared.rows.resize(batch.count * stride);
        edge_vectors_.quantize_rows(batch.vectors, batch.count, config_.threads, prepared.rows.data());
        prepared.has_vector.assign(batch.count, 1);
    } else if (batch.rows) {
        prepared.has_vector.assign(batch.count, 1);
        if (batch.has_vector) prepared.has_vector.assign(batch.has_vector, batch.has_vector + batch.count);
        prepared.rows.assign(batch.rows, batch.rows + batch.count * stride);
        for (std::size_t i = 0; i < batch.count; ++i)
            if (prepared.has_vector[i])
                VG_RETURN_IF_ERROR(edge_vectors_.validate_rows(prepared.rows.data() + i * stride, 1, "edge vector rows"));
    }
    return prepared;
}

Status Engine::apply_edges(const EdgeBatch& batch, PreparedEdges& prepared) {
    const std::size_t first = edge_src_.size();
    const std::size_t total = first + batch.count;
    const std::size_t stride = edge_vectors_.row_bytes();
    // A batch this large is folded into a new base CSR at once rather than into the delta.
    const bool bulk = config_.auto_compact_edges && batch.count >= config_.auto_compact_edges;
    Regrow src(edge_src_, total), dst(edge_dst_, total);
    Regrow rels(edge_rels_, total);
    Regrow weights(edge_weights_, total);
    Regrow ts_column(edge_ts_, total);
    Regrow dead(edge_dead_, total);
    Regrow texts(edge_texts_, total, any_non_empty(batch.texts, batch.count));
    Regrow props(edge_props_, total, any_non_empty(batch.props, batch.count));
    src.append({prepared.src.data(), batch.count, invalid_id});
    dst.append({prepared.dst.data(), batch.count, invalid_id});
    rels.append({prepared.rels.data(), batch.count, 0});
    weights.append({batch.weights, batch.count, 1.f});
    ts_column.append({batch.ts, batch.count, 0});
    dead.append({nullptr, batch.count, 0});
    texts.append({batch.texts, batch.count, {}});
    props.append({batch.props, batch.count, {}});
    {
        auto lock = write_lock();
        const AbortIfThrown whole("adding edges");
        src.commit();
        dst.commit();
        prepared.rel_names.intern_fresh(rels_);  // under the ids prepare_edges gave them
        rels.commit();
        weights.commit();
        ts_column.commit();
        dead.commit();
        texts.commit();
        props.commit();
        if (!prepared.has_vector.empty() || !edge_vector_rows_.empty()) {
            edge_vector_rows_.resize(first, invalid_id);  // first edge vectors: earlier edges have none
            for (std::size_t i = 0; i < batch.count; ++i) {
                if (!prepared.has_vector.empty() && prepared.has_vector[i]) {
                    edge_vector_rows_.push_back(static_cast<std::uint32_t>(edge_vectors_.size()));
                    edge_vectors_.append_rows(prepared.rows.data() + i * stride, 1);
                } else {
                    edge_vector_rows_.push_back(invalid_id);
                }
            }
        }
        if (!bulk)
            delta_.add_range(EdgeColumns{edge_src_.data(), edge_dst_.data(), edge_rels_.data(), edge_weights_.data(), total},
                             first);
    }
    return Status::OK();
}

Status Engine::add_edges(const EdgeBatch& batch) {
    if (batch.count == 0) return Status::OK();
    std::unique_lock<std::mutex> writer(writer_mutex_);
    VG_RETURN_IF_ERROR(writable());
    auto prepared = prepare_edges(batch);
    if (!prepared.ok()) return prepared.status();
    const bool by_id = batch.src_ids && batch.dst_ids;
    auto lsn = log(record::add_edges, [&](wal::PayloadWriter& out) {
        const std::size_t stride = edge_vectors_.row_bytes();
        const PreparedEdges& p = prepared.value();
        out.u32(static_cast<std::uint32_t>(batch.count));
        out.u32(static_cast<std::uint32_t>(config_.dim));
        out.u32(static_cast<std::uint32_t>(stride));
        out.u8(p.has_vector.empty() ? 0 : 1);
        char src_key[9], dst_key[9];
        for (std::size_t i = 0; i < batch.count; ++i) {
            out.str(by_id ? keys_.key(p.src[i]) : batch.src_ints ? encode_int_key(batch.src_ints[i], src_key) : batch.src[i]);
            out.str(by_id ? keys_.key(p.dst[i]) : batch.dst_ints ? encode_int_key(batch.dst_ints[i], dst_key) : batch.dst[i]);
            out.str(rel_of(batch, i));
            out.f32(batch.weights ? batch.weights[i] : 1.f);
            out.i64(batch.ts ? batch.ts[i] : 0);
            out.str(batch.texts ? batch.texts[i] : empty_string());
            out.str(batch.props ? batch.props[i] : empty_string());
            bool has = !p.has_vector.empty() && p.has_vector[i];
            out.u8(has ? 1 : 0);
            if (has) out.bytes(p.rows.data() + i * stride, stride);
        }
    });
    if (!lsn.ok()) return lsn.status();
    VG_RETURN_IF_ERROR(apply_logged([&] { return apply_edges(batch, prepared.value()); }));
    if (config_.auto_compact_edges && batch.count >= config_.auto_compact_edges) {
        // The batch's edges are in the columns but in no adjacency until this CSR is in.
        const AbortIfThrown whole("folding a large edge batch into the CSR");
        rebuild_base();
    }
    return finish_write(writer, lsn.value());
}

Result<std::vector<node_id_t>> Engine::select_nodes(const std::string* keys, std::size_t count, bool missing_ok) const {
    std::vector<node_id_t> nodes;
    std::unordered_set<node_id_t> seen;
    for (std::size_t i = 0; i < count; ++i) {
        const node_id_t node = keys_.find(keys[i]);
        if (node == invalid_id) {
            if (missing_ok) continue;
            return Status::not_found("key " + display_key(keys[i]) + " (row " + std::to_string(i) +
                                     ") is not in the graph; pass missing_ok=True to skip missing keys");
        }
        if (seen.insert(node).second) nodes.push_back(node);
    }
    return nodes;
}

Result<std::vector<edge_id_t>> Engine::select_edges(const EdgeSelection& selection, bool missing_ok) const {
    std::vector<edge_id_t> edges;
    std::unordered_set<edge_id_t> seen;
    for (std::size_t i = 0; i < selection.count; ++i) {
        const node_id_t src = keys_.find(selection.src[i]);
        const node_id_t dst = keys_.find(selection.dst[i]);
        rel_id_t rel = 0;
        bool rel_known = !selection.rels || rels_.find(selection.rels[i], &rel);
        std::size_t matched = 0;
        if (src != invalid_id && dst != invalid_id && rel_known) {
            for_each_allowed_edge(graph_view(), src, every_out_edge, [&](node_id_t neighbor, edge_id_t e) {
                if (neighbor == dst && (!selection.rels || edge_rels_[e] == rel)) {
                    ++matched;
                    if (seen.insert(e).second) edges.push_back(e);
                }
                return true;
            });
        }
        if (!matched && !missing_ok)
            return Status::not_found("edge row " + std::to_string(i) + ": no edge from " + display_key(selection.src[i]) +
                                     " to " + display_key(selection.dst[i]) +
                                     (selection.rels ? " with rel '" + selection.rels[i] + "'" : std::string()) +
                                     "; pass missing_ok=True to skip");
    }
    return edges;
}

std::vector<node_id_t> Engine::tenant_nodes(const std::string& tenant) const {
    std::vector<node_id_t> nodes;
    tenant_id_t id;
    if (!tenants_.find(tenant, &id)) return nodes;
    for (node_id_t n : tenant_members_.list(id))
        if (!node_dead_[n] && node_tenants_[n] == id) nodes.push_back(n);
    // In node order, each once (a list may repeat a node that moved away and back).
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    return nodes;
}

void Engine::apply_edge_deletes(const std::vector<edge_id_t>& edges) {
    auto lock = write_lock();
    const AbortIfThrown whole("deleting edges");
    for (edge_id_t e : edges) {
        if (edge_dead_[e]) continue;
        edge_dead_[e] = 1;
        ++count_dead_edges_;
        ++dead_edges_since_compaction_;
    }
}

void Engine::apply_node_deletes(const std::vector<node_id_t>& nodes) {
    if (!nodes.empty()) text_changed_ = true;
    auto lock = write_lock();
    const AbortIfThrown whole("deleting nodes");
    for (node_id_t node : nodes) {
        if (node_dead_[node]) continue;
        node_dead_[node] = 1;
        ++count_dead_nodes_;
        label_members_.remove(node_labels_[node], node_labels_.data(), node_dead_.data());
        tenant_members_.remove(node_tenants_[node], node_tenants_.data(), node_dead_.data());
        for_each_allowed_edge(graph_view(), node, every_edge, [&](node_id_t, edge_id_t edge) {
            if (!edge_dead_[edge]) {
                edge_dead_[edge] = 1;
                ++count_dead_edges_;
                ++dead_edges_since_compaction_;
            }
            return true;
        });
        keys_.erase(node);  // a later add of the key makes a new node; key(node) stays
    }
}

Status Engine::delete_nodes(const std::string* keys, std::size_t count, bool missing_ok, std::size_t* deleted) {
    if (deleted) *deleted = 0;
    if (count == 0) return Status::OK();
    std::unique_lock<std::mutex> writer(writer_mutex_);
    VG_RETURN_IF_ERROR(writable());
    auto nodes = select_nodes(keys, count, missing_ok);
    if (!nodes.ok()) return nodes.status();
    if (nodes.value().empty()) return Status::OK();
    auto lsn = log(record::delete_nodes, [&](wal::PayloadWriter& out) {
        out.u32(static_cast<std::uint32_t>(nodes.value().size()));
        for (node_id_t node : nodes.value()) out.str(keys_.key(node));
    });
    if (!lsn.ok()) return lsn.status();
    apply_node_deletes(nodes.value());
    if (deleted) *deleted = nodes.value().size();
    return finish_write(writer, lsn.value());
}

Status Engine::delete_edges(const EdgeSelection& selection, bool missing_ok, std::size_t* deleted) {
    if (deleted) *deleted = 0;
    if (selection.count == 0) return Status::OK();
    if (!selection.src || !selection.dst) return Status::invalid_argument("delete_edges needs src and dst keys");
    std::unique_lock<std::mutex> writer(writer_mutex_);
    VG_RETURN_IF_ERROR(writable());
    auto edges = select_edges(selection, missing_ok);
    if (!edges.ok()) return edges.status();
    if (edges.value().empty()) return Status::OK();
    auto lsn = log(record::delete_edges, [&](wal::PayloadWriter& out) {
        out.u32(static_cast<std::uint32_t>(selection.count));
        out.u8(selection.rels ? 1 : 0);
        for (std::size_t i = 0; i < selection.count; ++i) {
            out.str(selection.src[i]);
            out.str(selection.dst[i]);
            if (selection.rels) out.str(selection.rels[i]);
        }
    });
    if (!lsn.ok()) return lsn.status();
    apply_edge_deletes(edges.value());
    if (deleted) *deleted = edges.value().size();
    return finish_write(writer, lsn.value());
}

Status Engine::delete_tenant(const std::string& tenant, std::size_t* deleted) {
    if (deleted) *deleted = 0;
    std::unique_lock<std::mutex> writer(writer_mutex_);
    VG_RETURN_IF_ERROR(writable());
    std::vector<node_id_t> nodes = tenant_nodes(tenant);
    if (nodes.empty()) return Status::OK();
    auto lsn = log(record::delete_tenant, [&](wal::PayloadWriter& out) { out.str(tenant); });
    if (!lsn.ok()) return lsn.status();
    apply_node_deletes(nodes);
    if (deleted) *deleted = nodes.size();
    return finish_write(writer, lsn.value());
}

Status Engine::set_aliases(const std::string* keys, const std::string* aliases, std::size_t count) {
    if (count == 0) return Status::OK();
    std::unique_lock<std::mutex> writer(writer_mutex_);
    VG_RETURN_IF_ERROR(writable());
    auto nodes = alias_targets(keys, count);
    if (!nodes.ok()) return nodes.status();
    auto lsn = log(record::set_aliases, [&](wal::PayloadWriter& out) {
        out.u32(static_cast<std::uint32_t>(count));
        for (std::size_t i = 0; i < count; ++i) {
            out.str(keys[i]);
            out.str(aliases[i]);
        }
    });
    if (!lsn.ok()) return lsn.status();
    apply_aliases(nodes.value(), aliases);
    return finish_write(writer, lsn.value());
}

Result<std::vector<node_id_t>> Engine::alias_targets(const std::string* keys, std::size_t count) const {
    std::vector<node_id_t> nodes(count);
    std::unordered_set<node_id_t> seen;
    for (std::size_t i = 0; i < count; ++i) {
        nodes[i] = keys_.find(keys[i]);
        if (nodes[i] == invalid_id)
            return Status::not_found("key " + display_key(keys[i]) + " (row " + std::to_string(i) + ") is not in the graph");
        if (!seen.insert(nodes[i]).second)
            return Status::invalid_argument("key " + display_key(keys[i]) + " appears twice (row " + std::to_string(i) + ")");
    }
    return nodes;
}

void Engine::apply_aliases(const std::vector<node_id_t>& nodes, const std::string* aliases) {
    auto lock = write_lock();
    const AbortIfThrown whole("setting aliases");
    for (std::size_t i = 0; i < nodes.size(); ++i) node_aliases_.set(nodes[i], aliases[i]);
}

// ---------------------------------------------------------------------------------------------
// Compaction.

void Engine::install_base(CsrGraph next, std::size_t count_edges, const std::uint8_t* dead_at_build) {
    // The writer lock is held: the edge columns and the node count stay as they are. Edges
    // added while the CSR was built stay in a delta, made here before the engine lock, so that
    // running out of memory ends the compaction (std::bad_alloc) before it changes anything;
    // edges deleted meanwhile stay flagged in edge_dead_, which traversal checks.
    DeltaAdjacency delta = delta_.rebased(
        EdgeColumns{edge_src_.data(), edge_dst_.data(), edge_rels_.data(), edge_weights_.data(), edge_src_.size()},
        count_edges);
    std::size_t dead_since = 0;
    if (dead_at_build)
        for (std::size_t e = 0; e < count_edges; ++e) dead_since += edge_dead_[e] && !dead_at_build[e];
    CsrGraph old;  // freed after the lock is released (a large CSR's unmapping takes a while)
    auto lock = write_lock();
    old = std::exchange(csr_, std::move(next));
    std::swap(delta_, delta);  // the old delta is freed after the lock too
    base_edges_ = count_edges;
    dead_edges_since_compaction_ = dead_since;
    ++count_compactions_;
}

void Engine::rebuild_base() {
    // The writer lock is held, so the edge columns cannot change: build from them directly
    // while searches keep reading the current base and delta, then swap.
    EdgeColumns columns{edge_src_.data(), edge_dst_.data(), edge_rels_.data(), edge_weights_.data(), edge_src_.size(),
                        count_dead_edges_ ? edge_dead_.data() : nullptr};
    install_base(CsrGraph::build(keys_.count_ids(), columns), edge_src_.size(), nullptr);
}

Status Engine::compact() {
    std::lock_guard<std::mutex> one(compaction_mutex_);
    // Copy the edge columns under the writer lock (writes wait for a memcpy, not for the build).
    std::vector<node_id_t> src, dst;
    std::vector<rel_id_t> rels;
    std::vector<float> weights;
    std::vector<std::uint8_t> dead;
    std::size_t count_nodes = 0;
    {
        std::lock_guard<std::mutex> writer(writer_mutex_);
        if (delta_.count_edges == 0 && dead_edges_since_compaction_ == 0 && base_edges_ == edge_src_.size())
            return Status::OK();  // the base CSR already holds every edge
        count_nodes = keys_.count_ids();
        src = edge_src_;
        dst = edge_dst_;
        rels = edge_rels_;
        weights = edge_weights_;
        dead = edge_dead_;
    }
    EdgeColumns columns{src.data(), dst.data(), rels.data(), weights.data(), src.size(), dead.data()};
    CsrGraph next = CsrGraph::build(count_nodes, columns);
    std::lock_guard<std::mutex> writer(writer_mutex_);
    install_base(std::move(next), src.size(), dead.data());
    return Status::OK();
}

void Engine::maybe_start_compaction() {
    if (!config_.auto_compact_edges) return;
    std::size_t pending, base;
    {
        auto lock = read_lock();
        pending = delta_.count_edges + dead_edges_since_compaction_;
        base = csr_.count_edges();
    }
    if (pending < std::max(config_.auto_compact_edges, base / 8)) return;
    bool expected = false;
    if (!compaction_running_.compare_exchange_strong(expected, true)) return;
    std::lock_guard<std::mutex> hold(thread_mutex_);
    if (compaction_thread_.joinable()) compaction_thread_.join();  // finished: it cleared the flag last
    try {
        compaction_thread_ = std::thread([this] {
            // Out of memory, a background compaction gives up: it fails while copying the edge
            // columns, building the CSR or the delta that goes with it, before it changes
            // anything. The delta stays and is searched as before; a later write tries again.
            try {
                (void)compact();
            } catch (const std::bad_alloc&) {
            }
            compaction_running_.store(false);
        });
    } catch (const std::exception&) {
        compaction_running_.store(false);  // no thread (out of memory): a later write tries again
    }
}

void Engine::wait_for_compaction() {
    std::lock_guard<std::mutex> hold(thread_mutex_);
    if (compaction_thread_.joinable()) compaction_thread_.join();
}

// ---------------------------------------------------------------------------------------------
// WAL.

Status Engine::attach_wal(const std::string& dir, const wal::Uuid& uuid, std::uint64_t next_lsn,
                          const wal::WriterOptions& options) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    if (wal_) return Status::invalid_argument("a WAL is already attached");
    auto opened = wal::Writer::open(dir, uuid, next_lsn, options);
    if (!opened.ok()) return opened.status();
    wal_ = std::move(opened).value();
    sync_policy_ = options.sync;
    last_lsn_.store(next_lsn - 1);
    read_only_.clear();
    return Status::OK();
}

Status Engine::sync() {
    std::unique_lock<std::mutex> writer(writer_mutex_);
    if (!wal_) return Status::OK();
    std::shared_ptr<wal::Writer> wal = wal_;
    writer.unlock();
    return wal->sync();
}

Status Engine::drop_wal_before(std::uint64_t lsn) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    if (!wal_) return Status::OK();
    return wal_->drop_segments_before(lsn);
}

Status Engine::close_wal() {
    wait_for_compaction();
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();  // their writes sync after the inserts
    if (!wal_) return Status::OK();
    Status status = wal_->sync();
    wal_.reset();
    read_only_ = "the graph is closed; open it again with vecgraph.Graph.open to write";
    return status;
}

void Engine::refuse_writes(std::string why) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    read_only_ = std::move(why);
}

std::uint64_t Engine::last_lsn() const { return last_lsn_.load(); }

void Engine::begin_deferral() {
    if (replaying_ || defer_index_) return;
    indexed_before_defer_ = keys_.count_ids();
    deferred_hnsw_.clear();
    deferred_reindexed_ = 0;
}

namespace {

// These two never throw, for the paths that record a failure after running out of memory: when
// the message cannot be allocated, the Status keeps its code and goes without one.
Status internal_error(const char* message) noexcept {
    try {
        return Status::internal(message);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::internal, std::string());
    }
}
Status copy_of(const Status& status) noexcept {
    try {
        return status;
    } catch (const std::bad_alloc&) {
        return Status(status.code(), std::string());
    }
}

}  // namespace

Status Engine::flush_deferred(std::size_t background_min) {
    std::vector<node_id_t> pending;
    pending.swap(deferred_hnsw_);
    std::size_t reindexed = deferred_reindexed_;
    deferred_reindexed_ = 0;
    pending.erase(std::remove_if(pending.begin(), pending.end(), [&](node_id_t n) { return node_dead_[n] != 0; }),
                  pending.end());
    if (pending.empty()) return Status::OK();
    if (pending.size() >= background_min) {
        start_background_index(std::move(pending), reindexed);
        return Status::OK();
    }
    // On failure the nodes stay pending as after a failed background pass (start_background_index
    // with the failure), also when all of them are in the index and only the relink after the
    // inserts failed: until it runs, a member can be unreachable, so they stay scanned. Out of
    // memory is rethrown (MemoryError).
    std::size_t added = 0;
    bool counted = false;  // insert_seeds counted `reindexed` (it does so before any insert)
    auto keep_pending = [&](const Status& failure) {
        start_background_index(std::move(pending), added + (counted ? 0 : reindexed), &failure);
    };
    try {
        Status status;
        {
            auto lock = write_lock();
            std::unique_lock<std::shared_mutex> moving(insert_mutex_, std::defer_lock);
            status = reserve_seed_index(pending.size(), moving);
        }
        if (status.ok()) {
            counted = true;
            status = insert_seeds(pending, reindexed, true, &added);
        }
        if (!status.ok()) keep_pending(status);
        return status;
    } catch (const std::bad_alloc&) {
        keep_pending(internal_error("out of memory while inserting the deferred nodes into the HNSW index"));
        throw;
    }
}

Status Engine::defer_indexing(bool on, std::size_t background_min) {
    if (on) VG_RETURN_IF_ERROR(wait_for_indexing());  // one kind of waiting at a time
    std::unique_lock<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    if (on) {
        begin_deferral();
        defer_index_ = true;
        return Status::OK();
    }
    if (!defer_index_) return Status::OK();
    defer_index_ = false;
    return flush_deferred(background_min);
}

void Engine::start_background_index(std::vector<node_id_t> nodes, std::size_t reindexed, const Status* failed) {
    // Called with the writer lock held and no pass running (defer_indexing(true) waits for it).
    join_background_index();
    std::sort(nodes.begin(), nodes.end());  // an upserted node may wait twice: once is enough
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    auto lock = write_lock();  // searches read background_nodes_ while a pass runs
    std::lock_guard<std::mutex> guard(background_mutex_);
    background_nodes_ = std::move(nodes);
    background_stop_.store(false);
    background_done_.store(0, std::memory_order_release);
    background_running_.store(true, std::memory_order_release);
    if (failed) {
        // The insert of these nodes failed (`failed`, the caller's to report): they wait as after
        // a failed pass, and the next wait_for_indexing runs one, counting `reindexed` then.
        background_failed_added_ = reindexed;
        background_failure_reported_ = true;
        background_status_ = copy_of(*failed);
        return;
    }
    // Counted before the pass inserts the second members, for the whole pass (see insert_seeds).
    if (reindexed) seed_index_->count_reindexed(reindexed);
    background_status_ = Status::OK();
    background_failure_reported_ = false;
    pass_active_ = true;
    try {
        index_thread_ = std::thread([this] { background_index_pass(); });
    } catch (const std::exception&) {
        // No thread (out of memory, or the process's thread limit): the pass failed before it
        // began. Its nodes stay pending (searches scan them); the next wait reports it, and the
        // one after runs it again.
        pass_active_ = false;
        background_failed_added_ = 0;
        background_status_ = internal_error("the background HNSW pass could not start its thread");
        background_done_cv_.notify_all();
    }
}

void Engine::background_index_pass() {
    // Inserts hold insert_mutex_ shared, not the engine lock: writes append beside them and wait
    // only when they move the row buffer or grow the index (then for the chunk in flight).
    constexpr std::size_t chunk = 256;
    const std::size_t total = background_nodes_.size();
    Status status;
    std::size_t chunk_added = 0;  // members added by the chunk in progress (set even when it throws)
    try {  // out of memory, the pass ends as after any failure
        std::vector<node_id_t> live;
        for (std::size_t begin = 0; begin < total && status.ok() && !background_stop_.load(); begin += chunk) {
            const std::size_t end = std::min(total, begin + chunk);
            live.clear();
            {
                auto lock = write_lock();  // reading node_dead_ and reserving exclude searches and writes
                std::unique_lock<std::shared_mutex> moving(insert_mutex_, std::defer_lock);
                for (std::size_t i = begin; i < end; ++i)
                    if (!node_dead_[background_nodes_[i]]) live.push_back(background_nodes_[i]);
                status = reserve_seed_index(live.size(), moving);
            }
            if (status.ok()) status = insert_seeds(live, 0, false, &chunk_added);
            if (status.ok()) {
                background_done_.store(end, std::memory_order_release);
                chunk_added = 0;
            }
        }
        if (status.ok()) {  // the chunks' checks may have been put off by writes beside the pass
            std::shared_lock<std::shared_mutex> in_place(insert_mutex_);
            relink_unreachable_members(true);
        }
    } catch (const std::bad_alloc&) {
        status = internal_error("out of memory while inserting nodes into the HNSW index in the background");
    }
    const bool complete = status.ok() && background_done_.load() == total;
    std::lock_guard<std::mutex> guard(background_mutex_);
    background_status_ = std::move(status);
    background_failed_added_ = background_status_.ok() ? 0 : chunk_added;
    // After a failure (or a stop) the nodes not reached stay pending: searches keep scanning them.
    if (complete) background_running_.store(false, std::memory_order_release);
    pass_active_ = false;
    background_done_cv_.notify_all();
}

void Engine::stop_background_index() {
    background_stop_.store(true);
    join_background_index();
}

void Engine::join_background_index() {
    // Only start_background_index (writer lock held) and the destructor join.
    std::thread finished;
    {
        std::unique_lock<std::mutex> guard(background_mutex_);
        background_done_cv_.wait(guard, [this] { return !pass_active_; });
        finished.swap(index_thread_);
    }
    if (finished.joinable()) finished.join();
}

Status Engine::wait_for_indexing() {
    {
        std::unique_lock<std::mutex> guard(background_mutex_);
        background_done_cv_.wait(guard, [this] { return !pass_active_; });  // any number of waiters
        if (background_status_.ok() || !background_failure_reported_) {
            if (!background_status_.ok()) background_failure_reported_ = true;
            return background_status_;
        }
    }
    {
        // The pass failed (out of memory) and a call has said so: run it again over the nodes it
        // did not reach. Those of the chunk it was inserting that are in the index already count
        // as indexed again (searches drop repeats).
        std::lock_guard<std::mutex> writer(writer_mutex_);
        std::vector<node_id_t> rest;
        std::size_t repeats = 0;
        bool restart = false;
        {
            std::unique_lock<std::mutex> guard(background_mutex_);
            background_done_cv_.wait(guard, [this] { return !pass_active_; });
            restart = !background_status_.ok() && background_failure_reported_ && background_running_.load();
            if (restart) {
                const std::size_t done = std::min(background_done_.load(), background_nodes_.size());
                rest.assign(background_nodes_.begin() + static_cast<std::ptrdiff_t>(done), background_nodes_.end());
                repeats = background_failed_added_;
            }
        }
        if (restart) start_background_index(std::move(rest), repeats);
    }
    std::unique_lock<std::mutex> guard(background_mutex_);
    background_done_cv_.wait(guard, [this] { return !pass_active_; });
    if (!background_status_.ok()) background_failure_reported_ = true;
    return background_status_;
}

std::size_t Engine::background_pending() const {
    return background_running_.load(std::memory_order_acquire)
               ? background_nodes_.size() - background_done_.load(std::memory_order_acquire)
               : 0;
}

std::size_t Engine::count_index_pending() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);  // a pass starts under it
    return background_pending() + deferred_hnsw_.size();
}

bool Engine::indexing_deferred() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    return defer_index_;
}

std::size_t Engine::count_deferred() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    return deferred_hnsw_.size();
}

Status Engine::save_seed_index(const std::string& path, bool* saved) {
    *saved = false;  // writes are paused by the caller (pause_writes holds writer_mutex_)
    if (count_dead_nodes_ || !deferred_hnsw_.empty() || background_running_.load() || seed_index_->count_reindexed() ||
        seed_index_->size() != keys_.count_ids())
        return Status::OK();
    auto lock = read_lock();
    std::unique_lock<std::shared_mutex> still(hnsw_walk_mutex_);  // no add in flight
    if (seed_index_->needs_relink()) seed_index_->relink_unreachable(contexts_, config_.threads);
    VG_RETURN_IF_ERROR(seed_index_->save(path));
    *saved = true;
    return Status::OK();
}

Status Engine::load_seed_index(const std::string& path) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    if (!defer_index_ || seed_index_->size() != 0 || deferred_reindexed_ || indexed_before_defer_ != 0 ||
        deferred_hnsw_.size() != keys_.count_ids() || count_dead_nodes_)
        return Status::invalid_argument(
            "load_seed_index needs deferred indexing and only freshly loaded nodes, none indexed or deleted");
    auto lock = write_lock();
    VG_RETURN_IF_ERROR(seed_index_->load(path, keys_.count_ids()));
    deferred_hnsw_.clear();
    indexed_before_defer_ = keys_.count_ids();
    return Status::OK();
}

std::vector<std::string> Engine::verify(std::size_t limit) const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    auto lock = read_lock();
    std::vector<std::string> problems;
    auto report = [&](std::string line) {
        if (problems.size() < limit) problems.push_back(std::move(line));
    };
    const std::size_t n = keys_.count_ids(), m = edge_src_.size();
    auto text = [](std::size_t v) { return std::to_string(v); };

    // Column lengths.
    for (auto [name, size] : {std::pair<const char*, std::size_t>{"labels", node_labels_.size()},
                              {"tenants", node_tenants_.size()}, {"ts", node_ts_.size()},
                              {"texts", node_texts_.size()}, {"props", node_props_.size()},
                              {"vectors", node_vectors_.size()}, {"tombstones", node_dead_.size()},
                              {"delta slots", delta_.slot.size()}})
        if (size != n) report(std::string("node column ") + name + " holds " + text(size) + " rows, not " + text(n));
    for (auto [name, size] : {std::pair<const char*, std::size_t>{"dst", edge_dst_.size()},
                              {"rels", edge_rels_.size()}, {"weights", edge_weights_.size()},
                              {"ts", edge_ts_.size()}, {"texts", edge_texts_.size()}, {"props", edge_props_.size()},
                              {"tombstones", edge_dead_.size()}})
        if (size != m) report(std::string("edge column ") + name + " holds " + text(size) + " rows, not " + text(m));
    if (!problems.empty()) return problems;  // the checks below index these columns

    // Nodes: key map, tombstones, interned ids, vector rows.
    std::size_t dead_nodes = 0;
    for (std::size_t v = 0; v < n; ++v) {
        dead_nodes += node_dead_[v] != 0;
        if (node_labels_[v] >= labels_.size()) report("node " + text(v) + " has label id " + text(node_labels_[v]) + " beyond the labels");
        if (node_tenants_[v] >= tenants_.size()) report("node " + text(v) + " has tenant id " + text(node_tenants_[v]) + " beyond the tenants");
        if (!std::isfinite(node_vectors_.scale(v)) || !std::isfinite(node_vectors_.sq_norm(v)))
            report("node " + text(v) + " has a non-finite vector scale or norm");
    }
    if (dead_nodes != count_dead_nodes_)
        report(text(dead_nodes) + " nodes are flagged deleted but the count says " + text(count_dead_nodes_));
    // Member lists: every live node in its label's and tenant's list; live counts exact.
    auto check_members = [&](const char* name, const detail::MemberLists& members,
                             const std::vector<std::uint32_t>& column, std::size_t ids) {
        std::vector<std::size_t> live(ids, 0);
        for (std::size_t v = 0; v < n; ++v)
            if (!node_dead_[v] && column[v] < ids) ++live[column[v]];
        std::vector<node_id_t> listed;
        for (std::uint32_t id = 0; id < ids; ++id) {
            if (members.live(id) != live[id])
                report(std::string(name) + " " + text(id) + " counts " + text(members.live(id)) + " live members, not " +
                       text(live[id]));
            listed.clear();
            for (node_id_t v : members.list(id)) {
                if (v >= n) report(std::string(name) + " " + text(id) + " lists node " + text(v) + " beyond the nodes");
                else if (!node_dead_[v] && column[v] == id) listed.push_back(v);
            }
            std::sort(listed.begin(), listed.end());
            listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
            if (listed.size() != live[id])
                report(std::string(name) + " " + text(id) + " lists " + text(listed.size()) + " of its " + text(live[id]) +
                       " live nodes");
        }
    };
    check_members("label", label_members_, node_labels_, labels_.size());
    check_members("tenant", tenant_members_, node_tenants_, tenants_.size());
    if (keys_.size() != n - dead_nodes)
        report("the key map holds " + text(keys_.size()) + " keys for " + text(n - dead_nodes) + " live nodes");
    keys_.for_each_live([&](node_id_t node, std::string_view key) {
        if (node >= n) return report("key " + display_key(key) + " maps to node " + text(node) + " beyond the nodes");
        if (node_dead_[node]) report("key " + display_key(key) + " maps to deleted node " + text(node));
        if (keys_.find(key) != node) report("key " + display_key(key) + " of node " + text(node) + " is not found by lookup");
    });

    // Edges: endpoints, rels, tombstones.
    std::size_t dead_edges = 0;
    for (std::size_t e = 0; e < m; ++e) {
        dead_edges += edge_dead_[e] != 0;
        if (edge_src_[e] >= n || edge_dst_[e] >= n) { report("edge " + text(e) + " names a node beyond the nodes"); continue; }
        if (edge_rels_[e] >= rels_.size()) report("edge " + text(e) + " has rel id " + text(edge_rels_[e]) + " beyond the rels");
        if (!edge_dead_[e] && (node_dead_[edge_src_[e]] || node_dead_[edge_dst_[e]]))
            report("edge " + text(e) + " is live but an endpoint is deleted");
        if (!edge_vector_rows_.empty() && edge_vector_rows_[e] != invalid_id && edge_vector_rows_[e] >= edge_vectors_.size())
            report("edge " + text(e) + " names vector row " + text(edge_vector_rows_[e]) + " beyond the edge vectors");
    }
    if (dead_edges != count_dead_edges_)
        report(text(dead_edges) + " edges are flagged deleted but the count says " + text(count_dead_edges_));
    if (!problems.empty()) return problems;

    // Adjacency: base CSR plus delta hold every live edge once per direction, in traversal order,
    // with the endpoints, weight and rel of the edge columns.
    std::vector<std::uint8_t> seen_out(m, 0), seen_in(m, 0);
    auto check_list = [&](const char* where, node_id_t u, const AdjEntry* begin, const AdjEntry* end, bool out,
                          std::vector<std::uint8_t>& seen) {
        for (const AdjEntry* a = begin; a != end; ++a) {
            if (a->edge >= m) { report(std::string(where) + " entry at node " + text(u) + " names edge " + text(a->edge) + " beyond the edges"); return; }
            node_id_t from = out ? edge_src_[a->edge] : edge_dst_[a->edge], to = out ? edge_dst_[a->edge] : edge_src_[a->edge];
            if (from != u || to != a->neighbor || edge_weights_[a->edge] != a->weight || edge_rels_[a->edge] != a->rel)
                report(std::string(where) + " entry at node " + text(u) + " disagrees with edge " + text(a->edge));
            if (a != begin && !comes_before(a[-1], *a))
                report(std::string(where) + " entries at node " + text(u) + " are not in (weight desc, edge id asc) order");
            if (seen[a->edge]++) report("edge " + text(a->edge) + " appears twice in the " + where + " adjacency");
        }
    };
    for (int direction = 0; direction < 2; ++direction) {
        bool out = direction == 0;
        const Adjacency& adj = out ? csr_.out() : csr_.in();
        const char* where = out ? "CSR out" : "CSR in";
        std::vector<std::uint8_t>& seen = out ? seen_out : seen_in;
        if (csr_.count_nodes() > n) report(std::string(where) + " covers " + text(csr_.count_nodes()) + " nodes, the graph has " + text(n));
        if (adj.offsets.empty() && adj.entries.empty() && csr_.count_nodes() == 0) {
            // no base CSR yet
        } else if (adj.offsets.size() != csr_.count_nodes() + 1) {
            report(std::string(where) + " offsets have the wrong length");
        } else if (adj.offsets.front() != 0 || adj.offsets.back() != adj.entries.size()) {
            report(std::string(where) + " offsets do not span the entries");
        } else if (!std::is_sorted(adj.offsets.begin(), adj.offsets.end())) {
            report(std::string(where) + " offsets decrease");
        } else {
            for (std::size_t u = 0; u < csr_.count_nodes(); ++u)
                check_list(where, static_cast<node_id_t>(u), adj.entries.data() + adj.offsets[u],
                           adj.entries.data() + adj.offsets[u + 1], out, seen);
        }
        std::size_t delta_entries = 0;
        for (std::size_t i = 0; i < delta_.lists.size(); ++i) {
            const DeltaAdjacency::Lists& lists = delta_.lists[i];
            const node_id_t u = lists.node;
            const std::vector<AdjEntry>& list = out ? lists.out : lists.in;
            delta_entries += list.size();
            if (u >= n) { report(std::string("delta entry at node ") + text(u) + " beyond the nodes"); continue; }
            if (out && delta_.slot[u] != i + 1)
                report("node " + text(u) + " has delta edges but its delta slot is " + text(delta_.slot[u]));
            check_list(out ? "delta out" : "delta in", u, list.data(), list.data() + list.size(), out, seen);
        }
        if (delta_entries != delta_.count_edges)
            report(std::string(out ? "delta out" : "delta in") + " holds " + text(delta_entries) + " entries, the count says " + text(delta_.count_edges));
        if (out) {
            const std::size_t slots_set = delta_.slot.size() - static_cast<std::size_t>(std::count(delta_.slot.begin(), delta_.slot.end(), 0u));
            if (slots_set != delta_.lists.size())
                report(text(slots_set) + " nodes have a delta slot, but the delta holds " + text(delta_.lists.size()) + " nodes' lists");
        }
    }
    for (std::size_t e = 0; e < m; ++e)
        if (!edge_dead_[e] && (!seen_out[e] || !seen_in[e]))
            report("live edge " + text(e) + " is missing from the " + (seen_out[e] ? "in" : "out") + " adjacency");

    // Seed index against the store: every live node that is not waiting is a member.
    std::vector<std::uint8_t> skip(node_dead_);
    for (node_id_t v : deferred_hnsw_) skip[v] = 1;
    if (background_running_.load(std::memory_order_acquire))
        for (std::size_t i = background_done_.load(std::memory_order_acquire); i < background_nodes_.size(); ++i)
            skip[background_nodes_[i]] = 1;
    std::unique_lock<std::shared_mutex> still(hnsw_walk_mutex_);  // no add in flight (a pass may run)
    for (auto& line : seed_index_->verify(n, skip.data(), limit > problems.size() ? limit - problems.size() : 0))
        report(std::move(line));
    return problems;
}

Result<wal::RecoveryReport> Engine::replay_wal(const std::string& dir, const wal::Uuid& uuid, std::uint64_t from_lsn,
                                               bool truncate_tail, const std::string& tail_marker_path) {
    bool was_deferring = defer_index_;
    begin_deferral();
    replaying_ = true;
    auto report = wal::recover(
        dir, uuid, from_lsn,
        [this](std::uint8_t type, std::uint8_t /*flags*/, std::uint64_t lsn, std::string_view payload) {
            return replay_record(type, lsn, payload);
        },
        truncate_tail, tail_marker_path);
    replaying_ = false;
    // Index the replayed nodes in one parallel pass (deleted ones are left out: never returned),
    // unless the caller keeps deferring.
    if (!was_deferring) VG_RETURN_IF_ERROR(flush_deferred());
    // The state is at from_lsn - 1 (the snapshot's LSN) when no record follows it; a graph that
    // attaches no WAL afterwards (opened read-only) reports it as its last LSN.
    if (report.ok()) last_lsn_.store(std::max<std::uint64_t>(report.value().last_lsn, from_lsn ? from_lsn - 1 : 0));
    return report;
}

Status Engine::replay_record(std::uint8_t type, std::uint64_t lsn, std::string_view payload) {
    auto bad = [&](const std::string& why) {
        return Status::corruption("WAL record " + std::to_string(lsn) + " (type " + std::to_string(type) + "): " + why);
    };
    auto check = [&](Status status) {
        return status.ok() ? status : bad("it does not apply to the graph: " + status.message());
    };
    wal::PayloadReader in(payload);
    std::unique_lock<std::mutex> writer(writer_mutex_);
    switch (type) {
        case record::add_nodes:
        case record::upsert_nodes: {
            std::uint32_t count = in.u32(), dim = in.u32(), stride = in.u32();
            if (in.failed() || dim != config_.dim || stride != node_vectors_.row_bytes())
                return bad("its vectors have dim " + std::to_string(dim) + ", the graph has dim " + std::to_string(config_.dim));
            if (count > in.remaining() / stride) return bad("its node count exceeds its size");
            std::vector<std::string> keys(count), labels(count), tenants(count), texts(count), props(count);
            std::vector<std::int64_t> ts(count);
            std::vector<std::int8_t> rows(static_cast<std::size_t>(count) * stride);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                keys[i] = in.str();
                labels[i] = in.str();
                tenants[i] = in.str();
                ts[i] = in.i64();
                texts[i] = in.str();
                props[i] = in.str();
                const char* row = in.bytes(stride);
                if (row) std::memcpy(rows.data() + static_cast<std::size_t>(i) * stride, row, stride);
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            NodeBatch batch;
            batch.count = count;
            batch.keys = keys.data();
            batch.rows = rows.data();
            batch.labels = labels.data();
            batch.tenants = tenants.data();
            batch.ts = ts.data();
            batch.texts = texts.data();
            batch.props = props.data();
            auto prepared = prepare_nodes(batch, type == record::upsert_nodes);
            if (!prepared.ok()) return check(prepared.status());
            VG_RETURN_IF_ERROR(check(apply_nodes(batch, prepared.value())));
            break;
        }
        case record::add_edges: {
            std::uint32_t count = in.u32(), dim = in.u32(), stride = in.u32();
            std::uint8_t has_vectors = in.u8();
            if (in.failed() || dim != config_.dim || stride != edge_vectors_.row_bytes())
                return bad("its vectors have dim " + std::to_string(dim) + ", the graph has dim " + std::to_string(config_.dim));
            if (count > in.remaining() / 30) return bad("its edge count exceeds its size");
            std::vector<std::string> src(count), dst(count), rels(count), texts(count), props(count);
            std::vector<float> weights(count);
            std::vector<std::int64_t> ts(count);
            std::vector<std::uint8_t> has(count, 0);
            std::vector<std::int8_t> rows(has_vectors ? static_cast<std::size_t>(count) * stride : 0);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                src[i] = in.str();
                dst[i] = in.str();
                rels[i] = in.str();
                weights[i] = in.f32();
                ts[i] = in.i64();
                texts[i] = in.str();
                props[i] = in.str();
                has[i] = in.u8();
                if (has[i]) {
                    if (!has_vectors) return bad("an edge has a vector in a batch without vectors");
                    const char* row = in.bytes(stride);
                    if (row) std::memcpy(rows.data() + static_cast<std::size_t>(i) * stride, row, stride);
                }
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            EdgeBatch batch;
            batch.count = count;
            batch.src = src.data();
            batch.dst = dst.data();
            batch.rels = rels.data();
            batch.weights = weights.data();
            batch.ts = ts.data();
            batch.texts = texts.data();
            batch.props = props.data();
            if (has_vectors) {
                batch.rows = rows.data();
                batch.has_vector = has.data();
            }
            auto prepared = prepare_edges(batch);
            if (!prepared.ok()) return check(prepared.status());
            VG_RETURN_IF_ERROR(check(apply_edges(batch, prepared.value())));
            if (config_.auto_compact_edges && count >= config_.auto_compact_edges) rebuild_base();
            break;
        }
        case record::delete_nodes: {
            std::uint32_t count = in.u32();
            if (in.failed() || count > in.remaining() / 4) return bad("its key count exceeds its size");
            std::vector<std::string> keys(count);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) keys[i] = in.str();
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            auto nodes = select_nodes(keys.data(), count, false);
            if (!nodes.ok()) return check(nodes.status());
            apply_node_deletes(nodes.value());
            break;
        }
        case record::delete_edges: {
            std::uint32_t count = in.u32();
            std::uint8_t has_rels = in.u8();
            if (in.failed() || count > in.remaining() / 8) return bad("its edge count exceeds its size");
            std::vector<std::string> src(count), dst(count), rels(has_rels ? count : 0);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                src[i] = in.str();
                dst[i] = in.str();
                if (has_rels) rels[i] = in.str();
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            EdgeSelection selection{count, src.data(), dst.data(), has_rels ? rels.data() : nullptr};
            auto edges = select_edges(selection, true);
            if (!edges.ok()) return check(edges.status());
            apply_edge_deletes(edges.value());
            break;
        }
        case record::delete_tenant: {
            std::string tenant = in.str();
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            apply_node_deletes(tenant_nodes(tenant));
            break;
        }
        case record::set_aliases: {
            std::uint32_t count = in.u32();
            if (in.failed() || count > in.remaining() / 8) return bad("its key count exceeds its size");
            std::vector<std::string> keys(count), aliases(count);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                keys[i] = in.str();
                aliases[i] = in.str();
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            auto nodes = alias_targets(keys.data(), count);
            if (!nodes.ok()) return check(nodes.status());
            apply_aliases(nodes.value(), aliases.data());
            break;
        }
        case static_cast<std::uint8_t>(wal::RecordType::checkpoint):
            break;  // a marker: nothing to apply
        default:
            return bad("the record type is unknown to this version");
    }
    if (text_changed_) {
        last_text_lsn_.store(lsn);
        text_changed_ = false;
    }
    last_lsn_.store(lsn);
    return Status::OK();
}

void Engine::pause_writes(const std::function<void()>& fn) const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();  // a snapshot's seed index holds every node it holds
    fn();
}

Result<ExportedState> Engine::export_state(bool roll_wal) {
    // Called inside pause_writes: no append can run. Start a new WAL segment at the next LSN,
    // so that once the snapshot is committed every older segment can be dropped.
    if (wal_ && roll_wal) {
        Status rolled = wal_->roll_segment();
        if (!rolled.ok()) {
            if (read_only_.empty())
                read_only_ = "the WAL could not start a new segment (" + rolled.message() +
                             "); the graph is read-only, reopen it to recover";
            return rolled;
        }
    }
    auto lock = read_lock();
    ExportedState state;
    state.lsn = last_lsn_.load();
    std::vector<std::uint32_t> position(keys_.count_ids(), invalid_id);
    for (std::size_t n = 0; n < keys_.count_ids(); ++n)
        if (!node_dead_[n]) {
            position[n] = static_cast<std::uint32_t>(state.nodes.size());
            state.nodes.push_back(static_cast<node_id_t>(n));
        }
    for (std::size_t e = 0; e < edge_src_.size(); ++e)
        if (!edge_dead_[e]) {
            state.edges.push_back(static_cast<edge_id_t>(e));
            state.edge_src.push_back(position[edge_src_[e]]);
            state.edge_dst.push_back(position[edge_dst_[e]]);
        }
    return state;
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

// ---------------------------------------------------------------------------------------------
// Search.

Status Engine::validate(const SearchRequest& r) const {
    auto positive = [](const char* name, std::int64_t value) {
        return value >= 1 ? Status::OK()
                          : Status::invalid_argument(std::string(name) + " must be >= 1, got " + std::to_string(value));
    };
    VG_RETURN_IF_ERROR(positive("k", r.k));
    if (!(r.seeds == 0 && !r.extra_seeds.empty()))  // seeds 0: only the extra (named) seeds
        VG_RETURN_IF_ERROR(positive("seeds", r.seeds));
    VG_RETURN_IF_ERROR(positive("max_visited", r.max_visited));
    VG_RETURN_IF_ERROR(positive("max_fanout", r.max_fanout));
    if (r.hops < 0) return Status::invalid_argument("hops must be >= 0, got " + std::to_string(r.hops));
    if (r.min_hop < 0) return Status::invalid_argument("min_hop must be >= 0, got " + std::to_string(r.min_hop));
    if (!r.seed_weights.empty()) {
        if (r.seeds != 0 || r.seed_weights.size() != r.extra_seeds.size())
            return Status::invalid_argument("seed_weights needs seeds=0 and one weight per extra seed: got " +
                                            std::to_string(r.seed_weights.size()) + " weights, " +
                                            std::to_string(r.extra_seeds.size()) + " extra seeds, seeds=" +
                                            std::to_string(r.seeds));
        for (float w : r.seed_weights)
            if (!std::isfinite(w) || w < 0.f)
                return Status::invalid_argument("seed_weights must be finite and >= 0, got " + format_real(w));
    }
    if (r.ef < 0) return Status::invalid_argument("ef must be >= 0 (0: the graph's default), got " + std::to_string(r.ef));
    if (!std::isfinite(r.hop_decay) || r.hop_decay <= 0.0)
        return Status::invalid_argument("hop_decay must be a finite number > 0, got " + format_real(r.hop_decay));
    if (r.ts_min > r.ts_max)
        return Status::invalid_argument("ts_min (" + std::to_string(r.ts_min) + ") is after ts_max (" +
                                        std::to_string(r.ts_max) + ")");
    for (const auto& q : r.where) {
        std::size_t p = prop_index(q.name);
        if (p == SIZE_MAX) return Status::invalid_argument("where: " + declared_props_text(q.name));
        bool is_str = config_.filterable[p].type == PropType::str;
        bool has_range = q.int_min != INT64_MIN || q.int_max != INT64_MAX || q.real_min != -HUGE_VAL || q.real_max != HUGE_VAL;
        if (is_str && has_range)
            return Status::invalid_argument("where: '" + q.name + "' is a str property; it takes values, not a range");
        if (is_str && q.in_set)
            return Status::invalid_argument("where: '" + q.name + "' is a str property; it takes strings, not numbers");
        if (!is_str && !q.strings.empty())
            return Status::invalid_argument("where: '" + q.name + "' is a " + prop_type_name(config_.filterable[p].type) +
                                            " property; it takes numbers, not strings");
    }
    return Status::OK();
}

std::size_t Engine::prop_index(const std::string& name) const {
    for (std::size_t p = 0; p < config_.filterable.size(); ++p)
        if (config_.filterable[p].name == name) return p;
    return SIZE_MAX;
}

std::string Engine::declared_props_text(const std::string& name) const {
    std::string text = "'" + name + "' is not a filterable property; ";
    if (config_.filterable.empty()) return text + "none was declared when the graph was created";
    text += "declared: ";
    for (std::size_t p = 0; p < config_.filterable.size(); ++p)
        text += (p ? ", " : "") + config_.filterable[p].name + " (" + prop_type_name(config_.filterable[p].type) + ")";
    return text;
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
    auto lock = read_lock();
    detail::ContextPool::Lease lease(contexts_);
    SearchResult result;
    VG_RETURN_IF_ERROR(search_locked(query, request, lease.slot(), result));
    return result;
}

Result<std::vector<std::uint8_t>> Engine::admits(const std::string* keys, std::size_t count,
                                                  const SearchRequest& request) const {
    VG_RETURN_IF_ERROR(validate(request));
    auto lock = read_lock();
    // A search context's filter: its masks are reused, so a call costs O(names listed) rather
    // than O(names interned) (hybrid search checks each BM25 candidate with one call).
    detail::ContextPool::Lease lease(contexts_);
    NodeFilter& filter = scratch_[lease.slot()].filter;
    build_filter(request, filter);
    const NodeColumns columns = node_columns();
    std::vector<std::uint8_t> out(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
        const node_id_t node = keys_.find(keys[i]);
        if (node == invalid_id || node_dead_[node]) continue;
        out[i] = filter.admits(columns, node) ? 1 : 0;
    }
    return out;
}

Result<bool> Engine::admitted_keys(const SearchRequest& request, std::size_t limit,
                                   std::vector<std::string>& keys) const {
    keys.clear();
    VG_RETURN_IF_ERROR(validate(request));
    auto lock = read_lock();
    detail::ContextPool::Lease lease(contexts_);
    TraversalScratch& scratch = scratch_[lease.slot()];
    NodeFilter& filter = scratch.filter;
    build_filter(request, filter);
    const NodeColumns columns = node_columns();
    const std::size_t rows = keys_.count_ids();
    std::vector<node_id_t> nodes;
    if ((request.filter_labels || request.filter_tenants) && filter_lists(request, limit, scratch) <= limit) {
        scratch.begin(rows);
        admitted_in_lists(scratch.member_lists, filter, columns, scratch, nodes);
        if (nodes.size() > limit) return false;
        std::sort(nodes.begin(), nodes.end());  // the lists are per label or tenant: back to node id order
    } else {
        for (std::size_t row = 0; row < rows; ++row) {
            const auto node = static_cast<node_id_t>(row);
            if (!filter.admits(columns, node)) continue;
            if (nodes.size() == limit) return false;  // stops early on a broad filter
            nodes.push_back(node);
        }
    }
    keys.reserve(nodes.size());
    for (node_id_t node : nodes) keys.emplace_back(keys_.key(node));
    return true;
}

Result<std::vector<float>> Engine::score_edges(const float* query, std::size_t dim, const edge_id_t* edges,
                                               std::size_t count) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("query has dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    VG_RETURN_IF_ERROR(validate_vector(query, dim, config_.metric, "query", 0));
    QuantizedVector q;
    node_vectors_.quantize_into(query, q);
    auto lock = read_lock();
    const simd::dot_i8_fn dot = simd::active().dot_i8;
    std::vector<float> out(count, std::numeric_limits<float>::quiet_NaN());
    for (std::size_t i = 0; i < count; ++i) {
        if (edges[i] >= edge_src_.size()) return Status::invalid_argument("edge id " + std::to_string(edges[i]) + " out of range");
        std::uint32_t row = edge_vector_rows_.empty() ? invalid_id : edge_vector_rows_[edges[i]];
        if (row == invalid_id) continue;
        std::int32_t product = dot(q.codes.data(), edge_vectors_.codes(row), config_.dim);
        out[i] = score_from_dot(config_.metric, product, q.scale, q.sq_norm, edge_vectors_.scale(row),
                                edge_vectors_.sq_norm(row));
    }
    return out;
}

Result<std::vector<SearchResult>> Engine::search_batch(const float* queries, std::size_t count, std::size_t dim,
                                                       const SearchRequest& request, std::size_t threads) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("queries have dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    VG_RETURN_IF_ERROR(validate(request));
    VG_RETURN_IF_ERROR(validate_queries(queries, count, dim));
    auto lock = read_lock();
    std::vector<SearchResult> results(count);
    threads = std::max<std::size_t>(1, std::min({default_threads(threads), count, count_context_slots}));
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        detail::ContextPool::Lease lease(contexts_);
        for (std::size_t i; (i = next.fetch_add(1)) < count;)
            (void)search_locked(queries + i * dim, request, lease.slot(), results[i]);  // validated above
    };
    detail::run_on_threads(threads, worker);  // out of memory on any thread: std::bad_alloc here
    return results;
}

Status Engine::search_locked(const float* query, const SearchRequest& request, std::size_t slot,
                             SearchResult& result) const {
    TraversalScratch& scratch = scratch_[slot];
    std::size_t count = keys_.count_ids();
    scratch.begin(count);
    result = SearchResult{};
    result.path_offsets.push_back(0);
    if (count == count_dead_nodes_) return Status::OK();

    NodeFilter& filter = scratch.filter;
    build_filter(request, filter);
    const NodeColumns columns = node_columns();
    const NodeFilter* active_filter = filter.needed(columns) ? &filter : nullptr;

    // Seeds.
    node_vectors_.quantize_into(query, scratch.query);
    auto wanted_seeds = static_cast<std::size_t>(request.seeds);
    scratch.seeds.clear();
    if (wanted_seeds == 0) {
        // Only the extra seeds below.
    } else if (request.exact || count <= full_scan_max_nodes()) {
        count_seed_full_scans_.fetch_add(1, std::memory_order_relaxed);
        exact_seeds(scratch.query, wanted_seeds, active_filter, columns, scratch);
    } else if (const std::size_t most = filter_scan_limit(filter_scan_max_nodes(), count);
               most > 0 && filter_lists(request, most, scratch) <= most) {
        // A label or tenant filter that admits few nodes: HNSW would walk past many rejected
        // nodes for each admitted one; a scan of those few nodes is faster, and exact.
        count_seed_list_scans_.fetch_add(1, std::memory_order_relaxed);
        listed_seeds(scratch.query, wanted_seeds, scratch.member_lists, filter, columns, scratch);
    } else {
        count_seed_hnsw_searches_.fetch_add(1, std::memory_order_relaxed);
        // Any filter (where=, ts, a label or tenant with too many nodes for its lists) that the
        // walk finds to admit very few nodes: the walk gives up and the seeds come from an exact
        // scan, as with exact=True (off with filter_scan_max_nodes 0: HNSW always).
        const std::size_t scan_nodes = filter.active() && most > 0 ? count : 0;
        if (seed_index_->search(scratch.query, wanted_seeds, static_cast<std::size_t>(request.ef), active_filter,
                                columns, slot, scratch.seeds, scan_nodes)) {
            if (background_running_.load(std::memory_order_acquire))
                unindexed_seeds(scratch.query, wanted_seeds, active_filter, columns, scratch);
        } else {
            count_seed_scan_fallbacks_.fetch_add(1, std::memory_order_relaxed);
            exact_seeds(scratch.query, wanted_seeds, active_filter, columns, scratch);
        }
    }
    if (!request.extra_seeds.empty()) {
        // Named seeds first (in the order given), scored like any node; then the similarity seeds.
        std::vector<ScoredNode> named;
        const bool weighted = !request.seed_weights.empty();
        if (weighted) scratch.seed_weights.clear();
        const simd::dot_i8_fn dot = simd::active().dot_i8;
        for (std::size_t e = 0; e < request.extra_seeds.size(); ++e) {
            const std::string& key = request.extra_seeds[e];
            const node_id_t node = keys_.find(key);
            if (node == invalid_id) continue;
            if ((active_filter && !active_filter->admits(columns, node)) || (!active_filter && node_dead_[node])) continue;
            bool seen = false;
            for (const ScoredNode& s : named) seen = seen || s.node == node;
            if (seen) continue;
            std::int32_t product = dot(scratch.query.codes.data(), node_vectors_.codes(node), config_.dim);
            named.push_back({node, score_from_dot(config_.metric, product, scratch.query.scale, scratch.query.sq_norm,
                                                  node_vectors_.scale(node), node_vectors_.sq_norm(node))});
            if (weighted) scratch.seed_weights.push_back(request.seed_weights[e]);
        }
        for (const ScoredNode& s : scratch.seeds) {
            bool seen = false;
            for (const ScoredNode& n : named) seen = seen || n.node == s.node;
            if (!seen) named.push_back(s);
        }
        scratch.seeds.swap(named);
    }
    result.count_seeds = scratch.seeds.size();
    return expand_and_score(request, scratch, columns, active_filter, result);
}

std::size_t Engine::filter_scan_limit(std::size_t setting, std::size_t rows) noexcept {
    if (setting != filter_scan_auto) return setting;
    // floor(sqrt(x)) for x up to 2^64 / 1000: the double estimate, corrected by one either way.
    const std::uint64_t x = static_cast<std::uint64_t>(filter_scan_auto_factor) * rows;
    auto root = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(x)));
    while (root > 0 && root * root > x) --root;
    while ((root + 1) * (root + 1) <= x) ++root;
    return std::max<std::size_t>(filter_scan_auto_floor, static_cast<std::size_t>(root));
}

std::size_t Engine::filter_scan_limit() const {
    auto lock = read_lock();
    return filter_scan_limit(filter_scan_max_nodes(), keys_.count_ids());
}

void Engine::build_filter(const SearchRequest& request, NodeFilter& filter) const {
    // Names the graph has never seen match nothing.
    filter.reset();
    if (request.filter_labels) labels_.mask_of(request.labels, filter.allow_labels());
    if (request.filter_tenants) tenants_.mask_of(request.tenants, filter.allow_tenants());
    if (request.ts_min != INT64_MIN || request.ts_max != INT64_MAX) filter.set_ts_range(request.ts_min, request.ts_max);
    if (!request.exclude.empty()) {
        IdMask& excluded = filter.exclude_nodes();
        excluded.fit(keys_.count_ids());
        for (const std::string& key : request.exclude) {
            const node_id_t node = keys_.find(key);
            if (node != invalid_id) excluded.allow(node);
        }
    }
    for (const auto& q : request.where) {
        PropCondition& condition = filter.add_prop_condition();
        condition.column = static_cast<std::uint32_t>(prop_index(q.name));  // checked by validate()
        if (config_.filterable[condition.column].type == PropType::str)
            prop_columns_[condition.column].strings.mask_of(q.strings, condition.str_ok);
        condition.int_min = q.int_min;
        condition.int_max = q.int_max;
        condition.real_min = q.real_min;
        condition.real_max = q.real_max;
        condition.in_set = q.in_set;
        condition.int_in = q.int_values;
        condition.real_in = q.real_values;
        std::sort(condition.int_in.begin(), condition.int_in.end());
        std::sort(condition.real_in.begin(), condition.real_in.end());
    }
}

Status Engine::expand_and_score(const SearchRequest& request, TraversalScratch& scratch, const NodeColumns& columns,
                                const NodeFilter* active_filter, SearchResult& result) const {
    TraversalParams params;
    params.k = static_cast<std::size_t>(request.k);
    params.hops = static_cast<std::size_t>(request.hops);
    params.max_visited = static_cast<std::size_t>(request.max_visited);
    params.max_fanout = static_cast<std::size_t>(request.max_fanout);
    params.direction = request.direction;
    params.hop_decay = request.hop_decay;
    params.min_hop = static_cast<std::size_t>(request.min_hop);
    if (!request.seed_weights.empty()) params.seed_weights = &scratch.seed_weights;
    if (request.filter_rels) {
        rels_.mask_of(request.rels, scratch.rel_ok);
        params.rel_ok = &scratch.rel_ok;
    }
    traverse_and_score(graph_view(), node_vectors_, columns, active_filter, params, scratch, result.hits);
    result.count_visited = scratch.visited.size();
    std::vector<edge_id_t>& path = scratch.path;
    for (const Hit& hit : result.hits) {
        path_to(scratch, hit.position, path);
        result.path_edges.insert(result.path_edges.end(), path.begin(), path.end());
        result.path_offsets.push_back(static_cast<std::uint32_t>(result.path_edges.size()));
    }
    return Status::OK();
}

namespace {
// Rows scored per kernel call by the exact seed scans. Gathered rows (member lists, a filter's
// admitted rows): few enough that a block's rows are still in L1/L2 when their scales are read
// right after (measured when a row's scale and squared norm shared its first cache line; they
// now sit in an array of their own, asked for with the row); with 4,096-row blocks each row was
// fetched from memory twice, and list scans of 10,000-30,000 rows of a 1,000,000-node
// graph took 1.18-1.23x as long. Consecutive rows: the hardware streams them, and 256-row blocks
// were 2-5% slower than 4,096.
constexpr std::size_t gather_block_rows = 64;
constexpr std::size_t scan_block_rows = 4096;
}  // namespace

void Engine::offer_rows(const QuantizedVector& query, const node_id_t* rows, std::size_t count, std::size_t wanted,
                        TraversalScratch& scratch) const {
    scratch.dots.resize(std::max(gather_block_rows, scan_block_rows));
    const std::size_t stride = node_vectors_.code_stride();
    for (std::size_t begin = 0; begin < count; begin += gather_block_rows) {
        const std::size_t end = std::min(count, begin + gather_block_rows);
        simd::active().dot_rows_i8(query.codes.data(), node_vectors_.codes_data(), stride, rows + begin, end - begin,
                                   config_.dim, scratch.dots.data());
        // The kernel asks for rows ahead only within a call: the next block's first rows are
        // asked for here, so that their misses overlap this block's scales.
        for (std::size_t j = end; j < std::min(count, end + 8); ++j)
            node_vectors_.prefetch_row_l2(rows[j]);
        for (std::size_t i = begin; i < end; ++i)
            offer_best(scratch.seeds, wanted,
                       {rows[i], score_from_dot(config_.metric, scratch.dots[i - begin], query.scale, query.sq_norm,
                                                node_vectors_.scale(rows[i]), node_vectors_.sq_norm(rows[i]))});
    }
}

void Engine::exact_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                         const NodeColumns& columns, TraversalScratch& scratch) const {
    // Brute force in blocks: the scan kernel over consecutive rows (or the gather kernel over the
    // admitted rows of a block), keeping the best `wanted` in a heap whose top is the worst kept.
    const std::size_t count = keys_.count_ids();
    std::vector<ScoredNode>& heap = scratch.seeds;
    heap.clear();
    scratch.dots.resize(std::max(gather_block_rows, scan_block_rows));
    for (std::size_t begin = 0; begin < count; begin += scan_block_rows) {
        const std::size_t end = std::min(count, begin + scan_block_rows);
        if (filter) {
            std::vector<node_id_t>& admitted = scratch.visited;  // borrowed; begin() resets it per query
            admitted.clear();
            for (std::size_t node = begin; node < end; ++node)
                if (filter->admits(columns, static_cast<node_id_t>(node))) admitted.push_back(static_cast<node_id_t>(node));
            offer_rows(query, admitted.data(), admitted.size(), wanted, scratch);
            continue;
        }
        simd::active().scan_i8(query.codes.data(), node_vectors_.codes(begin), node_vectors_.code_stride(), end - begin,
                               config_.dim, scratch.dots.data());
        for (std::size_t i = 0; i < end - begin; ++i) {
            const auto node = static_cast<node_id_t>(begin + i);
            offer_best(heap, wanted, {node, score_from_dot(config_.metric, scratch.dots[i], query.scale, query.sq_norm,
                                                           node_vectors_.scale(node), node_vectors_.sq_norm(node))});
        }
    }
    std::sort_heap(heap.begin(), heap.end(), ranks_before);  // best first
    scratch.visited.clear();
}

std::size_t Engine::filter_lists(const SearchRequest& request, std::size_t limit, TraversalScratch& scratch) const {
    // The lists of the ids the filter's masks admit (build_filter() set them, each id once), and
    // the live nodes they hold; past `limit` the count stops growing (and the lists are not used).
    std::vector<const std::vector<node_id_t>*>& lists = scratch.member_lists;
    auto gather = [&](const detail::MemberLists& members, const IdMask& mask,
                      std::vector<const std::vector<node_id_t>*>& out) {
        out.clear();
        std::size_t live = 0;
        for (std::uint32_t each : mask.ids()) {
            live += members.live(each);
            if (live > limit) break;
            out.push_back(&members.list(each));
        }
        return live;
    };
    constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    std::size_t by_tenant = none, by_label = none;
    if (request.filter_tenants) by_tenant = gather(tenant_members_, scratch.filter.tenant_mask(), lists);
    if (request.filter_labels && by_tenant > 0) {
        by_label = gather(label_members_, scratch.filter.label_mask(), scratch.member_lists_other);
        if (by_label < by_tenant) lists.swap(scratch.member_lists_other);
    }
    if (by_tenant == none && by_label == none) lists.clear();
    return std::min(by_tenant, by_label);
}

void Engine::admitted_in_lists(const std::vector<const std::vector<node_id_t>*>& lists, const NodeFilter& filter,
                               const NodeColumns& columns, TraversalScratch& scratch,
                               std::vector<node_id_t>& out) const {
    // The visited set marks the nodes while they are gathered, and is cleared again.
    out.clear();
    for (const std::vector<node_id_t>* list : lists)
        for (node_id_t node : *list)
            if (scratch.visit(node)) out.push_back(node);
    std::size_t admitted = 0;
    for (node_id_t node : out) {
        *scratch.seen_word(node) &= ~TraversalScratch::seen_bit(node);
        if (filter.admits(columns, node)) out[admitted++] = node;
    }
    out.resize(admitted);
}

void Engine::listed_seeds(const QuantizedVector& query, std::size_t wanted,
                          const std::vector<const std::vector<node_id_t>*>& lists, const NodeFilter& filter,
                          const NodeColumns& columns, TraversalScratch& scratch) const {
    // The admitted nodes of the lists, scored like exact_seeds' admitted rows.
    std::vector<node_id_t>& rows = scratch.visited;  // borrowed; begin() reset it for this query
    admitted_in_lists(lists, filter, columns, scratch, rows);
    scratch.seeds.clear();
    offer_rows(query, rows.data(), rows.size(), wanted, scratch);
    std::sort_heap(scratch.seeds.begin(), scratch.seeds.end(), ranks_before);  // best first
    rows.clear();
}

void Engine::unindexed_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                             const NodeColumns& columns, TraversalScratch& scratch) const {
    // The nodes a background pass has not indexed yet, scored exactly (gather kernel) and merged
    // into the HNSW seeds in a heap of the best `wanted` by (score desc, id asc), each node once
    // (nodes of the chunk in flight may be among the HNSW seeds too).
    constexpr std::size_t block_rows = 4096;
    const std::size_t done = background_done_.load(std::memory_order_acquire);
    const node_id_t* pending = background_nodes_.data() + done;
    const std::size_t count = background_nodes_.size() - std::min(done, background_nodes_.size());
    if (count == 0 || wanted == 0) return;
    std::vector<ScoredNode>& heap = scratch.seeds;
    std::make_heap(heap.begin(), heap.end(), ranks_before);
    std::vector<node_id_t>& rows = scratch.visited;  // borrowed; begin() resets it per query
    scratch.dots.resize(block_rows);
    for (std::size_t begin = 0; begin < count; begin += block_rows) {
        const std::size_t end = std::min(count, begin + block_rows);
        rows.clear();
        for (std::size_t i = begin; i < end; ++i) {
            node_id_t node = pending[i];
            if (filter ? filter->admits(columns, node) : !node_dead_[node]) rows.push_back(node);
        }
        simd::active().dot_rows_i8(query.codes.data(), node_vectors_.codes_data(), node_vectors_.code_stride(),
                                   rows.data(), rows.size(), config_.dim, scratch.dots.data());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            ScoredNode candidate{rows[i], score_from_dot(config_.metric, scratch.dots[i], query.scale, query.sq_norm,
                                                         node_vectors_.scale(rows[i]), node_vectors_.sq_norm(rows[i]))};
            if (heap.size() >= wanted && !ranks_before(candidate, heap.front())) continue;
            // Already kept from HNSW (it scores the same there: no better copy can have been dropped).
            bool kept = false;
            for (const ScoredNode& s : heap) kept = kept || s.node == candidate.node;
            if (!kept) offer_best(heap, wanted, candidate);
        }
    }
    std::sort_heap(heap.begin(), heap.end(), ranks_before);  // best first
    rows.clear();
}

bool Engine::seed_index_complete() const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    return !count_dead_nodes_ && deferred_hnsw_.empty() && !background_running_.load() &&
           !seed_index_->count_reindexed() && seed_index_->size() == keys_.count_ids();
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
