// Argument checks for NumPy inputs: dtype, rank, shape and contiguity, each with a message
// that names what was expected, what came, and the fix. Raised as TypeError / ValueError
// (DimensionMismatchError for a wrong vector length).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vecgraph::bindings {

namespace py = pybind11;

[[noreturn]] void raise_dimension_mismatch(const std::string& message);

inline std::string shape_text(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
    return s + (a.ndim() == 1 ? ",)" : ")");
}

inline std::string dtype_text(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

/// `a` holds T in native byte order. An equivalent dtype object counts, not only NumPy's
/// canonical one: an array that went through pickle (multiprocessing, joblib) carries a dtype
/// equal to float32 that is a different object.
template <typename T>
inline bool has_dtype(const py::array& a) {
    const py::dtype want = py::dtype::of<T>();
    const py::dtype got = a.dtype();
    return got.is(want) || py::detail::npy_api::get().PyArray_EquivTypes_(got.ptr(), want.ptr());
}

/// A C-contiguous float32 array of rank `ndim` whose last axis is `dim` (any leading size).
inline py::array_t<float> check_float_array(const py::array& a, const char* name, int ndim, std::size_t dim) {
    if (!has_dtype<float>(a))
        throw py::type_error(std::string(name) + " must have dtype float32, got " + dtype_text(a) +
                             "; convert with np.asarray(" + name + ", dtype=np.float32)");
    if (a.ndim() != ndim)
        throw py::value_error(std::string(name) + " must be " + std::to_string(ndim) + "-dimensional, got shape " +
                              shape_text(a));
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous; try np.ascontiguousarray(" + name + ")");
    auto last = static_cast<std::size_t>(a.shape(ndim - 1));
    if (last != dim)
        raise_dimension_mismatch(std::string(name) + " has dim " + std::to_string(last) + ", graph has dim " +
                                 std::to_string(dim));
    return py::reinterpret_borrow<py::array_t<float>>(a);
}

template <typename T>
inline py::array_t<T> check_1d(const py::array& a, const char* name, const char* dtype_name, std::size_t count) {
    if (!has_dtype<T>(a))
        throw py::type_error(std::string(name) + " must have dtype " + dtype_name + ", got " + dtype_text(a));
    if (a.ndim() != 1 || static_cast<std::size_t>(a.shape(0)) != count)
        throw py::value_error(std::string(name) + " must have shape (" + std::to_string(count) + ",), got " +
                              shape_text(a));
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous; try np.ascontiguousarray(" + name + ")");
    return py::reinterpret_borrow<py::array_t<T>>(a);
}

}  // namespace vecgraph::bindings
