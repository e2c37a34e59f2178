// Conversions between Python values and the core's key and string columns: keys encoded
// for the core (str, or an int that fits int64) and decoded back, integer key arrays read from
// their buffers, columns of str (one per row, or distinct values with an index per row) and
// the snapshot loader's Arrow-layout string columns.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gil.hpp"

namespace vecgraph::bindings {

namespace py = pybind11;

[[noreturn]] void throw_beyond_int64(const char* name, py::ssize_t row);

/// Encodes Python keys (str, or int / NumPy integer that fits int64; never bool) for the core.
std::vector<std::string> encode_keys(const py::handle& keys, const char* name);
std::string encode_key(const py::handle& key, const char* name, std::size_t row);
/// Decodes an encoded key back to str or int.
py::object decode_key(std::string_view encoded);
/// A 1-d NumPy integer array as int64 values (a copy only for another dtype or layout); a uint64
/// value beyond int64 is refused with its row.
py::array_t<std::int64_t> int64_keys(const py::array& keys, const char* name);
/// Whether `keys` is a 1-d NumPy integer array (read from its buffer, no Python int per key).
bool is_int_key_array(const py::handle& keys);

// An edge batch's src or dst keys: a 1-d NumPy integer array is passed to the core as int64
// values (no encoded string per key); other sequences are encoded key by key.
struct KeyColumn {
    std::vector<std::string> encoded;
    py::array_t<std::int64_t> ints;  // with is_int
    bool is_int = false;
    std::size_t size() const { return is_int ? static_cast<std::size_t>(ints.shape(0)) : encoded.size(); }
};

KeyColumn key_column(const py::handle& keys, const char* name);

/// A list of str (None allowed when `optional`), with `count` items.
std::vector<std::string> to_strings(const py::handle& values, const char* name, std::size_t count);

// A column of n str / None as its distinct values and one index per row. Rows holding the same
// str object, or equal text, share one value: a batch of millions of edges drawn from a few
// relation names converts a few strings, and holds the GIL for one pass over the list.
struct StringCodes {
    std::vector<std::string> values;
    std::vector<std::uint32_t> index;
};

StringCodes to_string_codes(const py::handle& values, const char* name, std::size_t count);

/// A column of n strings as passed by the snapshot loader: (offsets, data) in Arrow layout,
/// (indices, values) of a dictionary, or a list of str / bytes.
std::vector<std::string> column_strings(const py::handle& column, const char* name, std::size_t n);

// Runs fn without the GIL for an array of `rows` >= 4096 (other Python threads run meanwhile; the
// caller holds the array), with it for a small one (releasing costs more than the work).
template <typename fn_at>
void without_gil_if_large(py::ssize_t rows, fn_at&& fn) {
    if (rows >= 4096) {
        GilRelease release;
        fn();
    } else {
        fn();
    }
}

}  // namespace vecgraph::bindings
