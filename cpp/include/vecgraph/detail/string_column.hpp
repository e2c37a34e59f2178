// A column of strings in one buffer plus offsets: 8 bytes of overhead per row instead of a
// std::string's 32 (and a heap block for every string longer than 15 bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vecgraph::detail {

class StringColumn {
  public:
    std::size_t size() const noexcept { return offsets_.size() - 1; }
    std::size_t capacity() const noexcept { return offsets_.capacity() - 1; }
    void reserve(std::size_t rows) { offsets_.reserve(rows + 1); }
    void push_back(std::string_view value) {
        bytes_.append(value.data(), value.size());
        offsets_.push_back(bytes_.size());
    }
    std::string_view operator[](std::size_t row) const noexcept {
        return std::string_view(bytes_).substr(offsets_[row], offsets_[row + 1] - offsets_[row]);
    }
    std::size_t memory_bytes() const noexcept { return offsets_.capacity() * sizeof(std::uint64_t) + bytes_.capacity(); }

  private:
    std::vector<std::uint64_t> offsets_{0};
    std::string bytes_;
};

}  // namespace vecgraph::detail
