// Top-level JSON scalars: decoded strings (escapes, surrogate pairs), integers and reals,
// nested values skipped, malformed objects rejected.
#include <map>
#include <string>

#include "check.hpp"
#include "vecgraph/detail/json_scalars.hpp"

using vecgraph::detail::for_each_top_level_scalar;
using vecgraph::detail::JsonScalar;

namespace {

std::map<std::string, JsonScalar> read(const std::string& json, bool* ok) {
    std::map<std::string, JsonScalar> out;
    *ok = for_each_top_level_scalar(json, [&](const std::string& name, const JsonScalar& v) { out[name] = v; });
    return out;
}

}  // namespace

TEST_CASE("strings are decoded, escapes and surrogate pairs included") {
    bool ok = false;
    auto m = read(R"({"a": "x\"y\\z\/\n\t", "b": "\u00e9\u4e2d\ud83d\ude00", "c": "é中"})", &ok);
    CHECK(ok);
    CHECK(m["a"].kind == JsonScalar::Kind::string);
    CHECK(m["a"].text == "x\"y\\z/\n\t");
    CHECK(m["b"].text == "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
    CHECK(m["c"].text == m["b"].text.substr(0, 5));
}

TEST_CASE("numbers, booleans and null") {
    bool ok = false;
    auto m = read(R"({"i": -42, "big": 9223372036854775807, "over": 9223372036854775808, "r": 2.5e3, "t": true, "f": false, "n": null})", &ok);
    CHECK(ok);
    CHECK(m["i"].kind == JsonScalar::Kind::integer && m["i"].integer == -42);
    CHECK(m["big"].kind == JsonScalar::Kind::integer && m["big"].integer == INT64_MAX);
    CHECK(m["over"].kind == JsonScalar::Kind::real);
    CHECK(m["r"].kind == JsonScalar::Kind::real && m["r"].real == 2500.0);
    CHECK(m["t"].kind == JsonScalar::Kind::boolean && m["t"].integer == 1);
    CHECK(m["f"].kind == JsonScalar::Kind::boolean && m["f"].integer == 0);
    CHECK(m["n"].kind == JsonScalar::Kind::null);
}

TEST_CASE("nested values are skipped, brackets inside their strings included") {
    bool ok = false;
    auto m = read(R"({"o": {"k": "}]", "l": [1, {"x": "["}]}, "after": 7})", &ok);
    CHECK(ok);
    CHECK(m["o"].kind == JsonScalar::Kind::other);
    CHECK(m["after"].integer == 7);
}

TEST_CASE("empty text is an object without members; malformed input is rejected") {
    bool ok = false;
    CHECK(read("", &ok).empty() && ok);
    CHECK(read("{}", &ok).empty() && ok);
    for (const char* bad : {"[1]", "{", R"({"a": 1,})", R"({"a" 1})", R"({"a": tru})", R"({"a": "\ud83d"})",
                            R"({"a": 01})", R"({"a": 1.})", "{\"a\": \"\x01\"}", R"({"a": 1} x)"}) {
        read(bad, &ok);
        CHECK(!ok);
    }
}

TEST_MAIN()
