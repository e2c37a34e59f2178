// pybind11 bindings of the engine: check arguments under the GIL, release it, call the core,
// translate errors. The Python facade (vecgraph/graph.py) gives defaults and docstrings.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <limits>

#include "bind_errors.hpp"
#include "ndarray_checks.hpp"
#include "vecgraph/engine.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph::bindings {

namespace py = pybind11;

std::string encode_key(const py::handle& key, const char* name, std::size_t row) {
    if (PyUnicode_Check(key.ptr())) {
        Py_ssize_t size = 0;
        const char* utf8 = PyUnicode_AsUTF8AndSize(key.ptr(), &size);
        if (!utf8) {
            PyErr_Clear();
            throw py::value_error(std::string(name) + " row " + std::to_string(row) +
                                  " is not valid Unicode (lone surrogate); keys must encode to UTF-8");
        }
        return encode_text_key(std::string_view(utf8, static_cast<std::size_t>(size)));
    }
    if (PyBool_Check(key.ptr()) || !PyIndex_Check(key.ptr()))
        throw py::type_error(std::string(name) + " must be str or int, got " +
                             std::string(Py_TYPE(key.ptr())->tp_name) + " at row " + std::to_string(row));
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(key.ptr()));
    if (!index) throw py::error_already_set();
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow)
        throw py::value_error(std::string(name) + " row " + std::to_string(row) +
                              " is an int outside the int64 range; integer keys must fit int64");
    return encode_int_key(value);
}

std::vector<std::string> encode_keys(const py::handle& keys, const char* name) {
    std::vector<std::string> out;
    py::sequence items = py::reinterpret_borrow<py::sequence>(keys);
    out.reserve(items.size());
    std::size_t row = 0;
    for (auto item : items) out.push_back(encode_key(item, name, row++));
    return out;
}

py::object decode_key(std::string_view encoded) {
    if (!encoded.empty() && encoded[0] == key_tag_int && encoded.size() == 9) {
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits |= static_cast<std::uint64_t>(static_cast<unsigned char>(encoded[1 + i])) << (8 * i);
        return py::reinterpret_steal<py::object>(PyLong_FromLongLong(static_cast<long long>(bits)));
    }
    return py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(encoded.data() + 1, static_cast<Py_ssize_t>(encoded.size() - 1), "strict"));
}

std::vector<std::string> to_strings(const py::handle& values, const char* name, std::size_t count) {
    std::vector<std::string> out;
    out.reserve(count);
    std::size_t row = 0;
    for (auto item : py::reinterpret_borrow<py::sequence>(values)) {
        if (item.is_none()) {
            out.emplace_back();
        } else if (PyUnicode_Check(item.ptr())) {
            Py_ssize_t size = 0;
            const char* utf8 = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
            if (!utf8) {
                PyErr_Clear();
                throw py::value_error(std::string(name) + " row " + std::to_string(row) + " is not valid Unicode");
            }
            out.emplace_back(utf8, static_cast<std::size_t>(size));
        } else {
            throw py::type_error(std::string(name) + " must be str (or None), got " +
                                 std::string(Py_TYPE(item.ptr())->tp_name) + " at row " + std::to_string(row));
        }
        ++row;
    }
    if (out.size() != count)
        throw py::value_error(std::string(name) + " has " + std::to_string(out.size()) + " items, expected " +
                              std::to_string(count));
    return out;
}

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
                           std::int64_t ts_max, double hop_decay, bool exact, std::int64_t ef) {
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
             std::size_t expansion_search, std::size_t threads) {
        EngineConfig config;
        config.dim = dim;
        if (!parse_metric(metric, &config.metric))
            raise_status(Status::invalid_argument("metric must be 'cos', 'ip' or 'l2', got '" + metric + "'"));
        config.hnsw.connectivity = connectivity;
        config.hnsw.expansion_add = expansion_add;
        config.hnsw.expansion_search = expansion_search;
        config.threads = threads;
        engine_ = unwrap(Engine::create(config));
    }

    std::size_t dim() const { return engine_->config().dim; }
    std::string metric() const { return metric_name(engine_->config().metric); }

    void add_nodes(const py::sequence& keys, const py::array& vectors, const py::object& labels,
                   const py::object& tenants, const py::object& ts, const py::object& texts, const py::object& props) {
        std::vector<std::string> encoded = encode_keys(keys, "keys");
        std::size_t n = encoded.size();
        auto v = check_float_array(vectors, "vectors", 2, dim());
        if (static_cast<std::size_t>(v.shape(0)) != n)
            throw py::value_error("vectors has " + std::to_string(v.shape(0)) + " rows, keys has " + std::to_string(n));
        std::vector<std::string> label_col, tenant_col, text_col, props_col;
        NodeBatch batch;
        batch.count = n;
        batch.keys = encoded.data();
        batch.vectors = v.data();
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
            py::gil_scoped_release release;
            status = engine_->add_nodes(batch);
        }
        check(status);
    }

    void add_edges(const py::sequence& src, const py::sequence& dst, const py::object& rels, const py::object& weights,
                   const py::object& ts, const py::object& texts, const py::object& props, const py::object& vectors) {
        std::vector<std::string> src_keys = encode_keys(src, "src");
        std::vector<std::string> dst_keys = encode_keys(dst, "dst");
        std::size_t n = src_keys.size();
        if (dst_keys.size() != n)
            throw py::value_error("src has " + std::to_string(n) + " keys, dst has " + std::to_string(dst_keys.size()));
        EdgeBatch batch;
        batch.count = n;
        batch.src = src_keys.data();
        batch.dst = dst_keys.data();
        std::vector<std::string> rel_col, text_col, props_col;
        if (!rels.is_none()) batch.rels = (rel_col = to_strings(rels, "rels", n)).data();
        if (!texts.is_none()) batch.texts = (text_col = to_strings(texts, "texts", n)).data();
        if (!props.is_none()) batch.props = (props_col = to_strings(props, "props", n)).data();
        py::array_t<float> weight_array, vector_array;
        py::array_t<std::int64_t> ts_array;
        if (!weights.is_none()) {
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
            py::gil_scoped_release release;
            status = engine_->add_edges(batch);
        }
        check(status);
    }

    py::tuple search(const py::array& query, std::int64_t k, std::int64_t seeds, std::int64_t hops,
                     std::int64_t max_visited, std::int64_t max_fanout, const std::string& direction,
                     const py::object& rels, const py::object& labels, const py::object& tenants, std::int64_t ts_min,
                     std::int64_t ts_max, double hop_decay, bool exact, std::int64_t ef) {
        auto q = check_float_array(query, "query", 1, dim());
        SearchRequest request = make_request(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                             ts_min, ts_max, hop_decay, exact, ef);
        Result<SearchResult> result = Status::internal("not run");
        {
            py::gil_scoped_release release;
            result = engine_->search(q.data(), dim(), request);
        }
        return result_to_python(*engine_, unwrap(std::move(result)));
    }

    py::list search_batch(const py::array& queries, std::int64_t k, std::int64_t seeds, std::int64_t hops,
                          std::int64_t max_visited, std::int64_t max_fanout, const std::string& direction,
                          const py::object& rels, const py::object& labels, const py::object& tenants,
                          std::int64_t ts_min, std::int64_t ts_max, double hop_decay, bool exact, std::int64_t ef,
                          std::size_t threads) {
        auto q = check_float_array(queries, "queries", 2, dim());
        SearchRequest request = make_request(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                             ts_min, ts_max, hop_decay, exact, ef);
        auto count = static_cast<std::size_t>(q.shape(0));
        Status valid;
        {
            py::gil_scoped_release release;
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
                py::gil_scoped_release release;
                results = engine_->search_batch(q.data() + first * dim(), n, dim(), request, threads);
            }
            for (const SearchResult& r : unwrap(std::move(results))) out.append(result_to_python(*engine_, r));
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        }
        return out;
    }

    py::list edges(const py::array& edge_ids) {
        auto ids = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(edge_ids);
        if (!ids) throw py::type_error("edge ids must be an array of uint32");
        std::size_t count_edges = engine_->count_edges();
        py::list out;
        for (py::ssize_t i = 0; i < ids.size(); ++i) {
            std::uint32_t id = ids.data()[i];
            if (id >= count_edges) throw py::index_error("edge id " + std::to_string(id) + " is out of range");
            out.append(edge_to_python(*engine_, engine_->edge(id)));
        }
        return out;
    }

    py::dict get_node(const py::handle& key) {
        NodeRecord r = engine_->node(find_node(*engine_, key));
        py::dict d;
        d["key"] = decode_key(r.key);
        d["label"] = to_py_str(r.label);
        d["tenant"] = to_py_str(r.tenant);
        d["ts"] = r.ts;
        d["text"] = to_py_str(r.text);
        d["props"] = to_py_str(r.props);
        py::array_t<float> vector(static_cast<py::ssize_t>(r.vector.size()));
        std::memcpy(vector.mutable_data(), r.vector.data(), r.vector.size() * sizeof(float));
        d["vector"] = vector;
        return d;
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
        EngineStats s = engine_->stats();
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
        d["isa"] = simd::active_isa();
        return d;
    }

  private:
    std::unique_ptr<Engine> engine_;
};

}  // namespace

void bind_engine(py::module_& m) {
    constexpr std::int64_t ts_lo = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t ts_hi = std::numeric_limits<std::int64_t>::max();
    py::class_<PyEngine>(m, "Engine", "Core engine; use vecgraph.Graph instead.")
        .def(py::init<std::size_t, const std::string&, std::size_t, std::size_t, std::size_t, std::size_t>(),
             py::arg("dim"), py::arg("metric"), py::arg("connectivity"), py::arg("expansion_add"),
             py::arg("expansion_search"), py::arg("threads"))
        .def_property_readonly("dim", &PyEngine::dim)
        .def_property_readonly("metric", &PyEngine::metric)
        .def("add_nodes", &PyEngine::add_nodes, py::arg("keys"), py::arg("vectors"), py::arg("labels"),
             py::arg("tenants"), py::arg("ts"), py::arg("texts"), py::arg("props"))
        .def("add_edges", &PyEngine::add_edges, py::arg("src"), py::arg("dst"), py::arg("rels"), py::arg("weights"),
             py::arg("ts"), py::arg("texts"), py::arg("props"), py::arg("vectors"))
        .def("search", &PyEngine::search, py::arg("query"), py::arg("k"), py::arg("seeds"), py::arg("hops"),
             py::arg("max_visited"), py::arg("max_fanout"), py::arg("direction"), py::arg("rels"), py::arg("labels"),
             py::arg("tenants"), py::arg("ts_min") = ts_lo, py::arg("ts_max") = ts_hi, py::arg("hop_decay") = 1.0,
             py::arg("exact") = false, py::arg("ef") = 0)
        .def("search_batch", &PyEngine::search_batch, py::arg("queries"), py::arg("k"), py::arg("seeds"),
             py::arg("hops"), py::arg("max_visited"), py::arg("max_fanout"), py::arg("direction"), py::arg("rels"),
             py::arg("labels"), py::arg("tenants"), py::arg("ts_min") = ts_lo, py::arg("ts_max") = ts_hi,
             py::arg("hop_decay") = 1.0, py::arg("exact") = false, py::arg("ef") = 0, py::arg("threads") = 0)
        .def("edges", &PyEngine::edges, py::arg("edge_ids"))
        .def("get_node", &PyEngine::get_node, py::arg("key"))
        .def("neighbors", &PyEngine::neighbors, py::arg("key"), py::arg("direction"), py::arg("rels"))
        .def("contains", &PyEngine::contains, py::arg("key"))
        .def("node_codes", &PyEngine::node_codes, py::arg("keys"))
        .def("count_nodes", &PyEngine::count_nodes)
        .def("count_edges", &PyEngine::count_edges)
        .def("stats", &PyEngine::stats);
}

}  // namespace vecgraph::bindings
