// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the write-ahead log.
//
// Two implementations give identical results: the CPU's CRC32C instruction (SSE4.2 on x86-64,
// the ARMv8 CRC32 extension on AArch64 when the build targets it) and a portable slicing-by-8
// table. The fastest one this CPU runs is chosen once, at first use; the environment variable
// VECGRAPH_FORCE_ISA=serial forces the table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vecgraph::wal {

/// CRC32C of `bytes` bytes of `data` appended to data whose CRC32C is `crc`:
/// crc32c_extend(crc32c(a), b) == crc32c(a followed by b), and crc32c_extend(0, ...) == crc32c(...).
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t bytes) noexcept;

/// CRC32C of `bytes` bytes of `data` (RFC 3720: "123456789" -> 0xE3069283).
inline std::uint32_t crc32c(const void* data, std::size_t bytes) noexcept { return crc32c_extend(0, data, bytes); }

/// The implementation in use: "sse4.2", "armv8_crc32" or "serial".
const char* crc32c_active_path() noexcept;

// Each implementation on its own (for tests and benchmarks).

/// The slicing-by-8 table implementation; runs everywhere.
std::uint32_t crc32c_extend_serial(std::uint32_t crc, const void* data, std::size_t bytes) noexcept;
/// Whether this build and CPU have the instruction path.
bool crc32c_hardware_available() noexcept;
/// The instruction path; call only when crc32c_hardware_available() (it falls back to the table otherwise).
std::uint32_t crc32c_extend_hardware(std::uint32_t crc, const void* data, std::size_t bytes) noexcept;

}  // namespace vecgraph::wal
