// Top-level JSON scalars (see json_scalars.hpp): a recursive-descent reader of RFC 8259 that
// decodes strings (escapes and surrogate pairs to UTF-8) and numbers, and skips nested values.
#include "vecgraph/detail/json_scalars.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace vecgraph::detail {

namespace {

class Reader {
  public:
    explicit Reader(std::string_view text) : s_(text) {}

    void space() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    }
    bool eat(char c) {
        space();
        if (i_ < s_.size() && s_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }
    bool at_end() {
        space();
        return i_ == s_.size();
    }
    char peek() {
        space();
        return i_ < s_.size() ? s_[i_] : '\0';
    }

    bool string(std::string* out) {
        if (!eat('"')) return false;
        if (out) out->clear();
        while (i_ < s_.size()) {
            char c = s_[i_++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return false;
            if (c != '\\') {
                if (out) out->push_back(c);
                continue;
            }
            if (i_ >= s_.size()) return false;
            char e = s_[i_++];
            char plain = 0;
            switch (e) {
                case '"': plain = '"'; break;
                case '\\': plain = '\\'; break;
                case '/': plain = '/'; break;
                case 'b': plain = '\b'; break;
                case 'f': plain = '\f'; break;
                case 'n': plain = '\n'; break;
                case 'r': plain = '\r'; break;
                case 't': plain = '\t'; break;
                case 'u': {
                    std::uint32_t code;
                    if (!hex4(&code)) return false;
                    if (code >= 0xD800 && code <= 0xDBFF) {  // a high surrogate needs its low half
                        std::uint32_t low;
                        if (i_ + 1 >= s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') return false;
                        i_ += 2;
                        if (!hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    } else if (code >= 0xDC00 && code <= 0xDFFF) {
                        return false;
                    }
                    if (out) utf8(code, out);
                    continue;
                }
                default: return false;
            }
            if (out) out->push_back(plain);
        }
        return false;
    }

    bool value(JsonScalar* out) {
        char c = peek();
        if (c == '"') {
            out->kind = JsonScalar::Kind::string;
            return string(&out->text);
        }
        if (c == '{' || c == '[') {
            out->kind = JsonScalar::Kind::other;
            return skip_container();
        }
        if (literal("true")) return out->kind = JsonScalar::Kind::boolean, out->integer = 1, out->real = 1, true;
        if (literal("false")) return out->kind = JsonScalar::Kind::boolean, out->integer = 0, out->real = 0, true;
        if (literal("null")) return out->kind = JsonScalar::Kind::null, true;
        return number(out);
    }

  private:
    bool hex4(std::uint32_t* code) {
        if (i_ + 4 > s_.size()) return false;
        *code = 0;
        for (int k = 0; k < 4; ++k) {
            char h = s_[i_++];
            std::uint32_t d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 16;
            if (d == 16) return false;
            *code = *code * 16 + d;
        }
        return true;
    }
    static void utf8(std::uint32_t code, std::string* out) {
        if (code < 0x80) {
            out->push_back(static_cast<char>(code));
        } else if (code < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (code >> 6)));
            out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
        } else if (code < 0x10000) {
            out->push_back(static_cast<char>(0xE0 | (code >> 12)));
            out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
        } else {
            out->push_back(static_cast<char>(0xF0 | (code >> 18)));
            out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
        }
    }
    bool literal(std::string_view word) {
        space();
        if (s_.substr(i_, word.size()) != word) return false;
        i_ += word.size();
        return true;
    }
    // number = [ "-" ] int [ frac ] [ exp ] (RFC 8259 section 6)
    bool number(JsonScalar* out) {
        space();
        std::size_t start = i_;
        bool integral = true;
        if (i_ < s_.size() && s_[i_] == '-') ++i_;
        if (i_ >= s_.size()) return false;
        if (s_[i_] == '0') {
            ++i_;
        } else if (s_[i_] >= '1' && s_[i_] <= '9') {
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        } else {
            return false;
        }
        if (i_ < s_.size() && s_[i_] == '.') {
            integral = false;
            ++i_;
            std::size_t digits = i_;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
            if (i_ == digits) return false;
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            integral = false;
            ++i_;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
            std::size_t digits = i_;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
            if (i_ == digits) return false;
        }
        std::string literal(s_.substr(start, i_ - start));
        out->real = std::strtod(literal.c_str(), nullptr);
        out->kind = JsonScalar::Kind::real;
        if (integral) {
            errno = 0;
            long long v = std::strtoll(literal.c_str(), nullptr, 10);
            if (errno != ERANGE) {
                out->kind = JsonScalar::Kind::integer;
                out->integer = v;
            }
        }
        return true;
    }
    bool skip_container() {
        // Nested values only need to be well formed; strings are read so brackets inside them
        // do not count.
        int depth = 0;
        do {
            char c = peek();
            if (c == '"') {
                if (!string(nullptr)) return false;
                continue;
            }
            if (c == '\0') return false;
            ++i_;
            if (c == '{' || c == '[') ++depth;
            else if (c == '}' || c == ']') --depth;
        } while (depth > 0);
        return true;
    }

    std::string_view s_;
    std::size_t i_ = 0;
};

}  // namespace

bool for_each_top_level_scalar(std::string_view json,
                               const std::function<void(const std::string& name, const JsonScalar& value)>& visit) {
    Reader in(json);
    if (in.at_end()) return true;
    if (!in.eat('{')) return false;
    if (in.eat('}')) return in.at_end();
    std::string name;
    JsonScalar value;
    do {
        if (!in.string(&name) || !in.eat(':') || !in.value(&value)) return false;
        visit(name, value);
    } while (in.eat(','));
    return in.eat('}') && in.at_end();
}

}  // namespace vecgraph::detail
