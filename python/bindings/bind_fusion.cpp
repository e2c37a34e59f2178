// Weighted Reciprocal Rank Fusion, and the convex combination of scored lists, over lists of
// Python keys: the accumulation and top-n selection of vecgraph.fusion.rrf and
// vecgraph.fusion.convex (which check the arguments and document the semantics).
//
//   score(d) = sum over lists i holding d of  w_i / (k + rank_i(d)),  ranks from 1
//   (Cormack, Clarke and Buettcher, SIGIR 2009)
//
// Keys are any hashable Python objects, compared as a dict compares them (hash, then identity
// or ==). A key repeated within one list counts at its first rank. Scores are summed in list
// order in double precision, as the Python reference does, so both give the same bits. Order:
// score descending, then the key's best rank in any list, then the first list giving it that
// rank (a total order: one key per (rank, list) position).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace py = pybind11;

namespace vecgraph::bindings {
namespace {

struct Entry {
    PyObject* key;        // borrowed from the tuples of rrf_fuse, which outlive the table
    Py_hash_t hash;
    double score;
    std::int32_t best_rank;
    std::int32_t best_list;
    std::int32_t last_list;  // the list that last added to score (repeats within a list skip)
};

class KeyTable {
public:
    explicit KeyTable(std::size_t expected) {
        std::size_t capacity = 16;
        while (capacity < expected * 2) capacity <<= 1;
        slots_.assign(capacity, -1);
        mask_ = capacity - 1;
        entries_.reserve(expected);
    }

    // Index of key's entry, adding a new one (score 0) when absent. Throws on an unhashable
    // key or a failing __eq__.
    std::size_t find_or_add(PyObject* key) {
        const Py_hash_t hash = PyObject_Hash(key);
        if (hash == -1 && PyErr_Occurred()) throw py::error_already_set();
        std::size_t slot = mix(static_cast<std::uint64_t>(hash)) & mask_;
        while (true) {
            const std::int32_t at = slots_[slot];
            if (at < 0) break;
            Entry& e = entries_[static_cast<std::size_t>(at)];
            if (e.key == key) return static_cast<std::size_t>(at);
            if (e.hash == hash) {
                const int equal = PyObject_RichCompareBool(e.key, key, Py_EQ);
                if (equal < 0) throw py::error_already_set();
                if (equal) return static_cast<std::size_t>(at);
            }
            slot = (slot + 1) & mask_;
        }
        slots_[slot] = static_cast<std::int32_t>(entries_.size());
        entries_.push_back(Entry{key, hash, 0.0, INT32_MAX, INT32_MAX, -1});
        return entries_.size() - 1;
    }

    std::vector<Entry>& entries() { return entries_; }

private:
    // Python's hashes of ints are the ints: keys such as i << 32 share their low bits. The
    // murmur3 finaliser spreads every bit over the slot index.
    static std::size_t mix(std::uint64_t h) {
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
        return static_cast<std::size_t>(h);
    }

    std::vector<std::int32_t> slots_;
    std::vector<Entry> entries_;
    std::size_t mask_ = 0;
};

// A list or tuple as a tuple (the same object for a tuple): its items stay put even if a
// key's __eq__ changes the caller's list while fusing.
py::tuple frozen(const py::handle& seq) {
    if (!PyList_Check(seq.ptr()) && !PyTuple_Check(seq.ptr()))
        throw py::type_error("rrf_fuse: each ranked list must be a list or a tuple");
    PyObject* t = PySequence_Tuple(seq.ptr());
    if (!t) throw py::error_already_set();
    return py::reinterpret_steal<py::tuple>(t);
}

// The fusion of rrf_fuse and convex_fuse: a key's score sums, over the lists that hold it (its
// first rank in each), w_i / (k + rank) or, with `scores`, w_i * scores[i][rank - 1].
py::list fuse_lists(const py::list& key_lists, const std::vector<std::vector<double>>* scores,
                    const std::vector<double>& weights, double k, py::ssize_t top_n, bool with_ranks) {
    const std::size_t count = static_cast<std::size_t>(key_lists.size());
    if (weights.size() != count) throw py::value_error("fusion: one weight per list is needed");
    if (scores && scores->size() != count) throw py::value_error("fusion: one score list per list is needed");
    std::vector<py::tuple> lists;
    lists.reserve(count);
    std::vector<PyObject* const*> items(count);
    std::vector<Py_ssize_t> sizes(count);
    std::size_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
        lists.push_back(frozen(key_lists[i]));
        sizes[i] = PyTuple_GET_SIZE(lists[i].ptr());
        items[i] = reinterpret_cast<PyObject* const*>(&PyTuple_GET_ITEM(lists[i].ptr(), 0));
        total += static_cast<std::size_t>(sizes[i]);
        if (scores && (*scores)[i].size() != static_cast<std::size_t>(sizes[i]))
            throw py::value_error("fusion: list " + std::to_string(i) + " has " + std::to_string(sizes[i]) +
                                  " keys and " + std::to_string((*scores)[i].size()) + " scores");
    }
    KeyTable table(total);
    // Only with_ranks: every counted occurrence (entry, list, rank), to report the ranks of the
    // entries kept (memory proportional to the input, not to entries x lists).
    struct Occurrence {
        std::uint32_t entry, list;
        std::int32_t rank;
    };
    std::vector<Occurrence> occurrences;
    if (with_ranks) occurrences.reserve(total);
    for (std::size_t i = 0; i < count; ++i) {
        const double w = weights[i];
        const auto list = static_cast<std::int32_t>(i);
        for (Py_ssize_t r = 0; r < sizes[i]; ++r) {
            const std::size_t e = table.find_or_add(items[i][r]);
            Entry& entry = table.entries()[e];
            if (entry.last_list == list) continue;  // repeated within this list: first rank counts
            const auto rank = static_cast<std::int32_t>(r + 1);
            entry.score += scores ? w * (*scores)[i][static_cast<std::size_t>(r)] : w / (k + static_cast<double>(rank));
            entry.last_list = list;
            if (rank < entry.best_rank) {
                entry.best_rank = rank;
                entry.best_list = list;
            }
            if (with_ranks)
                occurrences.push_back({static_cast<std::uint32_t>(e), static_cast<std::uint32_t>(i), rank});
        }
    }
    std::vector<Entry>& entries = table.entries();
    std::vector<std::uint32_t> order(entries.size());
    for (std::size_t e = 0; e < order.size(); ++e) order[e] = static_cast<std::uint32_t>(e);
    const auto better = [&entries](std::uint32_t a, std::uint32_t b) {
        const Entry& x = entries[a];
        const Entry& y = entries[b];
        if (x.score != y.score) return x.score > y.score;
        if (x.best_rank != y.best_rank) return x.best_rank < y.best_rank;
        return x.best_list < y.best_list;
    };
    std::size_t keep = order.size();
    if (top_n >= 0 && static_cast<std::size_t>(top_n) < keep) {
        keep = static_cast<std::size_t>(top_n);
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), better);
    } else {
        std::sort(order.begin(), order.end(), better);
    }
    // ranks[j * count + i]: the first rank of the j-th result in list i (0: absent).
    std::vector<std::int32_t> ranks;
    if (with_ranks) {
        std::vector<std::int32_t> position(entries.size(), -1);
        for (std::size_t j = 0; j < keep; ++j) position[order[j]] = static_cast<std::int32_t>(j);
        ranks.assign(keep * count, 0);
        for (const Occurrence& o : occurrences)
            if (position[o.entry] >= 0) ranks[static_cast<std::size_t>(position[o.entry]) * count + o.list] = o.rank;
    }
    py::list out(keep);
    for (std::size_t j = 0; j < keep; ++j) {
        const std::uint32_t e = order[j];
        py::object key = py::reinterpret_borrow<py::object>(entries[e].key);
        py::float_ score(entries[e].score);
        if (with_ranks) {
            py::tuple rank_tuple(count);
            for (std::size_t i = 0; i < count; ++i) {
                const std::int32_t rank = ranks[j * count + i];
                rank_tuple[i] = rank ? py::object(py::int_(rank)) : py::object(py::none());
            }
            out[j] = py::make_tuple(key, score, rank_tuple);
        } else {
            out[j] = py::make_tuple(key, score);
        }
    }
    return out;
}

py::list rrf_fuse(const py::list& key_lists, const std::vector<double>& weights, double k, py::ssize_t top_n,
                  bool with_ranks) {
    return fuse_lists(key_lists, nullptr, weights, k, top_n, with_ranks);
}

py::list convex_fuse(const py::list& key_lists, const std::vector<std::vector<double>>& scores,
                     const std::vector<double>& weights, py::ssize_t top_n, bool with_ranks) {
    return fuse_lists(key_lists, &scores, weights, 0.0, top_n, with_ranks);
}

}  // namespace

void bind_fusion(py::module_& m) {
    m.def("convex_fuse", &convex_fuse, py::arg("key_lists"), py::arg("score_lists"), py::arg("weights"),
          py::arg("top_n"), py::arg("with_ranks"),
          "Convex combination of scored lists: a key scores the sum over the lists holding it (first "
          "rank) of weight * its score there; order and output as rrf_fuse. Arguments are checked by "
          "vecgraph.fusion.convex.");
    m.def("rrf_fuse", &rrf_fuse, py::arg("key_lists"), py::arg("weights"), py::arg("k"), py::arg("top_n"),
          py::arg("with_ranks"),
          "Weighted RRF of lists (list or tuple) of hashable keys, best first: [(key, score)] or "
          "[(key, score, ranks)] with one rank (from 1) or None per list. top_n < 0: every key. "
          "Arguments are checked by vecgraph.fusion.rrf.");
}

}  // namespace vecgraph::bindings
