// CRC32C: slicing-by-8 table implementation, the CPU instruction path, and the run-time choice.
//
// The file is built without ISA flags; only crc32c_sse42 carries target("sse4.2"), and it is
// called only after __builtin_cpu_supports("sse4.2") said yes.
#include "vecgraph/crc32c.hpp"

#include <array>
#include <cstdlib>
#include <cstring>

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#define VECGRAPH_CRC32C_SSE42 1
#include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#define VECGRAPH_CRC32C_ARMV8 1
#include <arm_acle.h>
#endif

namespace vecgraph::wal {

namespace {

constexpr std::uint32_t polynomial_reflected = 0x82F63B78u;

using crc_tables_t = std::array<std::array<std::uint32_t, 256>, 8>;

// tables[0][b]: CRC of byte b; tables[k][b]: CRC of byte b followed by k zero bytes.
constexpr crc_tables_t make_tables() {
    crc_tables_t tables{};
    for (std::uint32_t b = 0; b < 256; ++b) {
        std::uint32_t crc = b;
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? polynomial_reflected : 0u);
        tables[0][b] = crc;
    }
    for (std::size_t k = 1; k < 8; ++k)
        for (std::size_t b = 0; b < 256; ++b)
            tables[k][b] = (tables[k - 1][b] >> 8) ^ tables[0][tables[k - 1][b] & 0xffu];
    return tables;
}

constexpr crc_tables_t tables = make_tables();

inline std::uint32_t load_le32(const std::uint8_t* p) noexcept {
    return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) |
           (std::uint32_t(p[3]) << 24);
}

#if defined(VECGRAPH_CRC32C_SSE42)
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc, const std::uint8_t* p,
                                                            std::size_t bytes) noexcept {
    std::uint32_t state = ~crc;
    while (bytes > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0) {
        state = _mm_crc32_u8(state, *p++);
        --bytes;
    }
    std::uint64_t state64 = state;
    for (; bytes >= 8; bytes -= 8, p += 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        state64 = _mm_crc32_u64(state64, word);
    }
    state = static_cast<std::uint32_t>(state64);
    for (; bytes > 0; --bytes) state = _mm_crc32_u8(state, *p++);
    return ~state;
}

bool cpu_has_hardware() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}
constexpr const char* hardware_name = "sse4.2";
#elif defined(VECGRAPH_CRC32C_ARMV8)
std::uint32_t crc32c_armv8(std::uint32_t crc, const std::uint8_t* p, std::size_t bytes) noexcept {
    std::uint32_t state = ~crc;
    while (bytes > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0) {
        state = __crc32cb(state, *p++);
        --bytes;
    }
    for (; bytes >= 8; bytes -= 8, p += 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        state = __crc32cd(state, word);
    }
    for (; bytes > 0; --bytes) state = __crc32cb(state, *p++);
    return ~state;
}

// The build targets CPUs with the CRC32 extension (__ARM_FEATURE_CRC32), so every CPU it runs on has it.
bool cpu_has_hardware() noexcept { return true; }
constexpr const char* hardware_name = "armv8_crc32";
#else
bool cpu_has_hardware() noexcept { return false; }
constexpr const char* hardware_name = "serial";
#endif

using crc_fn = std::uint32_t (*)(std::uint32_t, const void*, std::size_t) noexcept;

struct active_path_t {
    crc_fn extend;
    const char* name;
};

active_path_t choose_path() noexcept {
    const char* forced = std::getenv("VECGRAPH_FORCE_ISA");
    bool force_serial = forced != nullptr && std::strcmp(forced, "serial") == 0;
    if (!force_serial && crc32c_hardware_available()) return {crc32c_extend_hardware, hardware_name};
    return {crc32c_extend_serial, "serial"};
}

const active_path_t& active_path() noexcept {
    static const active_path_t path = choose_path();
    return path;
}

}  // namespace

std::uint32_t crc32c_extend_serial(std::uint32_t crc, const void* data, std::size_t bytes) noexcept {
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::uint32_t state = ~crc;
    for (; bytes >= 8; bytes -= 8, p += 8) {
        std::uint32_t lo = state ^ load_le32(p);
        std::uint32_t hi = load_le32(p + 4);
        state = tables[7][lo & 0xffu] ^ tables[6][(lo >> 8) & 0xffu] ^ tables[5][(lo >> 16) & 0xffu] ^
                tables[4][lo >> 24] ^ tables[3][hi & 0xffu] ^ tables[2][(hi >> 8) & 0xffu] ^
                tables[1][(hi >> 16) & 0xffu] ^ tables[0][hi >> 24];
    }
    for (; bytes > 0; --bytes) state = (state >> 8) ^ tables[0][(state ^ *p++) & 0xffu];
    return ~state;
}

bool crc32c_hardware_available() noexcept {
    static const bool available = cpu_has_hardware();
    return available;
}

std::uint32_t crc32c_extend_hardware(std::uint32_t crc, const void* data, std::size_t bytes) noexcept {
#if defined(VECGRAPH_CRC32C_SSE42)
    if (crc32c_hardware_available()) return crc32c_sse42(crc, static_cast<const std::uint8_t*>(data), bytes);
#elif defined(VECGRAPH_CRC32C_ARMV8)
    return crc32c_armv8(crc, static_cast<const std::uint8_t*>(data), bytes);
#endif
    return crc32c_extend_serial(crc, data, bytes);
}

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t bytes) noexcept {
    return active_path().extend(crc, data, bytes);
}

const char* crc32c_active_path() noexcept { return active_path().name; }

}  // namespace vecgraph::wal
