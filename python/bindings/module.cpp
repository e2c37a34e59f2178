// The private extension module vecgraph._core. Users import vecgraph, never _core.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "bind_errors.hpp"
#include "gil.hpp"
#include "ndarray_checks.hpp"
#include "vecgraph/simd/kernels.hpp"
#include "vecgraph/vector_store.hpp"

namespace py = pybind11;

namespace vecgraph::bindings {
void bind_engine(py::module_& m);
void bind_fusion(py::module_& m);
}

namespace {

using namespace vecgraph;

const simd::kernel_table_t& table_or_raise(const std::string& isa) {
    if (isa.empty()) return simd::active();
    const simd::kernel_table_t* table = simd::table_for(isa);
    if (!table) throw py::value_error("ISA '" + isa + "' is not available here; available: " +
                                      py::str(py::cast(simd::available_isas())).cast<std::string>());
    return *table;
}

py::array_t<std::int8_t> check_codes(const py::array& a, const char* name, int ndim) {
    if (!bindings::has_dtype<std::int8_t>(a))
        throw py::type_error(std::string(name) + " must have dtype int8, got " + bindings::dtype_text(a));
    if (a.ndim() != ndim)
        throw py::value_error(std::string(name) + " must be " + std::to_string(ndim) + "-dimensional, got shape " +
                              bindings::shape_text(a));
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous; try np.ascontiguousarray(" + name + ")");
    return py::reinterpret_borrow<py::array_t<std::int8_t>>(a);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "vecgraph C++ core (private; use the vecgraph package)";
    Py_AtExit(&vecgraph::bindings::drain_calls_at_exit);
    vecgraph::bindings::main_thread_ident() =
        py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
    vecgraph::bindings::bind_engine(m);
    vecgraph::bindings::bind_fusion(m);

    m.def("active_isa", [] { return std::string(simd::active_isa()); },
          "Name of the int8 kernel set chosen at start-up.");
    m.def("available_isas", [] { return simd::available_isas(); },
          "Kernel sets this build has and this CPU runs, serial first.");
    m.def(
        "release_free_memory",
        [] {
#if defined(__GLIBC__)
            py::gil_scoped_release released;
            return ::malloc_trim(0) == 1;
#else
            return false;
#endif
        },
        "Returns the C heap's free pages to the operating system (glibc's malloc_trim); True when "
        "some were. A large batch's freed temporaries otherwise stay in the process's RSS.");

    m.def(
        "dot_rows_i8",
        [](const py::array& query, const py::array& base, const py::array& rows, const std::string& isa) {
            auto q = check_codes(query, "query", 1);
            auto b = check_codes(base, "base", 2);
            if (b.shape(1) != q.shape(0))
                bindings::raise_dimension_mismatch("query has dim " + std::to_string(q.shape(0)) + ", base rows have dim " +
                                                   std::to_string(b.shape(1)));
            auto r = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(rows);
            if (!r || r.ndim() != 1) throw py::type_error("rows must be a 1-d array of row indices");
            for (py::ssize_t i = 0; i < r.size(); ++i)
                if (r.data()[i] >= static_cast<std::uint32_t>(b.shape(0)))
                    throw py::index_error("row index " + std::to_string(r.data()[i]) + " out of range for " +
                                          std::to_string(b.shape(0)) + " rows");
            const simd::kernel_table_t& table = table_or_raise(isa);
            py::array_t<std::int32_t> out(r.size());
            {
                bindings::GilRelease release;
                table.dot_rows_i8(q.data(), b.data(), static_cast<std::size_t>(b.shape(1)), r.data(),
                                  static_cast<std::size_t>(r.size()), static_cast<std::size_t>(q.shape(0)),
                                  out.mutable_data());
            }
            return out;
        },
        py::arg("query"), py::arg("base"), py::arg("rows"), py::arg("isa") = "",
        "int32 dot products of an int8 query with gathered rows of an int8 (n, dim) table.");

    m.def(
        "scan_i8",
        [](const py::array& query, const py::array& base, const std::string& isa) {
            auto q = check_codes(query, "query", 1);
            auto b = check_codes(base, "base", 2);
            if (b.shape(1) != q.shape(0))
                bindings::raise_dimension_mismatch("query has dim " + std::to_string(q.shape(0)) + ", base rows have dim " +
                                                   std::to_string(b.shape(1)));
            const simd::kernel_table_t& table = table_or_raise(isa);
            py::array_t<std::int32_t> out(b.shape(0));
            {
                bindings::GilRelease release;
                table.scan_i8(q.data(), b.data(), static_cast<std::size_t>(b.shape(1)), static_cast<std::size_t>(b.shape(0)),
                              static_cast<std::size_t>(q.shape(0)), out.mutable_data());
            }
            return out;
        },
        py::arg("query"), py::arg("base"), py::arg("isa") = "",
        "int32 dot products of an int8 query with every row of an int8 (n, dim) table.");

    m.def(
        "quantize",
        [](const py::array& vectors, const std::string& metric_text) {
            Metric metric;
            if (!parse_metric(metric_text, &metric))
                bindings::raise_status(Status::invalid_argument("metric must be 'cos', 'ip' or 'l2', got '" + metric_text + "'"));
            if (vectors.ndim() != 2) throw py::value_error("vectors must be 2-dimensional, got shape " + bindings::shape_text(vectors));
            auto dim = static_cast<std::size_t>(vectors.shape(1));
            auto v = bindings::check_float_array(vectors, "vectors", 2, dim);
            auto n = static_cast<std::size_t>(v.shape(0));
            for (std::size_t i = 0; i < n; ++i)
                bindings::check(validate_vector(v.data() + i * dim, dim, metric, "vectors", i));
            py::array_t<std::int8_t> codes({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(dim)});
            py::array_t<float> scales(static_cast<py::ssize_t>(n));
            float sq_norm;
            for (std::size_t i = 0; i < n; ++i)
                quantize_vector(v.data() + i * dim, dim, metric, codes.mutable_data() + i * dim, scales.mutable_data() + i,
                                &sq_norm);
            return py::make_tuple(codes, scales);
        },
        py::arg("vectors"), py::arg("metric"), "Quantize (n, dim) float32 vectors to int8 codes and float32 scales.");
}
