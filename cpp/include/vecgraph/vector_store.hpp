// int8 vector store: one row of `dim` int8 codes, a float32 scale and the float32 squared norm
// of the dequantized vector per vector.
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

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vecgraph/detail/huge_pages.hpp"
#include "vecgraph/detail/prefetch.hpp"
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
    /// The row layout of batches, logs and snapshots: [scale f32][sq_norm f32][dim int8 codes]
    /// [zero pad to 4 bytes].
    static constexpr std::size_t header_bytes = 2 * sizeof(float);

    /// In memory the store holds the codes and the (scale, sq_norm) pairs apart. The codes of a
    /// row start on a cache line and span the fewest lines (dim rounded up to 64 bytes; below 64,
    /// to a power of two): a random 384-d row's codes take 6 lines, where header and codes side
    /// by side took 7. The pairs sit in an array of 8 bytes per row, 8 rows to a line.
    static std::size_t code_stride_for(std::size_t dim) noexcept {
        constexpr std::size_t line = detail::cache_line_bytes;
        if (dim >= line) return (dim + line - 1) / line * line;
        std::size_t stride = 4;
        while (stride < dim) stride *= 2;
        return stride;
    }

    VectorStore(std::size_t dim, Metric metric)
        : dim_(dim),
          metric_(metric),
          row_bytes_(header_bytes + (dim + 3) / 4 * 4),
          code_stride_(code_stride_for(dim)) {}

    std::size_t dim() const noexcept { return dim_; }
    Metric metric() const noexcept { return metric_; }
    std::size_t size() const noexcept { return norms_.size() / 2; }
    /// Bytes of one row in the row layout (batches, logs, snapshots).
    std::size_t row_bytes() const noexcept { return row_bytes_; }
    /// Distance in bytes between the codes of consecutive rows in memory.
    std::size_t code_stride() const noexcept { return code_stride_; }

    /// Codes of row 0; row r's codes start at codes_data() + r * code_stride().
    const std::int8_t* codes_data() const noexcept { return codes_.data(); }
    const std::int8_t* codes(std::size_t row) const noexcept { return codes_.data() + row * code_stride_; }
    float scale(std::size_t row) const noexcept { return norms_[2 * row]; }
    float sq_norm(std::size_t row) const noexcept { return norms_[2 * row + 1]; }
    /// Asks for the codes and the (scale, sq_norm) pair of `row` into L2 (see prefetch.hpp).
    void prefetch_row_l2(std::size_t row) const noexcept {
        detail::prefetch_bytes_l2(codes(row), dim_);
        detail::prefetch_bytes_l2(norms_.data() + 2 * row, 2 * sizeof(float));
    }

    /// Validates every row of a row-major (count, dim) float32 batch; changes nothing.
    Status validate(const float* rows, std::size_t count, const char* what) const;

    /// Appends a validated batch, quantizing it with up to `threads` threads.
    void append(const float* rows, std::size_t count, std::size_t threads);
    /// Quantizes a validated batch into `out` as `count` rows of row_bytes() each (the row
    /// layout), with up to `threads` threads.
    void quantize_rows(const float* rows, std::size_t count, std::size_t threads, std::int8_t* out) const;
    /// Appends `count` rows in the row layout (from quantize_rows, a log or a snapshot).
    void append_rows(const std::int8_t* rows, std::size_t count);
    /// Replaces one row with a row in the row layout.
    void set_row(std::size_t row, const std::int8_t* data) noexcept;
    /// Writes row `row` in the row layout (row_bytes() bytes) to `out`.
    void copy_row(std::size_t row, std::int8_t* out) const noexcept;
    /// Checks rows in the row layout (from a log or a snapshot): finite scale and squared
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

    /// The store's memory: codes and (scale, sq_norm) pairs.
    struct Buffers {
        detail::huge_vector<std::int8_t> codes;
        detail::huge_vector<float> norms;
        /// False for the empty Buffers grown_buffers() gives when the store has room.
        bool grown() const noexcept { return codes.capacity() != 0; }
    };
    /// A copy of the store's buffers with room for `extra_rows` more rows (grown geometrically),
    /// or empty buffers when the current ones have room. Lets a writer copy outside a lock that
    /// readers wait for, then adopt_buffers() under it.
    Buffers grown_buffers(std::size_t extra_rows) const;
    /// Appends `count` rows in the row layout to buffers from grown_buffers().
    void append_rows_to(Buffers& buffers, const std::int8_t* rows, std::size_t count) const;
    /// Takes buffers from grown_buffers() (nothing to do for empty ones), with any whole rows
    /// appended to them since; `buffers` receives the old ones.
    void adopt_buffers(Buffers& buffers) noexcept {
        if (!buffers.grown()) return;
        codes_.swap(buffers.codes);
        norms_.swap(buffers.norms);
    }
    std::size_t memory_bytes() const noexcept { return codes_.capacity() + norms_.capacity() * sizeof(float); }

  private:
    // Rows the buffers hold room for.
    std::size_t capacity_rows() const noexcept {
        return std::min(codes_.capacity() / code_stride_, norms_.capacity() / 2);
    }
    void append_rows_to(detail::huge_vector<std::int8_t>& codes, detail::huge_vector<float>& norms,
                        const std::int8_t* rows, std::size_t count) const;

    std::size_t dim_;
    Metric metric_;
    std::size_t row_bytes_;
    std::size_t code_stride_;
    detail::huge_vector<std::int8_t> codes_;  // on huge pages: searches read rows at random
    detail::huge_vector<float> norms_;        // scale, sq_norm per row
};

}  // namespace vecgraph
