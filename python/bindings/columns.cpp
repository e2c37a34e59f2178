// Conversions between Python values and the core's key and string columns (columns.hpp).
#include "columns.hpp"

#include <pybind11/stl.h>

#include <cstring>
#include <unordered_map>

#include "ndarray_checks.hpp"
#include "vecgraph/types.hpp"

namespace vecgraph::bindings {

[[noreturn]] void throw_beyond_int64(const char* name, py::ssize_t row) {
    throw py::value_error(std::string(name) + " row " + std::to_string(row) +
                          " is an int outside the int64 range; integer keys must fit int64");
}

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
    if (overflow) throw_beyond_int64(name, static_cast<py::ssize_t>(row));
    return encode_int_key(value);
}

// A 1-d NumPy integer array as int64 values (a copy only for another dtype or layout); a uint64
// value beyond int64 is refused with its row.
py::array_t<std::int64_t> int64_keys(const py::array& keys, const char* name) {
    if (keys.dtype().kind() == 'u' && keys.itemsize() == 8) {
        auto values = py::array_t<std::uint64_t, py::array::forcecast>::ensure(keys);
        if (!values) throw py::error_already_set();
        auto view = values.unchecked<1>();
        const auto int64_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
        py::ssize_t beyond_int64 = -1;
        without_gil_if_large(view.shape(0), [&] {
            for (py::ssize_t row = 0; row < view.shape(0) && beyond_int64 < 0; ++row)
                if (view(row) > int64_max) beyond_int64 = row;
        });
        if (beyond_int64 >= 0) throw_beyond_int64(name, beyond_int64);
    }
    auto ints = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(keys);
    if (!ints) throw py::error_already_set();
    return ints;
}

bool is_int_key_array(const py::handle& keys) {
    if (!py::isinstance<py::array>(keys)) return false;
    auto array = py::reinterpret_borrow<py::array>(keys);
    return array.ndim() == 1 && (array.dtype().kind() == 'i' || array.dtype().kind() == 'u');
}

std::vector<std::string> encode_keys(const py::handle& keys, const char* name) {
    if (is_int_key_array(keys)) {  // encoded straight from the buffer (no Python int per key)
        auto ints = int64_keys(py::reinterpret_borrow<py::array>(keys), name);
        const std::int64_t* values = ints.data();
        std::vector<std::string> out;
        without_gil_if_large(ints.shape(0), [&] {
            out.reserve(static_cast<std::size_t>(ints.shape(0)));
            for (py::ssize_t row = 0; row < ints.shape(0); ++row) out.push_back(encode_int_key(values[row]));
        });
        return out;
    }
    std::vector<std::string> out;
    py::sequence items = py::reinterpret_borrow<py::sequence>(keys);
    out.reserve(items.size());
    std::size_t row = 0;
    for (auto item : items) out.push_back(encode_key(item, name, row++));
    return out;
}


KeyColumn key_column(const py::handle& keys, const char* name) {
    KeyColumn out;
    if (is_int_key_array(keys)) {
        out.ints = int64_keys(py::reinterpret_borrow<py::array>(keys), name);
        out.is_int = true;
    } else {
        out.encoded = encode_keys(keys, name);
    }
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


StringCodes to_string_codes(const py::handle& values, const char* name, std::size_t count) {
    StringCodes out;
    // The list keeps each row's object alive while the maps below hold its address and views
    // of its UTF-8 text (a sequence other than a list may make a new object per row).
    py::list items = PyList_CheckExact(values.ptr()) ? py::reinterpret_borrow<py::list>(values)
                                                     : py::reinterpret_borrow<py::object>(values).cast<py::list>();
    const std::size_t size = items.size();
    if (size != count)
        throw py::value_error(std::string(name) + " has " + std::to_string(size) + " items, expected " + std::to_string(count));
    out.index.reserve(size);
    std::unordered_map<std::string_view, std::uint32_t> by_text;
    std::unordered_map<PyObject*, std::uint32_t> by_object;
    PyObject* last = nullptr;
    std::uint32_t last_code = 0;
    for (std::size_t row = 0; row < size; ++row) {
        PyObject* object = PyList_GET_ITEM(items.ptr(), static_cast<Py_ssize_t>(row));
        if (object != last) {
            auto known = by_object.find(object);
            if (known != by_object.end()) {
                last_code = known->second;
            } else {
                std::string_view text;
                if (PyUnicode_Check(object)) {
                    Py_ssize_t length = 0;
                    const char* utf8 = PyUnicode_AsUTF8AndSize(object, &length);
                    if (!utf8) {
                        PyErr_Clear();
                        throw py::value_error(std::string(name) + " row " + std::to_string(row) + " is not valid Unicode");
                    }
                    text = std::string_view(utf8, static_cast<std::size_t>(length));
                } else if (object != Py_None) {
                    throw py::type_error(std::string(name) + " must be str (or None), got " +
                                         std::string(Py_TYPE(object)->tp_name) + " at row " + std::to_string(row));
                }
                auto [at, added] = by_text.emplace(text, static_cast<std::uint32_t>(out.values.size()));
                if (added) out.values.emplace_back(text);
                last_code = at->second;
                if (by_object.size() < 65536) by_object.emplace(object, last_code);  // bounded: many distinct objects
            }
            last = object;
        }
        out.index.push_back(last_code);
    }
    return out;
}

// A column of n strings as passed by the snapshot loader, without a Python object per value:
//   (offsets, data)   Arrow layout: int32 or int64 offsets (n + 1), uint8 data
//   (indices, values) dictionary: int32 indices (n) into a list of str
// or a list of str / bytes.
std::vector<std::string> column_strings(const py::handle& column, const char* name, std::size_t n) {
    if (!py::isinstance<py::tuple>(column)) return to_strings(column, name, n);
    auto parts = column.cast<py::tuple>();
    if (parts.size() != 2) throw py::value_error(std::string(name) + ": expected (offsets, data) or (indices, values)");
    std::vector<std::string> out(n);
    if (py::isinstance<py::list>(parts[1])) {
        std::vector<std::string> values = to_strings(parts[1], name, py::len(parts[1]));
        auto indices = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>::ensure(parts[0]);
        if (!indices || indices.ndim() != 1 || static_cast<std::size_t>(indices.shape(0)) != n)
            throw py::value_error(std::string(name) + ": dictionary indices must be int32 of length " + std::to_string(n));
        for (std::size_t i = 0; i < n; ++i) {
            std::int32_t at = indices.data()[i];
            if (at < 0 || static_cast<std::size_t>(at) >= values.size())
                throw py::value_error(std::string(name) + ": dictionary index " + std::to_string(at) + " out of range");
            out[i] = values[static_cast<std::size_t>(at)];
        }
        return out;
    }
    auto offsets = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(parts[0]);
    auto data = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>::ensure(parts[1]);
    if (!offsets || !data || offsets.ndim() != 1 || static_cast<std::size_t>(offsets.shape(0)) != n + 1)
        throw py::value_error(std::string(name) + ": offsets must be " + std::to_string(n + 1) + " integers");
    const std::int64_t* o = offsets.data();
    const char* bytes = reinterpret_cast<const char*>(data.data());
    const auto size = static_cast<std::int64_t>(data.size());
    for (std::size_t i = 0; i < n; ++i) {
        if (o[i] < 0 || o[i] > o[i + 1] || o[i + 1] > size)
            throw py::value_error(std::string(name) + ": offsets are not increasing within the data");
        out[i].assign(bytes + o[i], static_cast<std::size_t>(o[i + 1] - o[i]));
    }
    return out;
}

}  // namespace vecgraph::bindings
