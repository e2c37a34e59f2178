// StringColumn against a std::vector<std::string> reference: random appends (single, batches,
// all-empty batches, nullptr batches), replacements and copies, with the column starting
// all-empty (no offsets held) and turning non-empty at a random point.
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "vecgraph/detail/string_column.hpp"

using vecgraph::detail::StringColumn;

namespace {

void check_equal(const StringColumn& column, const std::vector<std::string>& reference) {
    CHECK_EQ(column.size(), reference.size());
    for (std::size_t row = 0; row < reference.size(); ++row) CHECK(column[row] == reference[row]);
}

}  // namespace

TEST_CASE("an all-empty column holds no offsets and reads back empty rows") {
    StringColumn column;
    column.append(nullptr, 1000);
    std::vector<std::string> empties(500);
    column.append(empties.data(), empties.size());
    column.push_back("");
    CHECK_EQ(column.size(), std::size_t{1501});
    CHECK(column.memory_bytes() <= sizeof(std::string));  // no offsets; the text buffer's inline room
    CHECK(column[0].empty() && column[1500].empty());
    CHECK_EQ(column.capacity(), column.size());  // a write copies it (no allocation) before the lock
    StringColumn copy = column.copy_with_capacity(4000);
    CHECK(copy.memory_bytes() <= sizeof(std::string));
    copy.push_back("first text");
    CHECK_EQ(copy.size(), std::size_t{1502});
    CHECK(copy[1501] == "first text" && copy[1500].empty() && copy[0].empty());
    CHECK(copy.capacity() >= 4000);  // the room asked for while empty is kept
    CHECK_EQ(column.size(), std::size_t{1501});  // the original is untouched
    CHECK(column.memory_bytes() <= sizeof(std::string));  // no offsets; the text buffer's inline room
}

TEST_CASE("an all-empty column keeps the room asked for, and materialize() allocates it once") {
    StringColumn column;
    column.append(nullptr, 100);
    CHECK_EQ(column.capacity(), std::size_t{100});
    StringColumn grown = column.copy_with_capacity(150);  // what a write growing by 1.5x asks for
    CHECK_EQ(grown.capacity(), std::size_t{150});        // room kept: the next 50 empty rows copy nothing
    CHECK(!grown.materialized());
    grown.append(nullptr, 50);
    CHECK_EQ(grown.size(), std::size_t{150});
    CHECK(!grown.materialized());
    grown.reserve(400);
    grown.materialize();  // before a lock: the first non-empty values then need no new offsets
    CHECK(grown.materialized());
    const std::size_t bytes = grown.memory_bytes();
    CHECK(bytes >= 401 * sizeof(std::uint64_t));
    for (int i = 0; i < 250; ++i) grown.push_back("t");
    CHECK_EQ(grown.size(), std::size_t{400});
    CHECK_EQ(grown.capacity(), std::size_t{400});  // the offsets did not grow
    CHECK(grown[0].empty() && grown[149].empty() && grown[150] == "t" && grown[399] == "t");
}

TEST_CASE("replacing a row of an all-empty column") {
    StringColumn column;
    column.append(nullptr, 10);
    column.set(3, "upserted");
    CHECK(column[3] == "upserted" && column[2].empty());
    column.push_back("x");
    CHECK(column[3] == "upserted" && column[10] == "x" && column[9].empty());
}

TEST_CASE("random operations equal a vector of strings") {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        StringColumn column;
        std::vector<std::string> reference;
        const int empty_until = static_cast<int>(rng() % 40);  // operations before the first non-empty value
        for (int op = 0; op < 60; ++op) {
            auto value = [&]() -> std::string {
                if (op < empty_until || rng() % 3 == 0) return "";
                return std::string(1 + rng() % 20, static_cast<char>('a' + rng() % 26));
            };
            switch (rng() % 6) {
                case 0: {
                    std::string v = value();
                    column.push_back(v);
                    reference.push_back(v);
                    break;
                }
                case 1: {
                    std::vector<std::string> batch(rng() % 8);
                    for (auto& v : batch) v = value();
                    column.append(batch.data(), batch.size());
                    reference.insert(reference.end(), batch.begin(), batch.end());
                    break;
                }
                case 2: {
                    const std::size_t count = rng() % 8;
                    column.append(nullptr, count);
                    reference.resize(reference.size() + count);
                    break;
                }
                case 3:
                    if (!reference.empty()) {
                        const std::size_t row = rng() % reference.size();
                        std::string v = value();
                        column.set(row, v);
                        reference[row] = v;
                    }
                    break;
                case 4:
                    column = column.copy_with_capacity(reference.size() + rng() % 16);
                    break;
                default:
                    column.reserve(reference.size() + rng() % 16);
            }
            check_equal(column, reference);
        }
    }
}

TEST_MAIN()
