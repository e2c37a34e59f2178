// int8 vector store: one row of `dim` int8 codes and one float32 scale per vector.
//
// Quantization (symmetric, per vector):
//   cos: x is first divided by its L2 norm (computed in double);
//   scale = max_i |x_i| / 127   (float32),   code_i = clamp(rint(x_i * (127 / max_i |x_i|)), -127, 127)
// so codes span [-127, 127]; nothing wraps, and the dequantized vector is code * scale.
// An all-zero vector has scale 0 and all-zero codes (rejected under cos, which needs a norm).
//
// Scores are computed from the exact int32 dot product of codes, in float32:
//   ip:  score = float(dot) * (scale_q * scale_v)
//   cos: score = float(dot) * (scale_q * scale_v) / sqrt(sq_norm_q * sq_norm_v)
//   l2:  score = -((sq_norm_q + sq_norm_v) - 2 * float(dot) * (scale_q * scale_v))
// where sq_norm = float(sum code_i^2) * scale * scale, the squared norm of the dequantized vector
// (under cos, the cosine of the dequantized vectors).
#pragma once

#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vecgraph/detail/huge_pages.hpp"
#include "vecgraph/status.hpp"
#include "vecgraph/types.hpp"

namespace vecgraph {

/// A quantized vector that is not (or not yet) in a store: a query, or a row being added.
struct QuantizedVector {
    std::vector<std::int8_t> codes;
    float scale = 0.f;
    float sq_norm = 0.f;
};

/// Checks a float vector for NaN/inf and (under cos) a zero norm. `what` names it in messages.
Status validate_vector(const float* x, std::size_t dim, Metric metric, const char* what, std::size_t row);

/// Quantizes one validated float vector into `codes` (dim bytes); returns scale and sq_norm.
void quantize_vector(const float* x, std::size_t dim, Metric metric, std::int8_t* codes, float* scale,
                     float* sq_norm) noexcept;

/// Score of a query against a stored row, from their exact int32 dot product (see header comment).
inline float score_from_dot(Metric metric, std::int32_t dot, float scale_q, float sq_norm_q, float scale_v,
                            float sq_norm_v) noexcept {
    float product = static_cast<float>(dot) * (scale_q * scale_v);
    if (metric == Metric::l2) return -((sq_norm_q + sq_norm_v) - 2.f * product);
    // The cosine of the two decoded vectors: rounding to int8 moves a unit vector's norm by
    // about 0.05% (up to 0.2%), more than the cosines inside a tight cluster differ, so the
    // product alone would rank by rounding noise.
    if (metric == Metric::cos) return product / std::sqrt(sq_norm_q * sq_norm_v);
    return product;
}

class VectorStore {
  public:
    // Row layout: [scale f32][sq_norm f32][dim int8 codes][pad to 4 bytes]. The scale sits in the
    // same cache line as the first codes, so scoring a random row costs one memory miss, not three.
    static constexpr std::size_t header_bytes = 2 * sizeof(float);

    VectorStore(std::size_t dim, Metric metric)
        : dim_(dim), metric_(metric), stride_(header_bytes + (dim + 3) / 4 * 4) {}

    std::size_t dim() const noexcept { return dim_; }
    Metric metric() const noexcept { return metric_; }
    std::size_t size() const noexcept { return count_; }
    /// Distance in bytes between the codes of consecutive rows.
    std::size_t stride_bytes() const noexcept { return stride_; }

    /// Codes of row 0; row r's codes start at codes_data() + r * stride_bytes().
    const std::int8_t* codes_data() const noexcept { return rows_.data() + header_bytes; }
    const std::int8_t* codes(std::size_t row) const noexcept { return rows_.data() + row * stride_ + header_bytes; }
    float scale(std::size_t row) const noexcept { return header_float(row, 0); }
    float sq_norm(std::size_t row) const noexcept { return header_float(row, 1); }

    /// Validates every row of a row-major (count, dim) float32 batch; changes nothing.
    Status validate(const float* rows, std::size_t count, const char* what) const;

    /// Appends a validated batch, quantizing it with up to `threads` threads.
    void append(const float* rows, std::size_t count, std::size_t threads);
    /// Quantizes a validated batch into `out` as `count` rows of stride_bytes() each (the
    /// store's row layout), with up to `threads` threads.
    void quantize_rows(const float* rows, std::size_t count, std::size_t threads, std::int8_t* out) const;
    /// Appends `count` rows already in the store's layout (from quantize_rows, a log or a snapshot).
    void append_rows(const std::int8_t* rows, std::size_t count);
    /// Replaces one row with a row in the store's layout.
    void set_row(std::size_t row, const std::int8_t* data) noexcept {
        std::memcpy(rows_.data() + row * stride_, data, stride_);
    }
    /// Row `row` in the store's layout (stride_bytes() bytes).
    const std::int8_t* row_data(std::size_t row) const noexcept { return rows_.data() + row * stride_; }
    /// Checks rows in the store's layout (from a log or a snapshot): finite scale and squared
    /// norm, zero padding; `what` names them in messages.
    Status validate_rows(const std::int8_t* rows, std::size_t count, const char* what) const;

    /// Quantizes a query (validate it first).
    QuantizedVector quantize(const float* x) const;

    /// Quantizes a query into `out`, reusing its buffer.
    void quantize_into(const float* x, QuantizedVector& out) const;

    /// Dequantized row: codes * scale.
    void dequantize(std::size_t row, float* out) const noexcept;

    /// Score of `query` against one stored row.
    float score(const QuantizedVector& query, std::size_t row) const noexcept;

    void reserve(std::size_t count);
    /// A copy of the row buffer with room for `extra_rows` more rows (grown geometrically), or
    /// an empty buffer when the current one has room. Lets a writer copy outside a lock that
    /// readers wait for, then adopt_buffer() under it.
    detail::huge_vector<std::int8_t> grown_buffer(std::size_t extra_rows) const;
    /// Takes a buffer from grown_buffer() (nothing to do for an empty one), with any whole rows
    /// appended to it since; `buffer` receives the old one.
    void adopt_buffer(detail::huge_vector<std::int8_t>& buffer) noexcept {
        if (!buffer.capacity()) return;
        rows_.swap(buffer);
        count_ = rows_.size() / stride_;
    }
    std::size_t memory_bytes() const noexcept { return rows_.capacity(); }

  private:
    // memcpy, not a float* cast: the buffer holds int8 objects (compiles to one load).
    float header_float(std::size_t row, std::size_t index) const noexcept {
        float value;
        std::memcpy(&value, rows_.data() + row * stride_ + index * sizeof(float), sizeof(float));
        return value;
    }

    std::size_t dim_;
    Metric metric_;
    std::size_t stride_;
    std::size_t count_ = 0;
    detail::huge_vector<std::int8_t> rows_;  // on huge pages: searches read rows at random
};

}  // namespace vecgraph
