// Identifiers, enums and the key encoding shared by every part of the core.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace vecgraph {

/// Dense internal ids; keys, not ids, cross the public API.
using node_id_t = std::uint32_t;
using edge_id_t = std::uint32_t;
using rel_id_t = std::uint32_t;     // interned relation type
using label_id_t = std::uint32_t;   // interned node label
using tenant_id_t = std::uint32_t;  // interned tenant ("" is tenant 0)

constexpr std::uint32_t invalid_id = std::numeric_limits<std::uint32_t>::max();
/// Ids stop one short of invalid_id.
constexpr std::size_t max_count_nodes = invalid_id - 1;

/// Similarity measure. Scores are "higher is more similar" for all three:
///   cos: dot(q, v) of unit vectors;  ip: dot(q, v);  l2: -||q - v||^2.
enum class Metric : std::uint8_t { cos = 0, ip = 1, l2 = 2 };

/// Type of a filterable node property (declared when a graph is created; kept in a typed
/// column the filters read, from the node's props JSON).
enum class PropType : std::uint8_t { str = 0, int64 = 1, float64 = 2, timestamp = 3 };

const char* prop_type_name(PropType type) noexcept;  // "str", "int64", "float64", "timestamp"
bool parse_prop_type(std::string_view name, PropType* type) noexcept;

struct PropSpec {
    std::string name;
    PropType type = PropType::str;
};

/// Which way traversal follows directed edges from the node being expanded.
enum class Direction : std::uint8_t { out = 0, in = 1, both = 2 };

const char* metric_name(Metric metric) noexcept;
bool parse_metric(std::string_view name, Metric* metric) noexcept;
const char* direction_name(Direction direction) noexcept;
bool parse_direction(std::string_view name, Direction* direction) noexcept;

// Keys are opaque byte strings to the core, tagged by their first byte so that a str key
// and an int key never collide:
//   's' + UTF-8 bytes          a text key
//   'i' + 8 bytes, int64 LE    an integer key
constexpr char key_tag_text = 's';
constexpr char key_tag_int = 'i';

std::string encode_text_key(std::string_view utf8);
std::string encode_int_key(std::int64_t value);
/// encode_int_key into `out` (9 bytes), without an allocation; returns a view of `out`.
inline std::string_view encode_int_key(std::int64_t value, char (&out)[9]) noexcept {
    out[0] = key_tag_int;
    const auto bits = static_cast<std::uint64_t>(value);
    for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>((bits >> (8 * i)) & 0xff);
    return std::string_view(out, sizeof(out));
}
/// A key for messages: 'alice' for text keys, 42 for integer keys.
std::string display_key(std::string_view encoded);

}  // namespace vecgraph
