// Status → Python exception.
#pragma once

#include <pybind11/pybind11.h>

#include "vecgraph/status.hpp"

namespace vecgraph::bindings {

namespace py = pybind11;

/// Raises the exception class of `status` (acquires the GIL if needed). Never returns.
[[noreturn]] void raise_status(const Status& status);

inline void check(const Status& status) {
    if (!status.ok()) raise_status(status);
}

template <typename T>
T unwrap(Result<T>&& result) {
    if (!result.ok()) raise_status(result.status());
    return std::move(result).value();
}

}  // namespace vecgraph::bindings
