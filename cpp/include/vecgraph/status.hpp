// Status and Result<T>: errors are values in the core and become exceptions only at the
// Python edge (python/bindings/bind_errors.cpp maps each code to one exception type).
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace vecgraph {

enum class StatusCode : int {
    ok = 0,
    invalid_argument = 1,    // a value outside its domain (k <= 0, NaN, unknown direction, ...)
    dimension_mismatch = 2,  // a vector of the wrong length
    not_found = 3,           // a key that is not in the graph
    already_exists = 4,      // a key that is already in the graph or repeated in one batch
    corruption = 5,          // damaged data on disk
    io_error = 6,            // the operating system refused a file operation
    read_only = 7,           // a write to a graph that cannot take writes
    internal = 8,            // a broken invariant or an allocation failure
};

class [[nodiscard]] Status {
  public:
    Status() noexcept = default;
    Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

    static Status OK() noexcept { return Status(); }
    static Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
    static Status dimension_mismatch(std::string m) { return {StatusCode::dimension_mismatch, std::move(m)}; }
    static Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
    static Status already_exists(std::string m) { return {StatusCode::already_exists, std::move(m)}; }
    static Status internal(std::string m) { return {StatusCode::internal, std::move(m)}; }
    static Status corruption(std::string m) { return {StatusCode::corruption, std::move(m)}; }
    static Status io_error(std::string m) { return {StatusCode::io_error, std::move(m)}; }
    static Status read_only(std::string m) { return {StatusCode::read_only, std::move(m)}; }

    bool ok() const noexcept { return code_ == StatusCode::ok; }
    StatusCode code() const noexcept { return code_; }
    const std::string& message() const noexcept { return message_; }
    const char* code_name() const noexcept;

  private:
    StatusCode code_ = StatusCode::ok;
    std::string message_;
};

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
    Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

    bool ok() const noexcept { return status_.ok(); }
    const Status& status() const noexcept { return status_; }
    T& value() & { return *value_; }
    T&& value() && { return std::move(*value_); }
    const T& value() const& { return *value_; }

  private:
    Status status_;
    std::optional<T> value_;
};

}  // namespace vecgraph

#define VG_RETURN_IF_ERROR(expr)                 \
    do {                                         \
        ::vecgraph::Status vg_status_ = (expr);  \
        if (!vg_status_.ok()) return vg_status_; \
    } while (0)
