// Enum names and the key encoding (types.hpp).
#include "vecgraph/types.hpp"

#include <cstring>

namespace vecgraph {

const char* metric_name(Metric metric) noexcept {
    switch (metric) {
        case Metric::cos: return "cos";
        case Metric::ip: return "ip";
        case Metric::l2: return "l2";
    }
    return "?";
}

const char* prop_type_name(PropType type) noexcept {
    switch (type) {
        case PropType::str: return "str";
        case PropType::int64: return "int64";
        case PropType::float64: return "float64";
        case PropType::timestamp: return "timestamp";
    }
    return "?";
}

bool parse_prop_type(std::string_view name, PropType* type) noexcept {
    if (name == "str") *type = PropType::str;
    else if (name == "int64") *type = PropType::int64;
    else if (name == "float64") *type = PropType::float64;
    else if (name == "timestamp") *type = PropType::timestamp;
    else return false;
    return true;
}

bool parse_metric(std::string_view name, Metric* metric) noexcept {
    if (name == "cos") *metric = Metric::cos;
    else if (name == "ip") *metric = Metric::ip;
    else if (name == "l2") *metric = Metric::l2;
    else return false;
    return true;
}

const char* direction_name(Direction direction) noexcept {
    switch (direction) {
        case Direction::out: return "out";
        case Direction::in: return "in";
        case Direction::both: return "both";
    }
    return "?";
}

bool parse_direction(std::string_view name, Direction* direction) noexcept {
    if (name == "out") *direction = Direction::out;
    else if (name == "in") *direction = Direction::in;
    else if (name == "both") *direction = Direction::both;
    else return false;
    return true;
}

std::string encode_text_key(std::string_view utf8) {
    std::string key;
    key.reserve(utf8.size() + 1);
    key.push_back(key_tag_text);
    key.append(utf8);
    return key;
}

std::string encode_int_key(std::int64_t value) {
    char key[9];
    return std::string(encode_int_key(value, key));
}

std::string display_key(std::string_view encoded) {
    if (encoded.size() == 9 && encoded[0] == key_tag_int) {
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits |= static_cast<std::uint64_t>(static_cast<unsigned char>(encoded[1 + i])) << (8 * i);
        return std::to_string(static_cast<std::int64_t>(bits));
    }
    if (!encoded.empty() && encoded[0] == key_tag_text) return "'" + std::string(encoded.substr(1)) + "'";
    return "<malformed key>";
}

}  // namespace vecgraph
