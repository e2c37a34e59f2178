// Run-time choice of the int8 kernel table: CPU feature detection, VECGRAPH_FORCE_ISA, and the active table.
// Built without ISA flags; it only calls into the per-ISA files through their tables.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "vecgraph/simd/kernels.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#define VECGRAPH_SIMD_X86_64 1
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define VECGRAPH_SIMD_AARCH64 1
#endif
#if defined(VECGRAPH_SIMD_X86_64) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace vecgraph::simd {

#if !defined(VECGRAPH_SIMD_X86_64)
const kernel_table_t* avx2_table() noexcept { return nullptr; }
const kernel_table_t* avx512_table() noexcept { return nullptr; }
const kernel_table_t* avx512_vnni_table() noexcept { return nullptr; }
#endif
#if !defined(VECGRAPH_SIMD_AARCH64)
const kernel_table_t* neon_table() noexcept { return nullptr; }
#endif

namespace {

struct cpu_features_t {
    bool avx2 = false;
    bool avx512 = false;  // F, BW, VL and DQ: everything kernels_avx512.cpp is built with except VNNI
    bool avx512_vnni = false;
};

#if defined(VECGRAPH_SIMD_X86_64) && defined(__GNUC__)
// Register state the OS saves on context switch (XCR0), or 0 if XGETBV is unavailable.
std::uint64_t os_saved_state_x86() noexcept {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) return 0;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (std::uint64_t(hi) << 32) | lo;
}
#endif

cpu_features_t detect_cpu_features() noexcept {
    cpu_features_t features;
#if defined(VECGRAPH_SIMD_X86_64) && defined(__GNUC__)
    __builtin_cpu_init();
    std::uint64_t xcr0 = os_saved_state_x86();
    bool os_ymm = (xcr0 & 0x6) == 0x6;     // SSE and AVX state
    bool os_zmm = (xcr0 & 0xe6) == 0xe6;   // plus opmask, ZMM0-15 upper halves and ZMM16-31
    features.avx2 = os_ymm && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    features.avx512 = features.avx2 && os_zmm && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
    features.avx512_vnni = features.avx512 && __builtin_cpu_supports("avx512vnni");
#endif
    return features;
}

const cpu_features_t& cpu_features() noexcept {
    static const cpu_features_t features = detect_cpu_features();
    return features;
}

// The table called `name` if this build has it and this CPU runs it.
const kernel_table_t* lookup_table(const char* name) noexcept {
    if (name == nullptr) return nullptr;
    const cpu_features_t& cpu = cpu_features();
    if (std::strcmp(name, "serial") == 0) return serial_table();
    if (std::strcmp(name, "avx2") == 0) return cpu.avx2 ? avx2_table() : nullptr;
    if (std::strcmp(name, "avx512") == 0) return cpu.avx512 ? avx512_table() : nullptr;
    if (std::strcmp(name, "avx512_vnni") == 0) return cpu.avx512_vnni ? avx512_vnni_table() : nullptr;
    if (std::strcmp(name, "neon") == 0) return neon_table();  // every AArch64 CPU has NEON
    return nullptr;
}

// Every table name, worst first.
constexpr const char* isa_names[] = {"serial", "avx2", "avx512", "avx512_vnni", "neon"};

const kernel_table_t* best_table() noexcept {
    const kernel_table_t* best = serial_table();
    for (const char* name : isa_names)
        if (const kernel_table_t* table = lookup_table(name)) best = table;
    return best;
}

const kernel_table_t* initial_table() noexcept {
    if (const kernel_table_t* forced = lookup_table(std::getenv("VECGRAPH_FORCE_ISA"))) return forced;
    return best_table();
}

std::atomic<const kernel_table_t*>& active_slot() noexcept {
    static std::atomic<const kernel_table_t*> slot{initial_table()};
    return slot;
}

}  // namespace

const kernel_table_t& active() noexcept { return *active_slot().load(std::memory_order_acquire); }

const char* active_isa() noexcept { return active().isa_name; }

std::vector<std::string> available_isas() {
    std::vector<std::string> names;
    for (const char* name : isa_names)
        if (lookup_table(name) != nullptr) names.emplace_back(name);
    return names;
}

const kernel_table_t* table_for(const std::string& isa_name) noexcept { return lookup_table(isa_name.c_str()); }

bool force_isa(const std::string& isa_name) noexcept {
    const kernel_table_t* table = lookup_table(isa_name.c_str());
    if (table == nullptr) return false;
    active_slot().store(table, std::memory_order_release);
    return true;
}

}  // namespace vecgraph::simd
