// Payloads of the WAL records the engine writes (the frame around them: wal_format.hpp).
//
// Little-endian throughout. str = u32 byte length + UTF-8 bytes (keys: the encoded key bytes of
// types.hpp). row = one quantized vector in the vector store's row layout (vector_store.hpp):
// f32 scale, f32 squared norm, dim int8 codes, zero padding to 4 bytes; `stride` bytes in all.
//
//   add_nodes (1), upsert_nodes (3), update_nodes (9: the nodes' rows after an update that kept
//   their vectors; applied as upsert_nodes, without indexing them in HNSW again):
//     u32 count, u32 dim, u32 stride,
//     count x { str key, str label, str tenant, i64 ts, str text, str props, row }
//   add_edges (2):
//     u32 count, u32 dim, u32 stride, u8 has_vectors,
//     count x { str src, str dst, str rel, f32 weight, i64 ts, str text, str props,
//               u8 has_vector, row if has_vector }
//   delete_nodes (4):   u32 count, count x str key
//   delete_edges (5):   u32 count, u8 has_rels, count x { str src, str dst, str rel if has_rels }
//   delete_tenant (6):  str tenant
//   set_aliases (8):    u32 count, count x { str key, str aliases }   (aliases: opaque to the core;
//                       the Python facade stores the list joined by U+001F)
//
// Vectors are logged quantized, so replay rebuilds bit-identical rows without re-quantizing.
// Deletes are logged by key (not by internal id), so they replay correctly on a graph loaded
// from a snapshot, where ids are renumbered. Every payload is checked on replay exactly like
// the call that wrote it; a payload that fails the check is reported as corruption.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "vecgraph/status.hpp"

namespace vecgraph::wal {

/// Appends little-endian values to a payload. A writer made with `counting` only counts the
/// bytes it would append (size()): encoding twice, first counting, lets the payload of a large
/// batch be allocated once instead of grown (and copied) by doubling. Values are copied to a
/// cursor in that allocation (a field of a large batch costs a memcpy, not a string append).
class PayloadWriter {
  public:
    PayloadWriter() = default;
    explicit PayloadWriter(bool counting) : counting_(counting) {}
    void reserve(std::size_t bytes) {
        if (bytes > capacity_) regrow(bytes);
    }
    std::size_t size() const noexcept { return used_; }
    void u8(std::uint8_t v) { raw(&v, 1); }
    void u32(std::uint32_t v) { raw(&v, 4); }
    void i64(std::int64_t v) { raw(&v, 8); }
    void f32(float v) { raw(&v, 4); }
    void str(std::string_view v) {
        u32(static_cast<std::uint32_t>(v.size()));
        raw(v.data(), v.size());
    }
    void bytes(const void* data, std::size_t size) { raw(data, size); }
    /// The bytes appended so far.
    std::string_view payload() const noexcept { return std::string_view(out_.get(), used_); }

  private:
    void raw(const void* v, std::size_t size) {  // the engine only builds for little-endian targets
        if (!counting_) {
            if (size > capacity_ - used_) regrow(std::max(2 * capacity_, used_ + size));
            if (size) std::memcpy(out_.get() + used_, v, size);
        }
        used_ += size;
    }
    void regrow(std::size_t capacity) {  // uninitialised: every byte up to used_ is written before it is read
        std::unique_ptr<char[]> grown(new char[capacity]);
        if (used_) std::memcpy(grown.get(), out_.get(), used_);
        out_ = std::move(grown);
        capacity_ = capacity;
    }
    bool counting_ = false;
    std::size_t used_ = 0, capacity_ = 0;
    std::unique_ptr<char[]> out_;
};

/// Reads a payload; every read is bounds-checked and a short payload sets failed().
class PayloadReader {
  public:
    explicit PayloadReader(std::string_view payload) : in_(payload) {}
    bool failed() const noexcept { return failed_; }
    bool done() const noexcept { return pos_ == in_.size(); }
    std::size_t remaining() const noexcept { return in_.size() - pos_; }
    std::uint8_t u8() { return take<std::uint8_t>(); }
    std::uint32_t u32() { return take<std::uint32_t>(); }
    std::int64_t i64() { return take<std::int64_t>(); }
    float f32() { return take<float>(); }
    std::string str() {
        std::uint32_t size = u32();
        if (failed_ || size > remaining()) return fail(), std::string();
        std::string value(in_.data() + pos_, size);
        pos_ += size;
        return value;
    }
    const char* bytes(std::size_t size) {
        if (failed_ || size > remaining()) return fail(), nullptr;
        const char* data = in_.data() + pos_;
        pos_ += size;
        return data;
    }

  private:
    void fail() noexcept { failed_ = true; }
    template <typename T>
    T take() {
        T value{};
        if (failed_ || sizeof(T) > remaining()) return fail(), value;
        std::memcpy(&value, in_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }
    std::string_view in_;
    std::size_t pos_ = 0;
    bool failed_ = false;
};

}  // namespace vecgraph::wal
