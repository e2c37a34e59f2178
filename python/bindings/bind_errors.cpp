// The one place where core Status codes become Python exceptions (vecgraph/errors.py).
#include "bind_errors.hpp"

namespace vecgraph::bindings {

namespace {

py::object error_class(const char* name) {
    // Imported on first use: vecgraph.errors is plain Python and does not import _core.
    // Deliberately leaked: a static py::object would be released after the interpreter ends.
    static py::object* errors = new py::object(py::module_::import("vecgraph.errors"));
    return errors->attr(name);
}

const char* class_for(StatusCode code) {
    switch (code) {
        case StatusCode::invalid_argument: return "InvalidArgumentError";
        case StatusCode::dimension_mismatch: return "DimensionMismatchError";
        case StatusCode::not_found: return "NotFoundError";
        case StatusCode::already_exists: return "DuplicateKeyError";
        case StatusCode::corruption: return "CorruptionError";
        case StatusCode::io_error: return "StorageError";
        case StatusCode::read_only: return "ReadOnlyError";
        default: return "Error";
    }
}

}  // namespace

void raise_status(const Status& status) {
    py::gil_scoped_acquire gil;
    PyErr_SetString(error_class(class_for(status.code())).ptr(), status.message().c_str());
    throw py::error_already_set();
}

[[noreturn]] void raise_dimension_mismatch(const std::string& message) {
    raise_status(Status::dimension_mismatch(message));
}

}  // namespace vecgraph::bindings
