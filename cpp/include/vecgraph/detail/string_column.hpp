// A column of strings in one buffer plus offsets: 8 bytes of overhead per row instead of a
// std::string's 32 (and a heap block for every string longer than 15 bytes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vecgraph::detail {

class StringColumn {
  public:
    std::size_t size() const noexcept { return offsets_.size() - 1; }
    std::size_t capacity() const noexcept { return offsets_.capacity() - 1; }
    void reserve(std::size_t rows) { offsets_.reserve(rows + 1); }
    /// A copy with room for `rows` rows (a column grown before a lock is taken, then swapped in).
    StringColumn copy_with_capacity(std::size_t rows) const {
        StringColumn copy;
        copy.offsets_.reserve(std::max(rows, size()) + 1);
        copy.offsets_.assign(offsets_.begin(), offsets_.end());
        copy.bytes_ = bytes_;
        copy.replaced_ = replaced_;
        return copy;
    }
    void push_back(std::string_view value) {
        bytes_.append(value.data(), value.size());
        offsets_.push_back(bytes_.size());
    }
    /// Appends `count` rows: values[0..count), or empty strings when values is nullptr.
    void append(const std::string* values, std::size_t count) {
        if (!values) {
            offsets_.resize(offsets_.size() + count, bytes_.size());
            return;
        }
        std::size_t bytes = bytes_.size();
        for (std::size_t i = 0; i < count; ++i) bytes += values[i].size();
        bytes_.reserve(bytes);
        offsets_.reserve(offsets_.size() + count);
        for (std::size_t i = 0; i < count; ++i) push_back(values[i]);
    }
    /// Replaces one row's value (upserts). The old bytes stay in the buffer until the column is
    /// rebuilt (a snapshot reload); replaced rows live in a side map.
    void set(std::size_t row, std::string_view value) { replaced_[row] = std::string(value); }
    std::string_view operator[](std::size_t row) const noexcept {
        if (!replaced_.empty()) {
            auto it = replaced_.find(row);
            if (it != replaced_.end()) return it->second;
        }
        return std::string_view(bytes_).substr(offsets_[row], offsets_[row + 1] - offsets_[row]);
    }
    std::size_t memory_bytes() const noexcept {
        std::size_t bytes = offsets_.capacity() * sizeof(std::uint64_t) + bytes_.capacity();
        for (const auto& entry : replaced_) bytes += sizeof(entry) + entry.second.capacity() + 2 * sizeof(void*);
        return bytes;
    }

  private:
    std::vector<std::uint64_t> offsets_{0};
    std::string bytes_;
    std::unordered_map<std::size_t, std::string> replaced_;
};

}  // namespace vecgraph::detail
