// Names of status codes, for messages and logs.
#include "vecgraph/status.hpp"

namespace vecgraph {

const char* Status::code_name() const noexcept {
    switch (code_) {
        case StatusCode::ok: return "ok";
        case StatusCode::invalid_argument: return "invalid_argument";
        case StatusCode::dimension_mismatch: return "dimension_mismatch";
        case StatusCode::not_found: return "not_found";
        case StatusCode::already_exists: return "already_exists";
        case StatusCode::corruption: return "corruption";
        case StatusCode::io_error: return "io_error";
        case StatusCode::read_only: return "read_only";
        case StatusCode::internal: return "internal";
    }
    return "unknown";
}

}  // namespace vecgraph
