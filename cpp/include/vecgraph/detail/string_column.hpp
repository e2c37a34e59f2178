// A column of strings in one buffer plus offsets: 8 bytes of overhead per row instead of a
// std::string's 32 (and a heap block for every string longer than 15 bytes). A column whose
// rows are all empty (no texts, no props: 5,000,000 edges without either are 80 MB of offsets
// in two columns) holds only its row count until its first non-empty value.
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
    std::size_t size() const noexcept { return rows_; }
    /// Rows it holds without allocating more offsets. An all-empty column's room is what was
    /// asked for (reserve, copy_with_capacity): empty rows need none, and its first non-empty
    /// value allocates the offsets for that room (the engine does it in a copy before its lock,
    /// see materialize()).
    std::size_t capacity() const noexcept {
        return offsets_.empty() ? std::max(rows_, reserved_rows_) : offsets_.capacity() - 1;
    }
    /// False while every row is empty (no offsets held).
    bool materialized() const noexcept { return !offsets_.empty(); }
    /// Gives an all-empty column its offsets (all 0) with room for capacity() rows, so that
    /// non-empty values appended up to that room do not allocate offsets.
    void materialize() {
        if (offsets_.empty()) materialize(rows_);
    }
    void reserve(std::size_t rows) {
        if (offsets_.empty()) reserved_rows_ = std::max(reserved_rows_, rows);
        else offsets_.reserve(rows + 1);
    }
    /// A copy with room for `rows` rows (a column grown before a lock is taken, then swapped in).
    StringColumn copy_with_capacity(std::size_t rows) const {
        StringColumn copy;
        copy.rows_ = rows_;
        copy.reserved_rows_ = std::max(rows, rows_);
        if (!offsets_.empty()) {
            copy.offsets_.reserve(copy.reserved_rows_ + 1);
            copy.offsets_.assign(offsets_.begin(), offsets_.end());
        }
        copy.bytes_ = bytes_;
        copy.replaced_ = replaced_;
        return copy;
    }
    void push_back(std::string_view value) {
        if (offsets_.empty()) {
            if (value.empty()) {
                ++rows_;
                return;
            }
            materialize(rows_ + 1);
        }
        bytes_.append(value.data(), value.size());
        offsets_.push_back(bytes_.size());
        ++rows_;
    }
    /// Appends `count` rows: values[0..count), or empty strings when values is nullptr.
    void append(const std::string* values, std::size_t count) {
        const bool all_empty = !values || std::all_of(values, values + count, [](const std::string& v) { return v.empty(); });
        if (all_empty) {
            if (!offsets_.empty()) offsets_.resize(offsets_.size() + count, bytes_.size());
            rows_ += count;
            return;
        }
        std::size_t bytes = bytes_.size();
        for (std::size_t i = 0; i < count; ++i) bytes += values[i].size();
        if (offsets_.empty()) materialize(rows_ + count);
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
        if (offsets_.empty()) return {};
        return std::string_view(bytes_).substr(offsets_[row], offsets_[row + 1] - offsets_[row]);
    }
    std::size_t memory_bytes() const noexcept {
        std::size_t bytes = offsets_.capacity() * sizeof(std::uint64_t) + bytes_.capacity();
        for (const auto& entry : replaced_) bytes += sizeof(entry) + entry.second.capacity() + 2 * sizeof(void*);
        return bytes;
    }

  private:
    // Gives the all-empty rows their offsets (all 0), with room for `rows` rows (or the room
    // asked for, when more).
    void materialize(std::size_t rows) {
        offsets_.reserve(std::max(rows, reserved_rows_) + 1);
        offsets_.assign(rows_ + 1, 0);
    }

    std::size_t rows_ = 0;
    std::size_t reserved_rows_ = 0;         // room asked for while all rows are empty
    std::vector<std::uint64_t> offsets_;  // rows_ + 1 entries; none while every row is empty
    std::string bytes_;
    std::unordered_map<std::size_t, std::string> replaced_;
};

}  // namespace vecgraph::detail
