// Minimal test harness for the C++ unit tests (ctest runs each test_*.cpp as one executable).
// CHECK records a failure and continues; REQUIRE stops the current test case.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace vecgraph_test {

struct test_case_t {
    const char* name;
    std::function<void()> body;
};

inline std::vector<test_case_t>& registry() {
    static std::vector<test_case_t> cases;
    return cases;
}
inline int& failures() {
    static int count = 0;
    return count;
}
struct registrar_t {
    registrar_t(const char* name, std::function<void()> body) { registry().push_back({name, std::move(body)}); }
};
struct require_failed_t {};

inline void report(const char* file, int line, const std::string& what) {
    std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
    ++failures();
}

inline int run_all() {
    int failed_cases = 0;
    for (auto& test : registry()) {
        int before = failures();
        try {
            test.body();
        } catch (require_failed_t&) {
        } catch (std::exception& e) {
            report(test.name, 0, std::string("unexpected exception: ") + e.what());
        }
        bool ok = failures() == before;
        failed_cases += ok ? 0 : 1;
        std::printf("[%s] %s\n", ok ? "  OK  " : "FAILED", test.name);
    }
    std::printf("%zu passed, %d failed\n", registry().size() - failed_cases, failed_cases);
    return failed_cases == 0 ? 0 : 1;
}

}  // namespace vecgraph_test

#define VG_CONCAT_(a, b) a##b
#define VG_CONCAT(a, b) VG_CONCAT_(a, b)
#define TEST_CASE(name)                                                                             \
    static void VG_CONCAT(test_fn_, __LINE__)();                                                    \
    static vecgraph_test::registrar_t VG_CONCAT(test_reg_, __LINE__)(name, VG_CONCAT(test_fn_, __LINE__)); \
    static void VG_CONCAT(test_fn_, __LINE__)()

#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) vecgraph_test::report(__FILE__, __LINE__, #cond);  \
    } while (0)

#define CHECK_EQ(a, b)                                                                           \
    do {                                                                                         \
        const auto va_ = (a);                                                                      \
        const auto vb_ = (b);                                                                      \
        if (!(va_ == vb_)) {                                                                     \
            std::ostringstream os_;                                                              \
            os_ << #a " == " #b " (" << va_ << " vs " << vb_ << ")";                             \
            vecgraph_test::report(__FILE__, __LINE__, os_.str());                                \
        }                                                                                        \
    } while (0)

#define REQUIRE(cond)                                                   \
    do {                                                                \
        if (!(cond)) {                                                  \
            vecgraph_test::report(__FILE__, __LINE__, #cond);           \
            throw vecgraph_test::require_failed_t{};                    \
        }                                                               \
    } while (0)

#define TEST_MAIN() \
    int main() { return vecgraph_test::run_all(); }
