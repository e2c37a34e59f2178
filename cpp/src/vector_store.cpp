// int8 vector store: validation, quantization and scoring (format in vector_store.hpp).
#include "vecgraph/vector_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "vecgraph/detail/ranges.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph {

namespace {
// A quarter of FLT_MAX: q_sq_norm + v_sq_norm and 2 * dot * scales then stay below FLT_MAX.
constexpr double max_sq_norm = 3.4028234663852886e38 / 4.0;
// 127 times the smallest normal float32: the least non-zero max|x| of an ip / l2 row.
constexpr float min_max_abs = 127.f * 1.17549435e-38f;
}  // namespace

Status validate_vector(const float* x, std::size_t dim, Metric metric, const char* what, std::size_t row) {
    double sum_squares = 0.0;
    float max_abs = 0.f;
    for (std::size_t i = 0; i < dim; ++i) {
        max_abs = std::max(max_abs, std::fabs(x[i]));
        if (!std::isfinite(x[i])) {
            return Status::invalid_argument(std::string(what) + " row " + std::to_string(row) + " has " +
                                            (std::isnan(x[i]) ? "NaN" : "inf") + " at position " +
                                            std::to_string(i) + "; every value must be finite");
        }
        sum_squares += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    }
    if (metric == Metric::cos && sum_squares == 0.0) {
        return Status::invalid_argument(std::string(what) + " row " + std::to_string(row) +
                                        " is all zeros; metric 'cos' needs a non-zero vector");
    }
    // Scores are computed in float32; under ip and l2 bound the squared norm so that no score
    // can overflow to inf or become NaN (cos normalises, so any finite vector is fine).
    if (metric != Metric::cos && !(sum_squares <= max_sq_norm)) {
        return Status::invalid_argument(std::string(what) + " row " + std::to_string(row) + " has squared norm " +
                                        std::to_string(sum_squares) + "; metric '" + metric_name(metric) +
                                        "' needs at most " + std::to_string(max_sq_norm) +
                                        " so that float32 scores stay finite (rescale the vectors)");
    }
    // Under ip and l2 the codes are x * (127 / max|x|) and the scale max|x| / 127: below this,
    // 127 / max|x| overflows float32 and the scale is no longer a normal float32 (cos rows are
    // normalised first, so their max|x| is at least 1 / sqrt(dim)).
    if (metric != Metric::cos && max_abs > 0.f && max_abs < min_max_abs) {
        char text[32];
        std::snprintf(text, sizeof(text), "%.3g", static_cast<double>(max_abs));
        return Status::invalid_argument(std::string(what) + " row " + std::to_string(row) + " has largest |value| " +
                                        text + "; metric '" + metric_name(metric) +
                                        "' needs at least 1.5e-36 (or an all-zero row) so that its int8 scale is a "
                                        "normal float32 (rescale the vectors)");
    }
    return Status::OK();
}

namespace {

// std::nearbyint for |v| < 2^22 under the default rounding mode (to nearest, ties to even),
// inline: adding and subtracting 1.5 * 2^23 leaves no bits below the units place. The compiler
// may not fold the two operations (no -ffast-math on this code).
inline float round_half_even(float v) noexcept {
    constexpr float shift = 12582912.f;  // 1.5 * 2^23
    return (v + shift) - shift;
}

}  // namespace

void quantize_vector(const float* x, std::size_t dim, Metric metric, std::int8_t* codes, float* scale,
                     float* sq_norm) noexcept {
    double norm = 1.0;
    if (metric == Metric::cos) {
        double sum_squares = 0.0;
        for (std::size_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(x[i]) * static_cast<double>(x[i]);
        norm = std::sqrt(sum_squares);
    }
    // max |x_i / norm| (each quotient rounded to float) is the largest |x_i| divided the same
    // way: dividing by a positive number and rounding to nearest are monotonic and symmetric.
    float max_x = 0.f;
    for (std::size_t i = 0; i < dim; ++i) max_x = std::max(max_x, std::fabs(x[i]));
    const float max_abs = max_x == 0.f ? 0.f : static_cast<float>(static_cast<double>(max_x) / norm);
    if (max_abs == 0.f) {
        std::fill(codes, codes + dim, std::int8_t{0});
        *scale = 0.f;
        *sq_norm = 0.f;
        return;
    }
    float inverse = 127.f / max_abs;
    std::int64_t sum_codes_squared = 0;
    for (std::size_t i = 0; i < dim; ++i) {
        float value = static_cast<float>(static_cast<double>(x[i]) / norm);
        float rounded = round_half_even(value * inverse);
        rounded = std::min(127.f, std::max(-127.f, rounded));
        codes[i] = static_cast<std::int8_t>(rounded);
        sum_codes_squared += static_cast<std::int64_t>(codes[i]) * codes[i];
    }
    *scale = max_abs / 127.f;
    *sq_norm = static_cast<float>(sum_codes_squared) * *scale * *scale;
}

Status VectorStore::validate(const float* rows, std::size_t count, const char* what) const {
    for (std::size_t r = 0; r < count; ++r) VG_RETURN_IF_ERROR(validate_vector(rows + r * dim_, dim_, metric_, what, r));
    return Status::OK();
}

void VectorStore::reserve(std::size_t count) {
    codes_.reserve(count * code_stride_);
    norms_.reserve(count * 2);
}

VectorStore::Buffers VectorStore::grown_buffers(std::size_t extra_rows) const {
    Buffers grown;
    const std::size_t count = size(), needed = count + extra_rows;
    if (needed <= capacity_rows()) return grown;
    const std::size_t rows = std::max(needed, count + count / 2);
    grown.codes.reserve(rows * code_stride_);
    grown.norms.reserve(rows * 2);
    grown.codes.assign(codes_.begin(), codes_.end());
    grown.norms.assign(norms_.begin(), norms_.end());
    return grown;
}

void VectorStore::append_rows_to(Buffers& buffers, const std::int8_t* rows, std::size_t count) const {
    append_rows_to(buffers.codes, buffers.norms, rows, count);
}

void VectorStore::append_rows_to(detail::huge_vector<std::int8_t>& codes, detail::huge_vector<float>& norms,
                                 const std::int8_t* rows, std::size_t count) const {
    const std::size_t first = norms.size() / 2;
    codes.resize((first + count) * code_stride_, 0);
    norms.resize((first + count) * 2);
    for (std::size_t r = 0; r < count; ++r) {
        const std::int8_t* row = rows + r * row_bytes_;
        std::memcpy(norms.data() + 2 * (first + r), row, header_bytes);
        std::memcpy(codes.data() + (first + r) * code_stride_, row + header_bytes, dim_);
    }
}

void VectorStore::set_row(std::size_t row, const std::int8_t* data) noexcept {
    std::memcpy(norms_.data() + 2 * row, data, header_bytes);
    std::memcpy(codes_.data() + row * code_stride_, data + header_bytes, dim_);
}

void VectorStore::copy_row(std::size_t row, std::int8_t* out) const noexcept {
    std::memset(out, 0, row_bytes_);
    std::memcpy(out, norms_.data() + 2 * row, header_bytes);
    std::memcpy(out + header_bytes, codes(row), dim_);
}

void VectorStore::quantize_rows(const float* rows, std::size_t count, std::size_t threads, std::int8_t* out) const {
    const std::size_t parts = std::max<std::size_t>(1, std::min(threads, count / 4096));
    detail::for_each_range(count, parts, [&](std::size_t, std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r) {
            std::int8_t* row = out + r * row_bytes_;
            float head[2];
            std::memset(row, 0, row_bytes_);
            quantize_vector(rows + r * dim_, dim_, metric_, row + header_bytes, &head[0], &head[1]);
            std::memcpy(row, head, sizeof(head));
        }
    });
}

void VectorStore::append(const float* rows, std::size_t count, std::size_t threads) {
    const std::size_t first = size();
    if (capacity_rows() < first + count) reserve(std::max(first + count, first + first / 2));
    codes_.resize((first + count) * code_stride_, 0);
    norms_.resize((first + count) * 2);
    const std::size_t parts = std::max<std::size_t>(1, std::min(threads, count / 4096));
    detail::for_each_range(count, parts, [&](std::size_t, std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r)
            quantize_vector(rows + r * dim_, dim_, metric_, codes_.data() + (first + r) * code_stride_,
                            &norms_[2 * (first + r)], &norms_[2 * (first + r) + 1]);
    });
}

void VectorStore::append_rows(const std::int8_t* rows, std::size_t count) {
    const std::size_t first = size();
    if (capacity_rows() < first + count) reserve(std::max(first + count, first + first / 2));
    append_rows_to(codes_, norms_, rows, count);
}

Status VectorStore::validate_rows(const std::int8_t* rows, std::size_t count, const char* what) const {
    for (std::size_t r = 0; r < count; ++r) {
        const std::int8_t* row = rows + r * row_bytes_;
        float head[2];
        std::memcpy(head, row, sizeof(head));
        if (!std::isfinite(head[0]) || head[0] < 0.f || !std::isfinite(head[1]) || head[1] < 0.f)
            return Status::invalid_argument(std::string(what) + " row " + std::to_string(r) +
                                            " has a scale or squared norm that is negative or not finite");
        for (std::size_t i = header_bytes + dim_; i < row_bytes_; ++i)
            if (row[i] != 0)
                return Status::invalid_argument(std::string(what) + " row " + std::to_string(r) + " has non-zero padding");
    }
    return Status::OK();
}

QuantizedVector VectorStore::quantize(const float* x) const {
    QuantizedVector q;
    quantize_into(x, q);
    return q;
}

void VectorStore::quantize_into(const float* x, QuantizedVector& out) const {
    out.codes.resize(dim_);
    quantize_vector(x, dim_, metric_, out.codes.data(), &out.scale, &out.sq_norm);
}

void VectorStore::dequantize(std::size_t row, float* out) const noexcept {
    const std::int8_t* c = codes(row);
    float s = scale(row);
    for (std::size_t i = 0; i < dim_; ++i) out[i] = static_cast<float>(c[i]) * s;
}

float VectorStore::score(const QuantizedVector& query, std::size_t row) const noexcept {
    std::int32_t dot = simd::dot_i8(query.codes.data(), codes(row), dim_);
    return score_from_dot(metric_, dot, query.scale, query.sq_norm, scale(row), sq_norm(row));
}

}  // namespace vecgraph
