// pybind11 bindings of the engine: check arguments under the GIL, release it, call the core,
// translate errors. The Python facade (vecgraph/graph.py) gives defaults and docstrings.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "bind_errors.hpp"
#include "gil.hpp"
#include "columns.hpp"
#include "ndarray_checks.hpp"
#include "vecgraph/engine.hpp"
#include "vecgraph/simd/kernels.hpp"
#include "vecgraph/wal_reader.hpp"

namespace vecgraph::bindings {

namespace py = pybind11;

namespace {

py::str to_py_str(const std::string& s) { return py::str(s.data(), s.size()); }

Direction parse_direction_arg(const std::string& name) {
    Direction direction;
    if (!parse_direction(name, &direction))
        raise_status(Status::invalid_argument("direction must be 'out', 'in' or 'both', got '" + name + "'"));
    return direction;
}

// Optional string list filter: None = no filter; otherwise the listed names (unknown names match nothing).
void read_filter(const py::object& values, const char* name, bool* active, std::vector<std::string>* out) {
    *active = !values.is_none();
    if (!*active) return;
    if (PyUnicode_Check(values.ptr()))
        throw py::type_error(std::string(name) + " must be a list of str, not a str; write [" +
                             py::repr(values).cast<std::string>() + "]");
    py::sequence seq = py::reinterpret_borrow<py::sequence>(values);
    *out = to_strings(seq, name, seq.size());
}

SearchRequest make_request(std::int64_t k, std::int64_t seeds, std::int64_t hops, std::int64_t max_visited,
                           std::int64_t max_fanout, const std::string& direction, const py::object& rels,
                           const py::object& labels, const py::object& tenants, std::int64_t ts_min,
                           std::int64_t ts_max, double hop_decay, bool exact, std::int64_t ef, const py::object& where,
                           const py::object& extra_seeds = py::none(), const py::object& exclude = py::none(),
                           const py::object& seed_weights = py::none(), std::int64_t min_hop = 0) {
    SearchRequest r;
    r.k = k;
    r.seeds = seeds;
    r.hops = hops;
    r.max_visited = max_visited;
    r.max_fanout = max_fanout;
    r.direction = parse_direction_arg(direction);
    read_filter(rels, "rels", &r.filter_rels, &r.rels);
    read_filter(labels, "labels", &r.filter_labels, &r.labels);
    read_filter(tenants, "tenants", &r.filter_tenants, &r.tenants);
    r.ts_min = ts_min;
    r.ts_max = ts_max;
    r.hop_decay = hop_decay;
    r.exact = exact;
    r.ef = ef;
    if (!extra_seeds.is_none()) r.extra_seeds = encode_keys(extra_seeds, "extra_seeds");
    if (!exclude.is_none()) r.exclude = encode_keys(exclude, "exclude_keys");
    if (!seed_weights.is_none()) r.seed_weights = seed_weights.cast<std::vector<float>>();
    r.min_hop = min_hop;
    // where: a list of (name, values or None, int_min, int_max, real_min, real_max), built by the facade.
    if (!where.is_none()) {
        for (auto item : where.cast<py::list>()) {
            auto t = item.cast<py::tuple>();
            if (t.size() != 6) throw py::value_error("where conditions must be 6-tuples");
            SearchRequest::PropQuery q;
            q.name = t[0].cast<std::string>();
            if (!t[1].is_none()) {
                for (auto v : t[1].cast<py::list>()) {
                    if (py::isinstance<py::str>(v)) {
                        q.strings.push_back(v.cast<std::string>());
                        continue;
                    }
                    q.in_set = true;
                    double real = v.cast<double>();
                    q.real_values.push_back(real);
                    if (py::isinstance<py::int_>(v)) q.int_values.push_back(v.cast<std::int64_t>());
                    else if (std::trunc(real) == real && std::fabs(real) < 9.2e18) q.int_values.push_back(static_cast<std::int64_t>(real));
                }
            }
            q.int_min = t[2].cast<std::int64_t>();
            q.int_max = t[3].cast<std::int64_t>();
            q.real_min = t[4].cast<double>();
            q.real_max = t[5].cast<double>();
            r.where.push_back(std::move(q));
        }
    }
    return r;
}

py::tuple result_to_python(const Engine& engine, const SearchResult& result) {
    std::size_t n = result.hits.size();
    py::list keys(n);
    py::array_t<float> scores(static_cast<py::ssize_t>(n));
    py::array_t<std::int32_t> hops(static_cast<py::ssize_t>(n));
    auto s = scores.mutable_unchecked<1>();
    auto h = hops.mutable_unchecked<1>();
    std::vector<std::string_view> encoded = engine.keys_of(result.hits);
    for (std::size_t i = 0; i < n; ++i) {
        keys[i] = decode_key(encoded[i]);
        s(static_cast<py::ssize_t>(i)) = result.hits[i].score;
        h(static_cast<py::ssize_t>(i)) = static_cast<std::int32_t>(result.hits[i].hop);
    }
    py::array_t<std::uint32_t> offsets(static_cast<py::ssize_t>(result.path_offsets.size()));
    std::memcpy(offsets.mutable_data(), result.path_offsets.data(), result.path_offsets.size() * sizeof(std::uint32_t));
    py::array_t<std::uint32_t> edges(static_cast<py::ssize_t>(result.path_edges.size()));
    if (!result.path_edges.empty())
        std::memcpy(edges.mutable_data(), result.path_edges.data(), result.path_edges.size() * sizeof(edge_id_t));
    return py::make_tuple(keys, scores, hops, offsets, edges, result.count_seeds, result.count_visited);
}

py::tuple edge_to_python(const Engine& engine, const EdgeRecord& e) {
    return py::make_tuple(decode_key(engine.key(e.src)), to_py_str(e.rel), decode_key(engine.key(e.dst)), e.weight);
}

node_id_t find_node(const Engine& engine, const py::handle& key) {
    std::string encoded = encode_key(key, "key", 0);
    return unwrap(engine.find(encoded));
}

class PyEngine {
  public:
    PyEngine(std::size_t dim, const std::string& metric, std::size_t connectivity, std::size_t expansion_add,
             std::size_t expansion_search, std::size_t threads, std::size_t auto_compact_edges,
             const std::vector<std::pair<std::string, std::string>>& filterable) {
        EngineConfig config;
        config.dim = dim;
        if (!parse_metric(metric, &config.metric))
            raise_status(Status::invalid_argument("metric must be 'cos', 'ip' or 'l2', got '" + metric + "'"));
        config.hnsw.connectivity = connectivity;
        config.hnsw.expansion_add = expansion_add;
        config.hnsw.expansion_search = expansion_search;
        config.threads = threads;
        config.auto_compact_edges = auto_compact_edges;
        for (const auto& [name, type] : filterable) {
            PropSpec spec{name, PropType::str};
            if (!parse_prop_type(type, &spec.type))
                raise_status(Status::invalid_argument("filterable property '" + name +
                                                      "': type must be 'str', 'int64', 'float64' or 'timestamp', got '" +
                                                      type + "'"));
            config.filterable.push_back(spec);
        }
        engine_ = unwrap(Engine::create(config));
    }

    std::size_t dim() const { return engine_->config().dim; }
    std::size_t full_scan_max_nodes() const { return engine_->full_scan_max_nodes(); }
    void set_full_scan_max_nodes(std::size_t count) { engine_->set_full_scan_max_nodes(count); }
    std::size_t filter_scan_max_nodes() const { return engine_->filter_scan_max_nodes(); }
    void set_filter_scan_max_nodes(std::size_t count) { engine_->set_filter_scan_max_nodes(count); }
    std::size_t filter_scan_limit() const { return engine_->filter_scan_limit(); }
    std::string metric() const { return metric_name(engine_->config().metric); }

    // vectors: an array, or None for update_nodes (the nodes keep theirs).
    template <typename call_at>
    void write_nodes(const py::sequence& keys, const py::object& vectors, const py::object& labels,
                     const py::object& tenants, const py::object& ts, const py::object& texts, const py::object& props,
                     call_at&& call) {
        std::vector<std::string> encoded = encode_keys(keys, "keys");
        std::size_t n = encoded.size();
        std::vector<std::string> label_col, tenant_col, text_col, props_col;
        NodeBatch batch;
        batch.count = n;
        batch.keys = encoded.data();
        py::array_t<float> v;
        if (!vectors.is_none()) {
            v = check_float_array(py::reinterpret_borrow<py::array>(vectors), "vectors", 2, dim());
            if (static_cast<std::size_t>(v.shape(0)) != n)
                throw py::value_error("vectors has " + std::to_string(v.shape(0)) + " rows, keys has " + std::to_string(n));
            batch.vectors = v.data();
        }
        if (!labels.is_none()) batch.labels = (label_col = to_strings(labels, "labels", n)).data();
        if (!tenants.is_none()) batch.tenants = (tenant_col = to_strings(tenants, "tenants", n)).data();
        if (!texts.is_none()) batch.texts = (text_col = to_strings(texts, "texts", n)).data();
        if (!props.is_none()) batch.props = (props_col = to_strings(props, "props", n)).data();
        py::array_t<std::int64_t> ts_array;
        if (!ts.is_none()) {
            ts_array = check_1d<std::int64_t>(py::reinterpret_borrow<py::array>(ts), "ts", "int64", n);
            batch.ts = ts_array.data();
        }
        Status status;
        {
            GilRelease release;
            status = call(batch);
        }
        check(status);
    }

    void add_nodes(const py::sequence& keys, const py::array& vectors, const py::object& labels,
                   const py::object& tenants, const py::object& ts, const py::object& texts, const py::object& props) {
        write_nodes(keys, vectors, labels, tenants, ts, texts, props,
                    [&](const NodeBatch& batch) { return engine_->add_nodes(batch); });
    }

    void upsert_nodes(const py::sequence& keys, const py::array& vectors, const py::object& labels,
                      const py::object& tenants, const py::object& ts, const py::object& texts,
                      const py::object& props) {
        write_nodes(keys, vectors, labels, tenants, ts, texts, props,
                    [&](const NodeBatch& batch) { return engine_->upsert_nodes(batch); });
    }

    void update_nodes(const py::sequence& keys, const py::object& vectors, const py::object& labels,
                      const py::object& tenants, const py::object& ts, const py::object& texts,
                      const py::object& props) {
        write_nodes(keys, vectors, labels, tenants, ts, texts, props,
                    [&](const NodeBatch& batch) { return engine_->update_nodes(batch); });
    }

    std::size_t delete_nodes(const py::sequence& keys, bool missing_ok) {
        std::vector<std::string> encoded = encode_keys(keys, "keys");
        std::size_t deleted = 0;
        Status status;
        {
            GilRelease release;
            status = engine_->delete_nodes(encoded.data(), encoded.size(), missing_ok, &deleted);
        }
        check(status);
        return deleted;
    }

    std::size_t delete_edges(const py::sequence& src, const py::sequence& dst, const py::object& rels, bool missing_ok) {
        std::vector<std::string> src_keys = encode_keys(src, "src");
        std::vector<std::string> dst_keys = encode_keys(dst, "dst");
        if (dst_keys.size() != src_keys.size())
            throw py::value_error("src has " + std::to_string(src_keys.size()) + " keys, dst has " +
                                  std::to_string(dst_keys.size()));
        std::vector<std::string> rel_col;
        EdgeSelection selection{src_keys.size(), src_keys.data(), dst_keys.data(), nullptr};
        if (!rels.is_none()) selection.rels = (rel_col = to_strings(rels, "rels", src_keys.size())).data();
        std::size_t deleted = 0;
        Status status;
        {
            GilRelease release;
            status = engine_->delete_edges(selection, missing_ok, &deleted);
        }
        check(status);
        return deleted;
    }

    // aliases: one opaque string per key (the facade joins each node's list with U+001F).
    void set_aliases(const py::sequence& keys, const py::list& aliases) {
        std::vector<std::string> encoded = encode_keys(keys, "keys");
        std::vector<std::string> values = to_strings(aliases, "aliases", encoded.size());
        released([&] { return engine_->set_aliases(encoded.data(), values.data(), encoded.size()); });
    }

    std::size_t delete_tenant(const std::string& tenant) {
        std::size_t deleted = 0;
        Status status;
        {
            GilRelease release;
            status = engine_->delete_tenant(tenant, &deleted);
        }
        check(status);
        return deleted;
    }

    template <typename call_at>
    void released(call_at&& call) {
        Status status;
        {
            GilRelease release;
            status = call();
        }
        check(status);
    }

    void compact() { released([&] { return engine_->compact(); }); }
    void sync() { released([&] { return engine_->sync(); }); }
    void close_wal() { released([&] { return engine_->close_wal(); }); }
    void refuse_writes(std::string why, bool storage) {
        GilRelease release;  // waits for a write in flight
        engine_->refuse_writes(std::move(why), storage);
    }
    void drop_wal_before(std::uint64_t lsn) { released([&] { return engine_->drop_wal_before(lsn); }); }
    std::uint64_t last_lsn() const { return engine_->last_lsn(); }
    std::uint64_t last_text_lsn() const { return engine_->last_text_lsn(); }
    void set_last_text_lsn(std::uint64_t lsn) { engine_->set_last_text_lsn(lsn); }
    void defer_indexing(bool on, std::size_t background_min) {
        released([&] { return engine_->defer_indexing(on, background_min); });
    }
    std::size_t count_index_pending() const {
        GilRelease release;
        return engine_->count_index_pending();
    }
    void wait_for_indexing() { released([&] { return engine_->wait_for_indexing(); }); }
    bool seed_index_complete() const {
        GilRelease release;
        return engine_->seed_index_complete();
    }
    bool indexing_deferred() const {
        GilRelease release;  // it takes the writer lock
        return engine_->indexing_deferred();
    }
    std::size_t count_deferred() const {
        GilRelease release;
        return engine_->count_deferred();
    }
    bool save_seed_index(const std::string& path) {
        bool saved = false;
        released([&] { return engine_->save_seed_index(path, &saved); });
        return saved;
    }
    void load_seed_index(const std::string& path) { released([&] { return engine_->load_seed_index(path); }); }
    std::vector<std::string> verify(std::size_t limit) const {
        GilRelease release;
        return engine_->verify(limit);
    }
    void wait_for_compaction() {
        GilRelease release;
        engine_->wait_for_compaction();
    }

    static wal::Uuid to_uuid(const py::bytes& uuid) {
        std::string raw = uuid;
        if (raw.size() != 16) throw py::value_error("uuid must be 16 bytes, got " + std::to_string(raw.size()));
        wal::Uuid out;
        std::memcpy(out.data(), raw.data(), 16);
        return out;
    }

    void attach_wal(const std::string& dir, const py::bytes& uuid, std::uint64_t next_lsn, const std::string& sync,
                    std::uint32_t sync_interval_ms, std::uint64_t segment_bytes, const std::string& tail_marker) {
        wal::WriterOptions options;
        if (sync == "always") options.sync = wal::SyncPolicy::always;
        else if (sync == "interval") options.sync = wal::SyncPolicy::interval;
        else if (sync == "off") options.sync = wal::SyncPolicy::off;
        else raise_status(Status::invalid_argument("sync must be 'always', 'interval' or 'off', got '" + sync + "'"));
        options.sync_interval_ms = sync_interval_ms;
        options.segment_bytes = segment_bytes;
        options.tail_marker_path = tail_marker;
        wal::Uuid id = to_uuid(uuid);
        released([&] { return engine_->attach_wal(dir, id, next_lsn, options); });
    }

    py::dict replay_wal(const std::string& dir, const py::bytes& uuid, std::uint64_t from_lsn, bool truncate_tail,
                        const std::string& tail_marker) {
        wal::Uuid id = to_uuid(uuid);
        Result<wal::RecoveryReport> report = Status::internal("not run");
        {
            GilRelease release;
            report = engine_->replay_wal(dir, id, from_lsn, truncate_tail, tail_marker);
        }
        const wal::RecoveryReport& r = unwrap(std::move(report));
        py::dict d;
        d["first_lsn"] = r.first_lsn;
        d["last_lsn"] = r.last_lsn;
        d["next_lsn"] = r.next_lsn;
        d["segments"] = r.segments;
        d["records"] = r.records;
        d["replayed"] = r.replayed;
        d["truncated_bytes"] = r.truncated_bytes;
        d["truncated_at"] = r.truncated_at;
        d["fallback_segments"] = r.fallback_segments;
        d["fallback_damaged"] = r.fallback_damaged;
        return d;
    }

    // With `hnsw_path`, also writes the HNSW graph there at the same LSN when it holds exactly
    // the exported nodes (d["hnsw_saved"] says whether it did).
    py::dict export_state(const std::string& hnsw_path, bool roll_wal) {
        py::dict d;
        Status status;
        bool hnsw_saved = false;
        // No call waits for the writer lock holding the GIL: this thread, holding the writer
        // lock, takes the GIL back to build the columns, so another thread holding the GIL
        // while it waited for the writer lock (a second export, stats()) would deadlock.
        {
            GilRelease release;
            engine_->pause_writes([&] {
                Result<ExportedState> state = engine_->export_state(roll_wal);
                if (!state.ok()) {
                    status = state.status();
                    return;
                }
                {
                    GilReacquire gil(release);
                    export_locked(state.value(), d);
                }
                if (!hnsw_path.empty()) status = engine_->save_seed_index(hnsw_path, &hnsw_saved);
            });
        }
        check(status);
        d["hnsw_saved"] = hnsw_saved;
        return d;
    }

    // Columns without a Python object per value (writes are paused while this runs):
    //   strings:   (offsets int64 (n + 1), data uint8), the Arrow layout
    //   interned:  (indices int32 (n), values list of str), an Arrow dictionary
    //   edge_rows: the rows of the edges that have a vector only, in edge order.
    struct StringsOut {
        std::vector<std::int64_t> offsets{0};
        std::string data;
        void add(std::string_view value) {
            data.append(value.data(), value.size());
            offsets.push_back(static_cast<std::int64_t>(data.size()));
        }
        py::tuple release() {
            py::array_t<std::int64_t> o(static_cast<py::ssize_t>(offsets.size()));
            std::memcpy(o.mutable_data(), offsets.data(), offsets.size() * sizeof(std::int64_t));
            py::array_t<std::uint8_t> b(static_cast<py::ssize_t>(data.size()));
            if (!data.empty()) std::memcpy(b.mutable_data(), data.data(), data.size());
            return py::make_tuple(o, b);
        }
    };
    struct InternedOut {
        std::unordered_map<std::string, std::int32_t> ids;
        py::list values;
        std::vector<std::int32_t> indices;
        void add(const std::string& value) {
            auto [it, inserted] = ids.emplace(value, static_cast<std::int32_t>(ids.size()));
            if (inserted) values.append(to_py_str(value));
            indices.push_back(it->second);
        }
        py::tuple release() {
            py::array_t<std::int32_t> i(static_cast<py::ssize_t>(indices.size()));
            if (!indices.empty()) std::memcpy(i.mutable_data(), indices.data(), indices.size() * sizeof(std::int32_t));
            return py::make_tuple(i, values);
        }
    };

    void export_locked(const ExportedState& state, py::dict& d) const {
        const VectorStore& nodes = engine_->node_store();
        const VectorStore& edge_store = engine_->edge_store();
        std::size_t stride = nodes.row_bytes();
        std::size_t n = state.nodes.size(), m = state.edges.size();
        StringsOut keys, texts, props, aliases;
        InternedOut labels, tenants;
        py::array_t<std::int64_t> ts(static_cast<py::ssize_t>(n));
        py::array_t<std::int8_t> rows({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(stride)});
        for (std::size_t i = 0; i < n; ++i) {
            NodeRecord r = engine_->node(state.nodes[i], false);  // the row is copied below, quantized
            keys.add(r.key);
            labels.add(r.label);
            tenants.add(r.tenant);
            texts.add(r.text);
            props.add(r.props);
            aliases.add(r.aliases);
            ts.mutable_data()[i] = r.ts;
            nodes.copy_row(state.nodes[i], rows.mutable_data() + i * stride);
        }
        StringsOut edge_texts, edge_props;
        InternedOut rels;
        py::array_t<std::uint32_t> src(static_cast<py::ssize_t>(m)), dst(static_cast<py::ssize_t>(m));
        py::array_t<float> weights(static_cast<py::ssize_t>(m));
        py::array_t<std::int64_t> edge_ts(static_cast<py::ssize_t>(m));
        py::array_t<std::uint8_t> has_vector(static_cast<py::ssize_t>(m));
        std::vector<std::uint32_t> vector_rows;
        for (std::size_t i = 0; i < m; ++i) {
            EdgeRecord e = engine_->edge(state.edges[i]);
            src.mutable_data()[i] = state.edge_src[i];
            dst.mutable_data()[i] = state.edge_dst[i];
            rels.add(e.rel);
            weights.mutable_data()[i] = e.weight;
            edge_ts.mutable_data()[i] = e.ts;
            edge_texts.add(engine_->edge_text(e.edge));
            edge_props.add(engine_->edge_props(e.edge));
            std::uint32_t row = engine_->edge_vector_row(e.edge);
            has_vector.mutable_data()[i] = row != invalid_id;
            if (row != invalid_id) vector_rows.push_back(row);
        }
        py::array_t<std::int8_t> edge_rows({static_cast<py::ssize_t>(vector_rows.size()), static_cast<py::ssize_t>(stride)});
        for (std::size_t j = 0; j < vector_rows.size(); ++j)
            edge_store.copy_row(vector_rows[j], edge_rows.mutable_data() + j * stride);
        d["lsn"] = state.lsn;
        d["text_lsn"] = engine_->last_text_lsn();
        d["keys"] = keys.release();
        d["labels"] = labels.release();
        d["tenants"] = tenants.release();
        d["ts"] = ts;
        d["texts"] = texts.release();
        d["props"] = props.release();
        d["aliases"] = aliases.release();
        d["rows"] = rows;
        d["edge_src"] = src;
        d["edge_dst"] = dst;
        d["edge_rels"] = rels.release();
        d["edge_weights"] = weights;
        d["edge_ts"] = edge_ts;
        d["edge_texts"] = edge_texts.release();
        d["edge_props"] = edge_props.release();
        d["edge_has_vector"] = has_vector;
        d["edge_rows"] = edge_rows;
    }

    // Loads snapshot columns: encoded keys (bytes) and quantized rows in the store's layout.
    void load_nodes(const py::object& keys, const py::array& rows, const py::object& labels, const py::object& tenants,
                    const py::array& ts, const py::object& texts, const py::object& props) {
        std::size_t n = static_cast<std::size_t>(rows.ndim() == 2 ? rows.shape(0) : 0);
        std::vector<std::string> encoded = column_strings(keys, "keys", n);
        std::size_t stride = engine_->node_store().row_bytes();
        auto r = py::array_t<std::int8_t, py::array::c_style | py::array::forcecast>::ensure(rows);
        if (!r || r.ndim() != 2 || static_cast<std::size_t>(r.shape(0)) != n || static_cast<std::size_t>(r.shape(1)) != stride)
            throw py::value_error("rows must be an int8 array of shape (" + std::to_string(n) + ", " + std::to_string(stride) + ")");
        std::vector<std::string> label_col = column_strings(labels, "labels", n),
                                 tenant_col = column_strings(tenants, "tenants", n),
                                 text_col = column_strings(texts, "texts", n), props_col = column_strings(props, "props", n);
        auto ts_array = check_1d<std::int64_t>(ts, "ts", "int64", n);
        NodeBatch batch;
        batch.count = n;
        batch.keys = encoded.data();
        batch.rows = r.data();
        batch.labels = label_col.data();
        batch.tenants = tenant_col.data();
        batch.ts = ts_array.data();
        batch.texts = text_col.data();
        batch.props = props_col.data();
        released([&] { return engine_->add_nodes(batch); });
    }

    // src and dst: node ids (uint32 arrays; snapshot positions equal ids in a freshly loaded graph).
    void load_edges(const py::array& src, const py::array& dst, const py::object& rels, const py::array& weights,
                    const py::array& ts, const py::object& texts, const py::object& props, const py::array& has_vector,
                    const py::array& rows) {
        std::size_t n = static_cast<std::size_t>(src.ndim() == 1 ? src.shape(0) : 0);
        auto src_ids = check_1d<std::uint32_t>(src, "src", "uint32", n);
        auto dst_ids = check_1d<std::uint32_t>(dst, "dst", "uint32", n);
        std::size_t stride = engine_->edge_store().row_bytes();
        auto has = check_1d<std::uint8_t>(has_vector, "has_vector", "uint8", n);
        bool any_vector = false;
        for (std::size_t i = 0; i < n; ++i) any_vector = any_vector || has.data()[i];
        // Without edge vectors, rows may be empty (0, stride): no buffer of n rows is needed.
        auto r = py::array_t<std::int8_t, py::array::c_style | py::array::forcecast>::ensure(rows);
        std::size_t rows_wanted = any_vector ? n : 0;
        if (!r || r.ndim() != 2 || (static_cast<std::size_t>(r.shape(0)) != n && static_cast<std::size_t>(r.shape(0)) != rows_wanted) ||
            static_cast<std::size_t>(r.shape(1)) != stride)
            throw py::value_error("edge rows must be an int8 array of shape (" + std::to_string(n) + ", " + std::to_string(stride) + ")");
        std::vector<std::string> rel_col = column_strings(rels, "rels", n), text_col = column_strings(texts, "texts", n),
                                 props_col = column_strings(props, "props", n);
        auto w = check_1d<float>(weights, "weights", "float32", n);
        auto t = check_1d<std::int64_t>(ts, "ts", "int64", n);
        EdgeBatch batch;
        batch.count = n;
        batch.src_ids = src_ids.data();
        batch.dst_ids = dst_ids.data();
        batch.rels = rel_col.data();
        batch.weights = w.data();
        batch.ts = t.data();
        batch.texts = text_col.data();
        batch.props = props_col.data();
        if (any_vector) {
            batch.rows = r.data();
            batch.has_vector = has.data();
        }
        released([&] { return engine_->add_edges(batch); });
    }

    void add_edges(const py::sequence& src, const py::sequence& dst, const py::object& rels, const py::object& weights,
                   const py::object& ts, const py::object& texts, const py::object& props, const py::object& vectors) {
        KeyColumn src_keys = key_column(src, "src");
        KeyColumn dst_keys = key_column(dst, "dst");
        std::size_t n = src_keys.size();
        if (dst_keys.size() != n)
            throw py::value_error("src has " + std::to_string(n) + " keys, dst has " + std::to_string(dst_keys.size()));
        EdgeBatch batch;
        batch.count = n;
        if (src_keys.is_int) batch.src_ints = src_keys.ints.data();
        else batch.src = src_keys.encoded.data();
        if (dst_keys.is_int) batch.dst_ints = dst_keys.ints.data();
        else batch.dst = dst_keys.encoded.data();
        std::vector<std::string> text_col, props_col;
        StringCodes rel_codes;
        if (!rels.is_none()) {
            rel_codes = to_string_codes(rels, "rels", n);
            batch.rels = rel_codes.values.data();
            batch.rel_index = rel_codes.index.data();
            batch.count_rel_names = rel_codes.values.size();
        }
        if (!texts.is_none()) batch.texts = (text_col = to_strings(texts, "texts", n)).data();
        if (!props.is_none()) batch.props = (props_col = to_strings(props, "props", n)).data();
        py::array_t<float> weight_array, vector_array;
        py::array_t<std::int64_t> ts_array;
        std::vector<float> one_weight;
        if (PyFloat_CheckExact(weights.ptr())) {  // one weight for every edge (beyond float32: an infinity, refused by the core)
            const double value = PyFloat_AS_DOUBLE(weights.ptr());
            const float weight = std::fabs(value) > std::numeric_limits<float>::max()
                                     ? std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(value))
                                     : static_cast<float>(value);
            one_weight.assign(n, weight);
            batch.weights = one_weight.data();
        } else if (!weights.is_none()) {
            weight_array = check_1d<float>(py::reinterpret_borrow<py::array>(weights), "weights", "float32", n);
            batch.weights = weight_array.data();
        }
        if (!ts.is_none()) {
            ts_array = check_1d<std::int64_t>(py::reinterpret_borrow<py::array>(ts), "ts", "int64", n);
            batch.ts = ts_array.data();
        }
        if (!vectors.is_none()) {
            vector_array = check_float_array(py::reinterpret_borrow<py::array>(vectors), "vectors", 2, dim());
            if (static_cast<std::size_t>(vector_array.shape(0)) != n)
                throw py::value_error("vectors has " + std::to_string(vector_array.shape(0)) + " rows, expected " +
                                      std::to_string(n) + " (one per edge)");
            batch.vectors = vector_array.data();
        }
        Status status;
        {
            GilRelease release;
            status = engine_->add_edges(batch);
        }
        check(status);
    }

    py::tuple search(const py::array& query, std::int64_t k, std::int64_t seeds, std::int64_t hops,
                     std::int64_t max_visited, std::int64_t max_fanout, const std::string& direction,
                     const py::object& rels, const py::object& labels, const py::object& tenants, std::int64_t ts_min,
                     std::int64_t ts_max, double hop_decay, bool exact, std::int64_t ef, const py::object& where,
                     const py::object& extra_seeds, const py::object& exclude, const py::object& seed_weights,
                     std::int64_t min_hop) {
        auto q = check_float_array(query, "query", 1, dim());
        SearchRequest request = make_request(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                             ts_min, ts_max, hop_decay, exact, ef, where, extra_seeds, exclude,
                                             seed_weights, min_hop);
        Result<SearchResult> result = Status::internal("not run");
        {
            GilRelease release;
            result = engine_->search(q.data(), dim(), request);
        }
        return result_to_python(*engine_, unwrap(std::move(result)));
    }

    py::array_t<std::uint8_t> admits(const py::sequence& keys, const py::object& labels, const py::object& tenants,
                                     std::int64_t ts_min, std::int64_t ts_max, const py::object& where) {
        std::vector<std::string> encoded = encode_keys(keys, "keys");
        SearchRequest request = make_request(1, 1, 0, 1, 1, "both", py::none(), labels, tenants, ts_min, ts_max, 1.0,
                                             false, 0, where);
        Result<std::vector<std::uint8_t>> out = Status::internal("not run");
        {
            GilRelease release;
            out = engine_->admits(encoded.data(), encoded.size(), request);
        }
        std::vector<std::uint8_t> flags = unwrap(std::move(out));
        py::array_t<std::uint8_t> array(static_cast<py::ssize_t>(flags.size()));
        if (!flags.empty()) std::memcpy(array.mutable_data(), flags.data(), flags.size());
        return array;
    }

    py::object admitted_keys(const py::object& labels, const py::object& tenants, std::int64_t ts_min,
                             std::int64_t ts_max, const py::object& where, std::size_t limit) {
        SearchRequest request = make_request(1, 1, 0, 1, 1, "both", py::none(), labels, tenants, ts_min, ts_max, 1.0,
                                             false, 0, where);
        std::vector<std::string> encoded;
        Result<bool> within = Status::internal("not run");
        {
            GilRelease release;
            within = engine_->admitted_keys(request, limit, encoded);
        }
        if (!unwrap(std::move(within))) return py::none();
        py::list out(encoded.size());
        for (std::size_t i = 0; i < encoded.size(); ++i) out[i] = decode_key(encoded[i]);
        return std::move(out);
    }

    py::array_t<float> score_edges(const py::array& query, const py::array& edge_ids) {
        auto q = check_float_array(query, "query", 1, dim());
        auto ids = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(edge_ids);
        if (!ids || ids.ndim() != 1) throw py::value_error("edge_ids must be a 1-d array of edge ids");
        Result<std::vector<float>> out = Status::internal("not run");
        {
            GilRelease release;
            out = engine_->score_edges(q.data(), dim(), ids.data(), static_cast<std::size_t>(ids.shape(0)));
        }
        std::vector<float> scores = unwrap(std::move(out));
        py::array_t<float> array(static_cast<py::ssize_t>(scores.size()));
        if (!scores.empty()) std::memcpy(array.mutable_data(), scores.data(), scores.size() * sizeof(float));
        return array;
    }

    py::list search_batch(const py::array& queries, std::int64_t k, std::int64_t seeds, std::int64_t hops,
                          std::int64_t max_visited, std::int64_t max_fanout, const std::string& direction,
                          const py::object& rels, const py::object& labels, const py::object& tenants,
                          std::int64_t ts_min, std::int64_t ts_max, double hop_decay, bool exact, std::int64_t ef,
                          std::size_t threads, const py::object& where, const py::object& exclude) {
        auto q = check_float_array(queries, "queries", 2, dim());
        SearchRequest request = make_request(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                             ts_min, ts_max, hop_decay, exact, ef, where, py::none(), exclude);
        auto count = static_cast<std::size_t>(q.shape(0));
        Status valid;
        {
            GilRelease release;
            valid = engine_->validate_queries(q.data(), count, dim());
        }
        check(valid);
        py::list out;
        // Chunks, so that Ctrl-C is noticed between them.
        constexpr std::size_t chunk = 1024;
        for (std::size_t first = 0; first < count; first += chunk) {
            std::size_t n = std::min(chunk, count - first);
            Result<std::vector<SearchResult>> results = Status::internal("not run");
            {
                GilRelease release;
                results = engine_->search_batch(q.data() + first * dim(), n, dim(), request, threads);
            }
            for (const SearchResult& r : unwrap(std::move(results))) out.append(result_to_python(*engine_, r));
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        }
        return out;
    }

    // Edge ids from Python (uint32), each checked against the ids in use.
    std::vector<edge_id_t> edge_id_list(const py::array& edge_ids) const {
        auto ids = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(edge_ids);
        if (!ids) throw py::type_error("edge ids must be an array of uint32");
        std::size_t count_edges = engine_->count_edge_ids();
        std::vector<edge_id_t> out(ids.data(), ids.data() + ids.size());
        for (edge_id_t id : out)
            if (id >= count_edges) throw py::index_error("edge id " + std::to_string(id) + " is out of range");
        return out;
    }

    // (src, rel, dst, weight, text, props, has_vector) of each edge id.
    py::list edge_details(const py::array& edge_ids) {
        py::list out;
        for (edge_id_t id : edge_id_list(edge_ids)) {
            EdgeRecord e = engine_->edge(id);
            std::string text, props;
            engine_->edge_strings(id, &text, &props);
            out.append(py::make_tuple(decode_key(engine_->key(e.src)), to_py_str(e.rel), decode_key(engine_->key(e.dst)),
                                      e.weight, to_py_str(text), to_py_str(props),
                                      engine_->edge_vector_row(id) != invalid_id));
        }
        return out;
    }

    py::list edges(const py::array& edge_ids) {
        py::list out;
        for (edge_id_t id : edge_id_list(edge_ids)) out.append(edge_to_python(*engine_, engine_->edge(id)));
        return out;
    }

    std::vector<std::string> unknown_names(const std::string& kind, const std::vector<std::string>& names) const {
        Engine::NameKind which;
        if (kind == "labels") which = Engine::NameKind::label;
        else if (kind == "tenants") which = Engine::NameKind::tenant;
        else if (kind == "rels") which = Engine::NameKind::rel;
        else throw py::value_error("kind must be 'labels', 'tenants' or 'rels', got '" + kind + "'");
        return engine_->unknown_names(which, names);
    }

    py::dict get_node(const py::handle& key, bool with_vector) {
        NodeRecord r = engine_->node(find_node(*engine_, key), with_vector);
        py::dict d;
        d["key"] = decode_key(r.key);
        d["label"] = to_py_str(r.label);
        d["tenant"] = to_py_str(r.tenant);
        d["ts"] = r.ts;
        d["text"] = to_py_str(r.text);
        d["props"] = to_py_str(r.props);
        d["aliases"] = to_py_str(r.aliases);
        if (with_vector) {
            py::array_t<float> vector(static_cast<py::ssize_t>(r.vector.size()));
            std::memcpy(vector.mutable_data(), r.vector.data(), r.vector.size() * sizeof(float));
            d["vector"] = vector;
        }
        return d;
    }

    // The texts, tenants, labels and ts of nodes, as the BM25 index takes them (lists of str,
    // int64 array), after an upsert or update changed some of them.
    py::tuple text_columns(const py::sequence& keys) {
        std::size_t n = py::len(keys);
        py::list texts(n), tenants(n), labels(n);
        py::array_t<std::int64_t> ts(static_cast<py::ssize_t>(n));
        for (std::size_t i = 0; i < n; ++i) {
            NodeRecord r = engine_->node(find_node(*engine_, keys[i]), false);
            texts[i] = to_py_str(r.text);
            tenants[i] = to_py_str(r.tenant);
            labels[i] = to_py_str(r.label);
            ts.mutable_data()[i] = r.ts;
        }
        return py::make_tuple(texts, tenants, labels, ts);
    }

    // Edge ids at a node, in traversal order.
    py::array_t<std::uint32_t> neighbor_ids(const py::handle& key, const std::string& direction) {
        node_id_t node = find_node(*engine_, key);
        std::vector<EdgeRecord> found = engine_->neighbors(node, parse_direction_arg(direction), false, {});
        py::array_t<std::uint32_t> ids(static_cast<py::ssize_t>(found.size()));
        for (std::size_t i = 0; i < found.size(); ++i) ids.mutable_data()[i] = found[i].edge;
        return ids;
    }

    py::list neighbors(const py::handle& key, const std::string& direction, const py::object& rels) {
        node_id_t node = find_node(*engine_, key);
        bool filter_rels;
        std::vector<std::string> rel_names;
        read_filter(rels, "rels", &filter_rels, &rel_names);
        std::vector<EdgeRecord> found = engine_->neighbors(node, parse_direction_arg(direction), filter_rels, rel_names);
        py::list out;
        for (const EdgeRecord& e : found) out.append(edge_to_python(*engine_, e));
        return out;
    }

    bool contains(const py::handle& key) {
        if (!PyUnicode_Check(key.ptr()) && (PyBool_Check(key.ptr()) || !PyIndex_Check(key.ptr()))) return false;
        std::string encoded;
        try {
            encoded = encode_key(key, "key", 0);
        } catch (py::value_error&) {
            return false;
        }
        return engine_->find(encoded).ok();
    }

    py::tuple node_codes(const py::sequence& keys) {
        std::vector<std::string> encoded = encode_keys(keys, "keys");
        std::vector<node_id_t> nodes;
        for (const auto& key : encoded) nodes.push_back(unwrap(engine_->find(key)));
        py::array_t<std::int8_t> codes({static_cast<py::ssize_t>(nodes.size()), static_cast<py::ssize_t>(dim())});
        py::array_t<float> scales(static_cast<py::ssize_t>(nodes.size()));
        for (std::size_t i = 0; i < nodes.size(); ++i)
            engine_->node_codes(nodes[i], codes.mutable_data() + i * dim(), scales.mutable_data() + i);
        return py::make_tuple(codes, scales);
    }

    std::size_t count_nodes() const { return engine_->count_nodes(); }
    std::size_t count_edges() const { return engine_->count_edges(); }

    py::dict stats() const {
        EngineStats s;
        {
            GilRelease release;  // it takes the writer lock
            s = engine_->stats();
        }
        const EngineConfig& c = engine_->config();
        py::dict d;
        d["nodes"] = s.count_nodes;
        d["edges"] = s.count_edges;
        d["edge_vectors"] = s.count_edge_vectors;
        d["labels"] = s.count_labels;
        d["tenants"] = s.count_tenants;
        d["rels"] = s.count_rels;
        d["dim"] = c.dim;
        d["metric"] = metric_name(c.metric);
        d["connectivity"] = c.hnsw.connectivity;
        d["expansion_add"] = c.hnsw.expansion_add;
        d["expansion_search"] = c.hnsw.expansion_search;
        d["threads"] = c.threads;
        d["vector_bytes"] = s.vector_bytes;
        d["csr_bytes"] = s.csr_bytes;
        d["hnsw_bytes"] = s.hnsw_bytes;
        d["key_bytes"] = s.key_bytes;
        d["text_bytes"] = s.text_bytes;
        d["prop_bytes"] = s.prop_bytes;
        d["member_list_bytes"] = s.member_list_bytes;
        d["seed_full_scans"] = s.count_seed_full_scans;
        d["seed_list_scans"] = s.count_seed_list_scans;
        d["seed_hnsw_searches"] = s.count_seed_hnsw_searches;
        d["seed_scan_fallbacks"] = s.count_seed_scan_fallbacks;
        d["isa"] = simd::active_isa();
        d["deleted_nodes"] = s.count_deleted_nodes;
        d["deleted_edges"] = s.count_deleted_edges;
        d["delta_edges"] = s.count_delta_edges;
        d["compactions"] = s.count_compactions;
        d["index_pending"] = s.count_index_pending;
        d["index_relinked"] = s.count_index_relinked;
        d["last_lsn"] = s.last_lsn;
        d["read_only"] = s.read_only;
        return d;
    }

  private:
    std::unique_ptr<Engine> engine_;
};

}  // namespace

void bind_engine(py::module_& m) {
    constexpr std::int64_t ts_lo = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t ts_hi = std::numeric_limits<std::int64_t>::max();
    m.attr("FILTER_SCAN_AUTO") = py::int_(Engine::filter_scan_auto);
    m.attr("FILTER_SCAN_AUTO_FLOOR") = py::int_(Engine::filter_scan_auto_floor);
    py::class_<PyEngine>(m, "Engine", "Core engine; use vecgraph.Graph instead.")
        .def(py::init<std::size_t, const std::string&, std::size_t, std::size_t, std::size_t, std::size_t,
                      std::size_t, const std::vector<std::pair<std::string, std::string>>&>(),
             py::arg("dim"), py::arg("metric"), py::arg("connectivity"), py::arg("expansion_add"),
             py::arg("expansion_search"), py::arg("threads"), py::arg("auto_compact_edges") = 100000,
             py::arg("filterable") = std::vector<std::pair<std::string, std::string>>{})
        .def_property("full_scan_max_nodes", &PyEngine::full_scan_max_nodes, &PyEngine::set_full_scan_max_nodes)
        .def_property("filter_scan_max_nodes", &PyEngine::filter_scan_max_nodes, &PyEngine::set_filter_scan_max_nodes)
        .def_property_readonly("filter_scan_limit", &PyEngine::filter_scan_limit,
                               "The filter scan limit in force at the graph's current size.")
        .def_property_readonly("dim", &PyEngine::dim)
        .def_property_readonly("metric", &PyEngine::metric)
        .def("add_nodes", &PyEngine::add_nodes, py::arg("keys"), py::arg("vectors"), py::arg("labels"),
             py::arg("tenants"), py::arg("ts"), py::arg("texts"), py::arg("props"))
        .def("add_edges", &PyEngine::add_edges, py::arg("src"), py::arg("dst"), py::arg("rels"), py::arg("weights"),
             py::arg("ts"), py::arg("texts"), py::arg("props"), py::arg("vectors"))
        .def("search", &PyEngine::search, py::arg("query"), py::arg("k"), py::arg("seeds"), py::arg("hops"),
             py::arg("max_visited"), py::arg("max_fanout"), py::arg("direction"), py::arg("rels"), py::arg("labels"),
             py::arg("tenants"), py::arg("ts_min") = ts_lo, py::arg("ts_max") = ts_hi, py::arg("hop_decay") = 1.0,
             py::arg("exact") = false, py::arg("ef") = 0, py::arg("where") = py::none(),
             py::arg("extra_seeds") = py::none(), py::arg("exclude") = py::none(),
             py::arg("seed_weights") = py::none(), py::arg("min_hop") = 0)
        .def("admits", &PyEngine::admits, py::arg("keys"), py::arg("labels"), py::arg("tenants"),
             py::arg("ts_min") = ts_lo, py::arg("ts_max") = ts_hi, py::arg("where") = py::none())
        .def("admitted_keys", &PyEngine::admitted_keys, py::arg("labels"), py::arg("tenants"), py::arg("ts_min"),
             py::arg("ts_max"), py::arg("where"), py::arg("limit"))
        .def("score_edges", &PyEngine::score_edges, py::arg("query"), py::arg("edge_ids"))
        .def("search_batch", &PyEngine::search_batch, py::arg("queries"), py::arg("k"), py::arg("seeds"),
             py::arg("hops"), py::arg("max_visited"), py::arg("max_fanout"), py::arg("direction"), py::arg("rels"),
             py::arg("labels"), py::arg("tenants"), py::arg("ts_min") = ts_lo, py::arg("ts_max") = ts_hi,
             py::arg("hop_decay") = 1.0, py::arg("exact") = false, py::arg("ef") = 0, py::arg("threads") = 0,
             py::arg("where") = py::none(), py::arg("exclude") = py::none())
        .def("upsert_nodes", &PyEngine::upsert_nodes, py::arg("keys"), py::arg("vectors"), py::arg("labels"),
             py::arg("tenants"), py::arg("ts"), py::arg("texts"), py::arg("props"))
        .def("update_nodes", &PyEngine::update_nodes, py::arg("keys"), py::arg("vectors"), py::arg("labels"),
             py::arg("tenants"), py::arg("ts"), py::arg("texts"), py::arg("props"))
        .def("text_columns", &PyEngine::text_columns, py::arg("keys"))
        .def("delete_nodes", &PyEngine::delete_nodes, py::arg("keys"), py::arg("missing_ok"))
        .def("delete_edges", &PyEngine::delete_edges, py::arg("src"), py::arg("dst"), py::arg("rels"),
             py::arg("missing_ok"))
        .def("delete_tenant", &PyEngine::delete_tenant, py::arg("tenant"))
        .def("set_aliases", &PyEngine::set_aliases, py::arg("keys"), py::arg("aliases"))
        .def("compact", &PyEngine::compact)
        .def("wait_for_compaction", &PyEngine::wait_for_compaction)
        .def("last_text_lsn", &PyEngine::last_text_lsn)
        .def("set_last_text_lsn", &PyEngine::set_last_text_lsn, py::arg("lsn"))
        .def("defer_indexing", &PyEngine::defer_indexing, py::arg("on"), py::arg("background_min") = SIZE_MAX)
        .def("count_index_pending", &PyEngine::count_index_pending)
        .def("wait_for_indexing", &PyEngine::wait_for_indexing)
        .def("seed_index_complete", &PyEngine::seed_index_complete)
        .def("indexing_deferred", &PyEngine::indexing_deferred)
        .def("count_deferred", &PyEngine::count_deferred)
        .def("save_seed_index", &PyEngine::save_seed_index, py::arg("path"))
        .def("load_seed_index", &PyEngine::load_seed_index, py::arg("path"))
        .def("verify", &PyEngine::verify, py::arg("limit") = 100)
        .def("sync", &PyEngine::sync)
        .def("close_wal", &PyEngine::close_wal)
        .def("refuse_writes", &PyEngine::refuse_writes, py::arg("why"), py::arg("storage") = false)
        .def("drop_wal_before", &PyEngine::drop_wal_before, py::arg("lsn"))
        .def("last_lsn", &PyEngine::last_lsn)
        .def("attach_wal", &PyEngine::attach_wal, py::arg("dir"), py::arg("uuid"), py::arg("next_lsn"), py::arg("sync"),
             py::arg("sync_interval_ms"), py::arg("segment_bytes"), py::arg("tail_marker") = "")
        .def("replay_wal", &PyEngine::replay_wal, py::arg("dir"), py::arg("uuid"), py::arg("from_lsn"),
             py::arg("truncate_tail"), py::arg("tail_marker") = "")
        .def("export_state", &PyEngine::export_state, py::arg("hnsw_path") = "", py::arg("roll_wal") = true)
        .def("load_nodes", &PyEngine::load_nodes, py::arg("keys"), py::arg("rows"), py::arg("labels"),
             py::arg("tenants"), py::arg("ts"), py::arg("texts"), py::arg("props"))
        .def("load_edges", &PyEngine::load_edges, py::arg("src"), py::arg("dst"), py::arg("rels"), py::arg("weights"),
             py::arg("ts"), py::arg("texts"), py::arg("props"), py::arg("has_vector"), py::arg("rows"))
        .def("edges", &PyEngine::edges, py::arg("edge_ids"))
        .def("edge_details", &PyEngine::edge_details, py::arg("edge_ids"))
        .def("neighbor_ids", &PyEngine::neighbor_ids, py::arg("key"), py::arg("direction"))
        .def("get_node", &PyEngine::get_node, py::arg("key"), py::arg("with_vector") = true)
        .def("unknown_names", &PyEngine::unknown_names, py::arg("kind"), py::arg("names"))
        .def("neighbors", &PyEngine::neighbors, py::arg("key"), py::arg("direction"), py::arg("rels"))
        .def("contains", &PyEngine::contains, py::arg("key"))
        .def("node_codes", &PyEngine::node_codes, py::arg("keys"))
        .def("count_nodes", &PyEngine::count_nodes)
        .def("count_edges", &PyEngine::count_edges)
        .def("stats", &PyEngine::stats);

    m.def(
        "check_wal_tail",
        [](const std::string& dir, const std::string& tail_marker, const py::bytes& uuid, std::uint64_t from_lsn) {
            wal::Uuid id = PyEngine::to_uuid(uuid);
            Status status;
            {
                GilRelease release;
                status = wal::check_tail(dir, tail_marker, id, from_lsn);
            }
            check(status);
        },
        py::arg("dir"), py::arg("tail_marker"), py::arg("uuid"), py::arg("from_lsn"),
        "Raises CorruptionError when the WAL in dir lacks the newest segment the tail marker names "
        "(wal_format.hpp, TAIL MARKER); reads only.");
    m.def(
        "scan_wal",
        [](const std::string& dir, const py::bytes& uuid, std::uint64_t from_lsn) {
            wal::Uuid id = PyEngine::to_uuid(uuid);
            Result<wal::RecoveryReport> report = Status::internal("not run");
            {
                GilRelease release;
                report = wal::recover(dir, id, from_lsn, wal::RecordVisitor(), false, "");
            }
            const wal::RecoveryReport& r = unwrap(std::move(report));
            py::dict d;
            d["records"] = r.records;
            d["last_lsn"] = r.last_lsn;
            d["truncated_bytes"] = r.truncated_bytes;
            return d;
        },
        py::arg("dir"), py::arg("uuid"), py::arg("from_lsn"),
        "Read every WAL record recovery from from_lsn would read, checking each (CRC32C, LSN "
        "chain), applying none; raises CorruptionError as recovery would. Reads only.");
}

}  // namespace vecgraph::bindings
