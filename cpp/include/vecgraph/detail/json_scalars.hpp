// Reads the top-level scalar members of a JSON object (RFC 8259), for the filterable
// properties the engine keeps in typed columns. Nested objects and arrays are skipped (they
// are never filter values); anything that is not a well-formed object yields no members.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace vecgraph::detail {

struct JsonScalar {
    enum class Kind : std::uint8_t { string, integer, real, boolean, null, other } kind = Kind::null;
    std::string text;         // kind == string: the decoded UTF-8 value
    std::int64_t integer = 0; // kind == integer (an integer literal that fits int64), or boolean (0 / 1)
    double real = 0;          // kind == real, integer: the value as a double
};

/// Calls `visit(name, value)` for each member of the top-level object in `json`, in order.
/// Returns false (after visiting the members read so far) when `json` is not a well-formed
/// JSON object; an empty string is an object without members.
bool for_each_top_level_scalar(std::string_view json,
                               const std::function<void(const std::string& name, const JsonScalar& value)>& visit);

}  // namespace vecgraph::detail
