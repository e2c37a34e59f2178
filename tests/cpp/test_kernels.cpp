// Tests of the int8 dot-product kernels: every ISA table this build and CPU offer must give the same bits as the
// serial table (itself checked against an int64 reference) over awkward dims, extreme values, unaligned bases,
// padded strides and gathered or repeated rows, without reading past the data; plus ISA lookup and forcing.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define VG_TEST_HAVE_GUARD_PAGES 1
#endif

#include "check.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace simd = vecgraph::simd;

namespace {

constexpr std::size_t test_dims[] = {1, 3, 15, 16, 17, 31, 63, 64, 65, 97, 128, 255, 256, 384, 1024};
constexpr std::size_t test_counts[] = {0, 1, 2, 3, 4, 5, 8, 17, 33};
constexpr std::int32_t out_sentinel = 0x5a5a5a5a;

// `size` bytes whose end is followed by an unreadable page where the platform allows it, so a kernel reading past
// the end crashes; or (misaligned) bytes that start 1 byte past a 64-byte boundary.
class test_bytes_t {
public:
    enum class placement_t { fenced_end, misaligned_start };

    test_bytes_t(std::size_t size, placement_t placement) {
#if defined(VG_TEST_HAVE_GUARD_PAGES)
        if (placement == placement_t::fenced_end) {
            std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
            std::size_t data_pages = (size + page - 1) / page * page;
            mapped_bytes_ = data_pages + page;
            void* mapped = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (mapped == MAP_FAILED) throw std::bad_alloc();
            mapped_ = static_cast<std::int8_t*>(mapped);
            if (mprotect(mapped_ + data_pages, page, PROT_NONE) != 0) throw std::bad_alloc();
            data_ = mapped_ + data_pages - size;
            return;
        }
#endif
        (void)placement;
        storage_.resize(size + 128);
        std::uintptr_t start = reinterpret_cast<std::uintptr_t>(storage_.data());
        data_ = storage_.data() + ((64 - start % 64) % 64) + 1;
    }
    ~test_bytes_t() {
#if defined(VG_TEST_HAVE_GUARD_PAGES)
        if (mapped_ != nullptr) munmap(mapped_, mapped_bytes_);
#endif
    }
    test_bytes_t(const test_bytes_t&) = delete;
    test_bytes_t& operator=(const test_bytes_t&) = delete;

    std::int8_t* data() { return data_; }

private:
    std::int8_t* data_ = nullptr;
    std::int8_t* mapped_ = nullptr;
    std::size_t mapped_bytes_ = 0;
    std::vector<std::int8_t> storage_;
};

constexpr test_bytes_t::placement_t placements[] = {test_bytes_t::placement_t::fenced_end,
                                                    test_bytes_t::placement_t::misaligned_start};

const char* placement_name(test_bytes_t::placement_t placement) {
    return placement == test_bytes_t::placement_t::fenced_end ? "fenced end" : "misaligned start";
}

enum class values_t { random, all_min, all_max, extremes_mixed, min_max_alternating };
constexpr values_t value_kinds[] = {values_t::random, values_t::all_min, values_t::all_max, values_t::extremes_mixed,
                                    values_t::min_max_alternating};

void fill(std::int8_t* data, std::size_t size, values_t kind, std::mt19937& rng) {
    std::uniform_int_distribution<int> any_byte(-128, 127);
    for (std::size_t i = 0; i < size; ++i) {
        switch (kind) {
            case values_t::random: data[i] = std::int8_t(any_byte(rng)); break;
            case values_t::all_min: data[i] = -128; break;
            case values_t::all_max: data[i] = 127; break;
            case values_t::extremes_mixed: data[i] = (rng() & 1) ? std::int8_t(-128) : std::int8_t(127); break;
            case values_t::min_max_alternating: data[i] = (i & 1) ? std::int8_t(-128) : std::int8_t(127); break;
        }
    }
}

std::int32_t reference_dot(const std::int8_t* a, const std::int8_t* b, std::size_t dim) {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < dim; ++i) sum += std::int64_t(a[i]) * std::int64_t(b[i]);
    return std::int32_t(sum);
}

std::vector<const simd::kernel_table_t*> available_tables() {
    std::vector<const simd::kernel_table_t*> tables;
    for (const std::string& name : simd::available_isas()) {
        const simd::kernel_table_t* table = simd::table_for(name);
        REQUIRE(table != nullptr);
        tables.push_back(table);
    }
    return tables;
}

std::string context(const simd::kernel_table_t& table, const char* what, std::size_t dim, const std::string& more) {
    return std::string(table.isa_name) + " " + what + " dim=" + std::to_string(dim) + " " + more;
}

void check_same(bool same, const std::string& what, int line) {
    if (!same) vecgraph_test::report(__FILE__, line, what);
}

// Runs dot_rows_i8 and dot_rows_i8_prefetched of `table` on `rows` and compares each with the
// serial table; checks nothing past out[count].
void check_dot_rows(const simd::kernel_table_t& table, const std::int8_t* query, const std::int8_t* base,
                    std::size_t stride, const std::vector<std::uint32_t>& rows, std::size_t dim,
                    const std::string& where) {
    std::size_t count = rows.size();
    std::vector<std::int32_t> want(count + 4, out_sentinel);
    std::vector<std::int32_t> got(count + 4, out_sentinel);
    const std::uint32_t* row_ids = count == 0 ? nullptr : rows.data();
    simd::serial_table()->dot_rows_i8(query, base, stride, row_ids, count, dim, want.data());
    table.dot_rows_i8(query, base, stride, row_ids, count, dim, got.data());
    check_same(got == want, context(table, "dot_rows_i8", dim, where + " count=" + std::to_string(count)), __LINE__);
    std::vector<std::int32_t> got_prefetched(count + 4, out_sentinel);
    table.dot_rows_i8_prefetched(query, base, stride, row_ids, count, dim, got_prefetched.data());
    check_same(got_prefetched == want,
               context(table, "dot_rows_i8_prefetched", dim, where + " count=" + std::to_string(count)), __LINE__);
    for (std::size_t i = 0; i < count; ++i) {
        std::int32_t ref = reference_dot(query, base + std::size_t(rows[i]) * stride, dim);
        check_same(want[i] == ref, "serial dot_rows_i8 vs reference dim=" + std::to_string(dim), __LINE__);
    }
}

void check_scan(const simd::kernel_table_t& table, const std::int8_t* query, const std::int8_t* base,
                std::size_t stride, std::size_t count, std::size_t dim, const std::string& where) {
    std::vector<std::int32_t> want(count + 4, out_sentinel);
    std::vector<std::int32_t> got(count + 4, out_sentinel);
    simd::serial_table()->scan_i8(query, base, stride, count, dim, want.data());
    table.scan_i8(query, base, stride, count, dim, got.data());
    check_same(got == want, context(table, "scan_i8", dim, where + " count=" + std::to_string(count)), __LINE__);
    for (std::size_t i = 0; i < count; ++i) {
        std::int32_t ref = reference_dot(query, base + i * stride, dim);
        check_same(want[i] == ref, "serial scan_i8 vs reference dim=" + std::to_string(dim), __LINE__);
    }
}

std::vector<std::size_t> strides_for(std::size_t dim) { return {dim, dim + 1, (dim + 63) / 64 * 64 + 64}; }

}  // namespace

// Runs first: nothing has called force_isa yet, so the active table is the one chosen at start-up.
TEST_CASE("initial table honours VECGRAPH_FORCE_ISA, else is the best available") {
    std::vector<std::string> isas = simd::available_isas();
    REQUIRE(!isas.empty());
    std::printf("active ISA: %s; tables under test:", simd::active_isa());
    for (const std::string& isa : isas) std::printf(" %s", isa.c_str());
    std::printf("\n");
    const char* forced = std::getenv("VECGRAPH_FORCE_ISA");
    std::string expected = isas.back();
    if (forced != nullptr && simd::table_for(forced) != nullptr) expected = forced;
    CHECK_EQ(std::string(simd::active_isa()), expected);
    CHECK_EQ(std::string(simd::active().isa_name), expected);
}

TEST_CASE("available_isas lists serial first, each once, each with a matching table") {
    std::vector<std::string> isas = simd::available_isas();
    REQUIRE(!isas.empty());
    CHECK_EQ(isas.front(), std::string("serial"));
    for (std::size_t i = 0; i < isas.size(); ++i) {
        for (std::size_t j = i + 1; j < isas.size(); ++j) CHECK(isas[i] != isas[j]);
        const simd::kernel_table_t* table = simd::table_for(isas[i]);
        REQUIRE(table != nullptr);
        CHECK_EQ(std::string(table->isa_name), isas[i]);
        CHECK(table->dot_i8 != nullptr);
        CHECK(table->dot_rows_i8 != nullptr);
        CHECK(table->dot_rows_i8_prefetched != nullptr);
        CHECK(table->scan_i8 != nullptr);
    }
    for (const char* name : {"serial", "avx2", "avx512", "avx512_vnni", "neon"}) {
        bool listed = false;
        for (const std::string& isa : isas) listed = listed || isa == name;
        CHECK_EQ(simd::table_for(name) != nullptr, listed);
    }
}

TEST_CASE("table_for and force_isa") {
    const std::string original = simd::active_isa();
    CHECK(simd::table_for("serial") == simd::serial_table());
    CHECK(simd::table_for("nonsense") == nullptr);
    CHECK(simd::table_for("") == nullptr);
    CHECK(simd::table_for("AVX2") == nullptr);

    CHECK(!simd::force_isa("nonsense"));
    CHECK_EQ(std::string(simd::active_isa()), original);
    CHECK(!simd::force_isa(""));
    CHECK_EQ(std::string(simd::active_isa()), original);

    CHECK(simd::force_isa("serial"));
    CHECK_EQ(std::string(simd::active_isa()), std::string("serial"));
    CHECK(&simd::active() == simd::serial_table());

    const std::int8_t a[5] = {1, -2, 3, -128, 127};
    const std::int8_t b[5] = {5, 6, -7, -128, 127};
    const std::int32_t expected = 5 - 12 - 21 + 16384 + 16129;
    for (const std::string& name : simd::available_isas()) {
        CHECK(simd::force_isa(name));
        CHECK_EQ(std::string(simd::active_isa()), name);
        CHECK(&simd::active() == simd::table_for(name));
        CHECK_EQ(simd::dot_i8(a, b, 5), expected);
    }
    for (const char* name : {"avx2", "avx512", "avx512_vnni", "neon"}) {
        if (simd::table_for(name) == nullptr) {
            CHECK(!simd::force_isa(name));
        }
    }
    CHECK(simd::force_isa(original));
    CHECK_EQ(std::string(simd::active_isa()), original);
}

TEST_CASE("serial dot_i8 matches an int64 reference") {
    std::mt19937 rng(7);
    for (std::size_t dim : test_dims) {
        for (values_t kind : value_kinds) {
            std::vector<std::int8_t> a(dim), b(dim);
            fill(a.data(), dim, kind, rng);
            fill(b.data(), dim, values_t::random, rng);
            CHECK_EQ(simd::serial_table()->dot_i8(a.data(), b.data(), dim), reference_dot(a.data(), b.data(), dim));
            CHECK_EQ(simd::serial_table()->dot_i8(b.data(), a.data(), dim), reference_dot(a.data(), b.data(), dim));
        }
    }
    CHECK_EQ(simd::serial_table()->dot_i8(nullptr, nullptr, 0), 0);
}

TEST_CASE("dot_i8 of every ISA equals serial") {
    std::mt19937 rng(11);
    for (const simd::kernel_table_t* table : available_tables()) {
        CHECK_EQ(table->dot_i8(nullptr, nullptr, 0), 0);
        for (std::size_t dim : test_dims) {
            for (test_bytes_t::placement_t placement : placements) {
                test_bytes_t a(dim, placement), b(dim, placement);
                for (values_t kind_a : value_kinds) {
                    for (values_t kind_b : value_kinds) {
                        fill(a.data(), dim, kind_a, rng);
                        fill(b.data(), dim, kind_b, rng);
                        std::int32_t want = simd::serial_table()->dot_i8(a.data(), b.data(), dim);
                        std::int32_t got = table->dot_i8(a.data(), b.data(), dim);
                        check_same(got == want,
                                   context(*table, "dot_i8", dim,
                                           std::string(placement_name(placement)) + " got " + std::to_string(got) +
                                               " want " + std::to_string(want)),
                                   __LINE__);
                        check_same(table->dot_i8(b.data(), a.data(), dim) == want,
                                   context(*table, "dot_i8 swapped", dim, placement_name(placement)), __LINE__);
                    }
                }
            }
        }
    }
}

TEST_CASE("extreme values give the exact sums on every ISA and entry point") {
    struct extreme_t {
        std::int8_t a, b;
    };
    const extreme_t cases[] = {{-128, -128}, {127, -128}, {-128, 127}, {127, 127}, {-128, 0}, {1, -1}};
    for (const simd::kernel_table_t* table : available_tables()) {
        for (std::size_t dim : test_dims) {
            for (const extreme_t& values : cases) {
                std::int32_t expected = std::int32_t(dim) * values.a * values.b;
                std::vector<std::int8_t> a(dim, values.a);
                std::size_t stride = dim + 3;
                std::size_t rows_in_table = 6;
                std::vector<std::int8_t> table_bytes(stride * rows_in_table, values.b);
                CHECK_EQ(table->dot_i8(a.data(), table_bytes.data(), dim), expected);

                const std::vector<std::uint32_t> rows = {5, 0, 5, 2, 2, 3, 1};
                std::vector<std::int32_t> out(rows.size(), 0);
                table->dot_rows_i8(a.data(), table_bytes.data(), stride, rows.data(), rows.size(), dim, out.data());
                for (std::int32_t value : out) CHECK_EQ(value, expected);
                std::vector<std::int32_t> out_prefetched(rows.size(), 0);
                table->dot_rows_i8_prefetched(a.data(), table_bytes.data(), stride, rows.data(), rows.size(), dim,
                                              out_prefetched.data());
                for (std::int32_t value : out_prefetched) CHECK_EQ(value, expected);

                std::vector<std::int32_t> scanned(rows_in_table, 0);
                table->scan_i8(a.data(), table_bytes.data(), stride, rows_in_table, dim, scanned.data());
                for (std::int32_t value : scanned) CHECK_EQ(value, expected);
            }
        }
        std::vector<std::int8_t> min_bytes(1024, -128), max_bytes(1024, 127);
        CHECK_EQ(table->dot_i8(min_bytes.data(), min_bytes.data(), 1024), 16777216);
        CHECK_EQ(table->dot_i8(max_bytes.data(), min_bytes.data(), 1024), -16646144);
        CHECK_EQ(table->dot_i8(max_bytes.data(), max_bytes.data(), 1024), 16516096);
    }
}

TEST_CASE("dot_rows_i8 and dot_rows_i8_prefetched of every ISA equal serial on gathered rows") {
    std::mt19937 rng(23);
    constexpr std::size_t rows_in_table = 41;
    for (const simd::kernel_table_t* table : available_tables()) {
        for (std::size_t dim : test_dims) {
            for (std::size_t stride : strides_for(dim)) {
                for (test_bytes_t::placement_t placement : placements) {
                    std::size_t table_size = (rows_in_table - 1) * stride + dim;
                    test_bytes_t base(table_size, placement);
                    test_bytes_t query(dim, placement);
                    for (values_t kind : {values_t::random, values_t::extremes_mixed, values_t::all_min}) {
                        fill(base.data(), table_size, kind, rng);
                        fill(query.data(), dim, kind == values_t::all_min ? values_t::all_min : values_t::random, rng);
                        for (std::size_t count : test_counts) {
                            std::vector<std::uint32_t> rows(count);
                            std::uniform_int_distribution<std::uint32_t> any_row(0, rows_in_table - 1);
                            for (std::uint32_t& row : rows) row = any_row(rng);
                            if (count >= 2) rows[1] = rows[0];                                  // repeated row
                            if (count >= 3) rows[count - 1] = std::uint32_t(rows_in_table - 1);  // ends at the fence
                            std::string where = std::string(placement_name(placement)) +
                                                " stride=" + std::to_string(stride);
                            check_dot_rows(*table, query.data(), base.data(), stride, rows, dim, where);
                        }
                        std::vector<std::uint32_t> same_row(17, std::uint32_t(rows_in_table - 1));
                        check_dot_rows(*table, query.data(), base.data(), stride, same_row, dim, "one row 17 times");
                    }
                }
            }
        }
    }
}

TEST_CASE("scan_i8 of every ISA equals serial on consecutive rows") {
    std::mt19937 rng(31);
    for (const simd::kernel_table_t* table : available_tables()) {
        for (std::size_t dim : test_dims) {
            for (std::size_t stride : strides_for(dim)) {
                for (test_bytes_t::placement_t placement : placements) {
                    test_bytes_t query(dim, placement);
                    for (std::size_t count : test_counts) {
                        std::size_t table_size = count == 0 ? 1 : (count - 1) * stride + dim;  // last row at the fence
                        test_bytes_t base(table_size, placement);
                        fill(base.data(), table_size, values_t::random, rng);
                        fill(query.data(), dim, values_t::random, rng);
                        std::string where =
                            std::string(placement_name(placement)) + " stride=" + std::to_string(stride);
                        check_scan(*table, query.data(), base.data(), stride, count, dim, where);
                        fill(base.data(), table_size, values_t::extremes_mixed, rng);
                        fill(query.data(), dim, values_t::extremes_mixed, rng);
                        check_scan(*table, query.data(), base.data(), stride, count, dim, where + " extremes");
                    }
                }
            }
        }
    }
}

TEST_MAIN()
