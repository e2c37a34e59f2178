// Quantization: saturation, symmetric scale, cosine normalisation, validation, scores.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "check.hpp"
#include "vecgraph/vector_store.hpp"

using namespace vecgraph;

TEST_CASE("codes span [-127, 127] and never wrap") {
    std::vector<float> x = {1e30f, -1e30f, 0.f, 5e29f};
    std::vector<std::int8_t> codes(4);
    float scale, sq_norm;
    quantize_vector(x.data(), 4, Metric::ip, codes.data(), &scale, &sq_norm);
    CHECK_EQ(int(codes[0]), 127);
    CHECK_EQ(int(codes[1]), -127);
    CHECK_EQ(int(codes[2]), 0);
    CHECK_EQ(int(codes[3]), 64);  // 63.5 rounds half to even
    CHECK(std::fabs(scale - 1e30f / 127.f) <= 1e30f * 1e-6f);
}

TEST_CASE("cos normalises before quantizing; dequantized error is at most half a step") {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (std::size_t dim : {1u, 3u, 17u, 384u}) {
        std::vector<float> x(dim);
        for (auto& v : x) v = normal(rng) * 100.f;
        VectorStore store(dim, Metric::cos);
        REQUIRE(store.validate(x.data(), 1, "vectors").ok());
        store.append(x.data(), 1, 1);
        double norm = 0;
        for (float v : x) norm += double(v) * v;
        norm = std::sqrt(norm);
        std::vector<float> back(dim);
        store.dequantize(0, back.data());
        for (std::size_t i = 0; i < dim; ++i)
            CHECK(std::fabs(back[i] - float(x[i] / norm)) <= store.scale(0) * 0.5f + 1e-7f);
    }
}

TEST_CASE("validation rejects NaN, inf and (cos) zero vectors, naming the row") {
    float nan = std::numeric_limits<float>::quiet_NaN();
    float inf = std::numeric_limits<float>::infinity();
    std::vector<float> rows = {1, 2, 3, 4, nan, 6};
    VectorStore store(3, Metric::cos);
    Status s = store.validate(rows.data(), 2, "vectors");
    CHECK(s.code() == StatusCode::invalid_argument);
    CHECK(s.message().find("row 1") != std::string::npos);
    CHECK(s.message().find("NaN") != std::string::npos);
    rows[4] = inf;
    CHECK(store.validate(rows.data(), 2, "vectors").message().find("inf") != std::string::npos);
    std::vector<float> zero = {0, 0, 0};
    CHECK(store.validate(zero.data(), 1, "vectors").code() == StatusCode::invalid_argument);
    VectorStore ip(3, Metric::ip);
    CHECK(ip.validate(zero.data(), 1, "vectors").ok());
    CHECK_EQ(store.size(), 0u);
}

TEST_CASE("scores follow the documented formulas") {
    std::vector<float> a = {3, 4}, b = {4, 3};
    for (Metric metric : {Metric::cos, Metric::ip, Metric::l2}) {
        VectorStore store(2, metric);
        store.append(b.data(), 1, 1);
        QuantizedVector q = store.quantize(a.data());
        float got = store.score(q, 0);
        double want = metric == Metric::cos ? 24.0 / 25.0 : metric == Metric::ip ? 24.0 : -2.0;
        CHECK(std::fabs(got - want) <= std::fabs(want) * 0.02 + 0.02);
    }
}

TEST_CASE("parallel append equals serial append") {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::size_t dim = 33, n = 20000;
    std::vector<float> rows(dim * n);
    for (auto& v : rows) v = normal(rng);
    VectorStore serial(dim, Metric::cos), parallel(dim, Metric::cos);
    serial.append(rows.data(), n, 1);
    parallel.append(rows.data(), n, 4);
    bool same = true;
    for (std::size_t r = 0; r < n && same; ++r) {
        same = serial.scale(r) == parallel.scale(r);
        for (std::size_t i = 0; i < dim; ++i) same = same && serial.codes(r)[i] == parallel.codes(r)[i];
    }
    CHECK(same);
}

TEST_CASE("code stride: rows start on a cache line from dim 64 up, and pack below it") {
    CHECK_EQ(VectorStore::code_stride_for(1), std::size_t(4));
    CHECK_EQ(VectorStore::code_stride_for(3), std::size_t(4));
    CHECK_EQ(VectorStore::code_stride_for(5), std::size_t(8));
    CHECK_EQ(VectorStore::code_stride_for(17), std::size_t(32));
    CHECK_EQ(VectorStore::code_stride_for(64), std::size_t(64));
    CHECK_EQ(VectorStore::code_stride_for(65), std::size_t(128));
    CHECK_EQ(VectorStore::code_stride_for(97), std::size_t(128));
    CHECK_EQ(VectorStore::code_stride_for(384), std::size_t(384));
    CHECK_EQ(VectorStore::code_stride_for(1000), std::size_t(1024));
    for (std::size_t dim : {1u, 3u, 17u, 63u, 64u, 97u, 384u})  // a stride that is a power of two below 64 divides 64
        CHECK(VectorStore::code_stride_for(dim) >= 64 ? VectorStore::code_stride_for(dim) % 64 == 0
                                                      : 64 % VectorStore::code_stride_for(dim) == 0);
    VectorStore store(384, Metric::cos);
    std::vector<float> x(384 * 3, 0.5f);
    store.append(x.data(), 3, 1);
    CHECK_EQ(reinterpret_cast<std::uintptr_t>(store.codes(2)) - reinterpret_cast<std::uintptr_t>(store.codes(0)),
             std::uintptr_t(768));
    CHECK_EQ(reinterpret_cast<std::uintptr_t>(store.codes(0)) % 64, std::uintptr_t(0));  // a small buffer too
    CHECK_EQ(store.row_bytes(), std::size_t(8 + 384));
}

TEST_CASE("rows in the row layout round-trip through append_rows, copy_row, set_row and grown buffers") {
    std::mt19937 rng(9);
    std::normal_distribution<float> normal;
    for (std::size_t dim : {1u, 3u, 17u, 97u, 384u}) {
        for (Metric metric : {Metric::cos, Metric::ip, Metric::l2}) {
            const std::size_t n = 50;
            std::vector<float> x(dim * n);
            for (auto& v : x) v = normal(rng);
            VectorStore floats(dim, metric), rows(dim, metric);
            floats.append(x.data(), n, 1);
            std::vector<std::int8_t> layout(n * floats.row_bytes());
            floats.quantize_rows(x.data(), n, 2, layout.data());
            REQUIRE(floats.validate_rows(layout.data(), n, "rows").ok());
            rows.append_rows(layout.data(), 20);
            VectorStore::Buffers grown = rows.grown_buffers(1000);
            REQUIRE(grown.grown());
            rows.append_rows_to(grown, layout.data() + 20 * rows.row_bytes(), n - 20);
            rows.adopt_buffers(grown);
            CHECK_EQ(rows.size(), n);
            CHECK(!rows.grown_buffers(10).grown());  // room for 1000 more: nothing to copy
            std::vector<std::int8_t> copied(rows.row_bytes(), 99);
            bool same = true;
            for (std::size_t r = 0; r < n; ++r) {
                // The store built from floats and the one built from rows hold the same values,
                // and copy_row gives back the row layout byte for byte (zero padding included).
                same = same && floats.scale(r) == rows.scale(r) && floats.sq_norm(r) == rows.sq_norm(r) &&
                       std::equal(floats.codes(r), floats.codes(r) + dim, rows.codes(r));
                rows.copy_row(r, copied.data());
                same = same && std::equal(copied.begin(), copied.end(), layout.begin() + r * rows.row_bytes());
            }
            CHECK(same);
            // set_row replaces codes, scale and squared norm of one row and nothing else.
            rows.set_row(3, layout.data() + 7 * rows.row_bytes());
            CHECK_EQ(rows.scale(3), floats.scale(7));
            CHECK_EQ(rows.sq_norm(3), floats.sq_norm(7));
            CHECK(std::equal(rows.codes(3), rows.codes(3) + dim, floats.codes(7)));
            CHECK(std::equal(rows.codes(4), rows.codes(4) + dim, floats.codes(4)));
            CHECK_EQ(rows.scale(4), floats.scale(4));
        }
    }
}

TEST_MAIN()

// The quantizer written the plain way: every quotient rounded to float, max |quotient| found
// over the quotients, std::nearbyint for rounding.
static void quantize_reference(const float* x, std::size_t dim, Metric metric, std::int8_t* codes, float* scale) {
    double norm = 1.0;
    if (metric == Metric::cos) {
        double sum_squares = 0.0;
        for (std::size_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(x[i]) * static_cast<double>(x[i]);
        norm = std::sqrt(sum_squares);
    }
    std::vector<float> values(dim);
    float max_abs = 0.f;
    for (std::size_t i = 0; i < dim; ++i) {
        values[i] = static_cast<float>(static_cast<double>(x[i]) / norm);
        max_abs = std::max(max_abs, std::fabs(values[i]));
    }
    *scale = max_abs / 127.f;
    for (std::size_t i = 0; i < dim; ++i) {
        float rounded = max_abs == 0.f ? 0.f : std::nearbyint(values[i] * (127.f / max_abs));
        codes[i] = static_cast<std::int8_t>(std::min(127.f, std::max(-127.f, rounded)));
    }
    if (max_abs == 0.f) *scale = 0.f;
}

TEST_CASE("quantize_vector equals the plain reference bit for bit (halves, tiny and huge values)") {
    std::mt19937 rng(23);
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int> half_steps(-254, 254);
    std::uniform_real_distribution<float> exponent(-30.f, 15.f);
    std::size_t cases = 0;
    for (std::size_t dim : {1u, 3u, 16u, 17u, 97u, 384u}) {
        for (int kind = 0; kind < 4; ++kind) {
            for (int trial = 0; trial < 50; ++trial) {
                std::vector<float> x(dim);
                const float magnitude = std::pow(10.f, exponent(rng));
                for (float& v : x) {
                    if (kind == 0) v = normal(rng);
                    else if (kind == 1) v = normal(rng) * magnitude;
                    else if (kind == 2) v = static_cast<float>(half_steps(rng)) / 2.f;  // ties at .5 steps
                    else v = static_cast<float>(half_steps(rng)) / 254.f;
                }
                for (Metric metric : {Metric::cos, Metric::ip, Metric::l2}) {
                    std::vector<std::int8_t> codes(dim), expected(dim);
                    float scale, sq_norm, expected_scale;
                    quantize_vector(x.data(), dim, metric, codes.data(), &scale, &sq_norm);
                    quantize_reference(x.data(), dim, metric, expected.data(), &expected_scale);
                    CHECK(codes == expected);
                    CHECK_EQ(scale, expected_scale);
                    ++cases;
                }
            }
        }
    }
    CHECK_EQ(cases, std::size_t{6 * 4 * 50 * 3});
    // All-zero rows (validation refuses them under cos; quantize_vector still gives zeros).
    for (Metric metric : {Metric::cos, Metric::ip, Metric::l2}) {
        std::vector<float> zeros(17, 0.f);
        std::vector<std::int8_t> codes(17, 5);
        float scale = 1.f, sq_norm = 1.f;
        quantize_vector(zeros.data(), zeros.size(), metric, codes.data(), &scale, &sq_norm);
        CHECK(std::all_of(codes.begin(), codes.end(), [](std::int8_t c) { return c == 0; }));
        CHECK_EQ(scale, 0.f);
        CHECK_EQ(sq_norm, 0.f);
    }
}
