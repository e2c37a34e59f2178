// The engine's write path (engine.hpp, "Writes"): adds, upserts, deletes and aliases.
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
#include <unordered_set>
#include <utility>

#include "engine_internal.hpp"
#include "vecgraph/detail/json_scalars.hpp"
#include "vecgraph/detail/ranges.hpp"
#include "vecgraph/wal_records.hpp"

namespace vecgraph {

namespace {

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

// ---------------------------------------------------------------------------------------------
// Write path: writable -> prepare (check everything) -> log -> apply -> finish (sync).

Status Engine::writable() const {
    if (!read_only_.empty()) return refused_storage_ ? Status::io_error(read_only_) : Status::read_only(read_only_);
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

Result<Engine::PreparedNodes> Engine::prepare_nodes(const NodeBatch& batch, bool upsert, const node_id_t* found) const {
    if (!batch.keys || (!batch.vectors && !batch.rows))
        return Status::invalid_argument("add_nodes needs keys and vectors");
    PreparedNodes prepared;
    prepared.existing.assign(batch.count, invalid_id);
    std::unordered_set<std::string_view> batch_keys;
    batch_keys.reserve(batch.count);
    if (found) std::copy(found, found + batch.count, prepared.existing.begin());
    else keys_.find_many(batch.keys, batch.count, prepared.existing.data());
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
        // HNSW slots for the nodes this write inserts (an update that keeps the vectors: none).
        const std::size_t inserts = prepared.reindex_replaced ? batch.count : prepared.count_new;
        if (!replaying_ && !defer_index_ && inserts) VG_RETURN_IF_ERROR(reserve_seed_index(inserts, moving));
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
                if (!prepared.reindex_replaced) break;
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
    if (prepared.reindex_replaced) {
        prepared.to_index.insert(prepared.to_index.end(), replaced.begin(), replaced.end());
        prepared.count_reindexed = replaced.size();
    }
    return Status::OK();
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

Status Engine::write_nodes(const NodeBatch& given, NodeWrite mode) {
    if (given.count == 0) return Status::OK();
    std::unique_lock<std::mutex> writer(writer_mutex_);
    VG_RETURN_IF_ERROR(writable());
    KeptColumns kept;
    auto resolved = keep_columns(given, mode, kept);
    if (!resolved.ok()) return resolved.status();
    const NodeBatch& batch = resolved.value();
    const bool upsert = mode != NodeWrite::add;
    auto prepared = prepare_nodes(batch, upsert, kept.nodes.empty() ? nullptr : kept.nodes.data());
    if (!prepared.ok()) return prepared.status();
    const bool reindex = mode != NodeWrite::update || given.vectors || given.rows;
    prepared.value().reindex_replaced = reindex;
    const std::uint8_t type = !upsert ? record::add_nodes : reindex ? record::upsert_nodes : record::update_nodes;
    auto lsn = log(type, [&](wal::PayloadWriter& out) {
        encode_nodes(batch, prepared.value().rows, config_.dim, node_vectors_.row_bytes(), out);
    });
    if (!lsn.ok()) return lsn.status();
    VG_RETURN_IF_ERROR(apply_logged([&] { return apply_nodes(batch, prepared.value()); }));
    return finish_write(writer, lsn.value(), &prepared.value());
}

Status Engine::add_nodes(const NodeBatch& batch) { return write_nodes(batch, NodeWrite::add); }

Status Engine::upsert_nodes(const NodeBatch& batch) { return write_nodes(batch, NodeWrite::upsert); }

Status Engine::update_nodes(const NodeBatch& batch) { return write_nodes(batch, NodeWrite::update); }

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

}  // namespace vecgraph
