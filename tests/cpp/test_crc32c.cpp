// CRC32C: RFC 3720 check values, incremental extension, and the instruction path against the table.
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "vecgraph/crc32c.hpp"

using namespace vecgraph::wal;

namespace {

using crc_fn = std::uint32_t (*)(std::uint32_t, const void*, std::size_t) noexcept;

// Every implementation this build and CPU can run, with its name.
std::vector<std::pair<const char*, crc_fn>> implementations() {
    std::vector<std::pair<const char*, crc_fn>> all = {{"active", crc32c_extend}, {"serial", crc32c_extend_serial}};
    if (crc32c_hardware_available()) all.push_back({"hardware", crc32c_extend_hardware});
    return all;
}

}  // namespace

TEST_CASE("RFC 3720 check values, on every implementation") {
    std::vector<std::uint8_t> zeros(32, 0x00), ones(32, 0xff), ascending(32), descending(32);
    for (int i = 0; i < 32; ++i) {
        ascending[i] = std::uint8_t(i);
        descending[i] = std::uint8_t(31 - i);
    }
    const char* digits = "123456789";
    for (auto& [name, fn] : implementations()) {
        std::printf("  checking %s\n", name);
        CHECK_EQ(fn(0, zeros.data(), 32), 0x8A9136AAu);
        CHECK_EQ(fn(0, ones.data(), 32), 0x62A8AB43u);
        CHECK_EQ(fn(0, ascending.data(), 32), 0x46DD794Eu);
        CHECK_EQ(fn(0, descending.data(), 32), 0x113FDB5Cu);
        CHECK_EQ(fn(0, digits, 9), 0xE3069283u);
        CHECK_EQ(fn(0, nullptr, 0), 0u);
    }
}

TEST_CASE("crc32c_extend over pieces equals crc32c of the whole") {
    std::mt19937 rng(11);
    std::vector<std::uint8_t> data(777);
    for (auto& b : data) b = std::uint8_t(rng());
    std::uint32_t whole = crc32c(data.data(), data.size());
    for (std::size_t cut : {0u, 1u, 7u, 8u, 9u, 100u, 776u, 777u}) {
        std::uint32_t first = crc32c(data.data(), cut);
        CHECK_EQ(crc32c_extend(first, data.data() + cut, data.size() - cut), whole);
    }
}

TEST_CASE("the active path is named, and VECGRAPH_FORCE_ISA=serial selects the table") {
    std::string path = crc32c_active_path();
    CHECK(path == "serial" || path == "sse4.2" || path == "armv8_crc32");
    const char* forced = std::getenv("VECGRAPH_FORCE_ISA");
    if (forced != nullptr && std::strcmp(forced, "serial") == 0) {
        CHECK_EQ(path, std::string("serial"));
    } else {
        CHECK_EQ(path == "serial", !crc32c_hardware_available());
    }
}

TEST_CASE("hardware equals serial on random buffers of every length 0..1000 at every alignment") {
    std::mt19937 rng(5);
    std::vector<std::uint8_t> storage(1000 + 16);
    for (auto& b : storage) b = std::uint8_t(rng());
    auto impls = implementations();
    for (std::size_t length = 0; length <= 1000; ++length) {
        std::size_t offset = length % 8 + (rng() % 2) * 8;  // every alignment mod 8, cycling with the length
        std::uint32_t seed = (length % 3 == 0) ? 0u : std::uint32_t(rng());
        const std::uint8_t* p = storage.data() + offset;
        std::uint32_t expected = crc32c_extend_serial(seed, p, length);
        for (auto& [name, fn] : impls) {
            std::uint32_t got = fn(seed, p, length);
            if (got != expected) {
                std::printf("  %s differs at length %zu offset %zu\n", name, length, offset);
                CHECK_EQ(got, expected);
                return;
            }
        }
    }
}

TEST_MAIN()
