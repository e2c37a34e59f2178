// Runs test code in a forked child process, for cases whose failure would end the process.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "check.hpp"
#include "temp_dir.hpp"

// Runs fn() in a forked child that exits with what it returns (a hang fails it: SIGALRM after
// 30 s; its stderr is discarded, or it exits with `no_stderr` if it cannot be), and returns the
// child's wait status.
template <typename fn_at>
int wait_status_of_child(int no_stderr, fn_at&& fn) {
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::alarm(30);
        if (std::freopen("/dev/null", "w", stderr) == nullptr) std::_Exit(no_stderr);
        std::_Exit(fn());
    }
    int wait_status = 0;
    REQUIRE(::waitpid(child, &wait_status, 0) == child);
    return wait_status;
}

// What sweep_failing_allocations saw.
struct AllocationSweep {
    int wanted = 0;       // children that ended with the wanted code
    int also_wanted = 0;  // children that ended with the other accepted code
    int aborted = 0;      // children ended by SIGABRT (counted only when allowed)
    long end_k = 0;       // the K the sweep stopped at
};

// A sweep of failing allocations: for K = 1, 2, ... runs run(k, folder) in a forked child, with a
// fresh folder each time, until it returns `not_reached` (its K-th allocation never came) or K
// reaches `max_k`. Every other child must exit with `wanted` or `also_wanted` (or abort, when
// `aborts_allowed`); anything else fails the test case and is printed. `no_stderr` is as for
// wait_status_of_child.
template <typename run_at>
AllocationSweep sweep_failing_allocations(run_at&& run, int wanted, int not_reached, int no_stderr,
                                          bool aborts_allowed = false, long max_k = 400, int also_wanted = -1) {
    AllocationSweep sweep;
    for (sweep.end_k = 1; sweep.end_k < max_k; ++sweep.end_k) {
        const long k = sweep.end_k;
        vecgraph_test::TempDir folder("vecgraph_alloc");
        const std::string path = folder.root.string();
        const int wait_status = wait_status_of_child(no_stderr, [&] { return run(k, path); });
        if (aborts_allowed && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGABRT) {
            ++sweep.aborted;
            continue;
        }
        CHECK(WIFEXITED(wait_status));
        if (!WIFEXITED(wait_status)) {
            std::printf("  K=%ld: killed by signal %d\n", k, WTERMSIG(wait_status));
            continue;
        }
        const int outcome = WEXITSTATUS(wait_status);
        if (outcome == not_reached) break;
        const bool accepted = outcome == wanted || outcome == also_wanted;
        if (!accepted) std::printf("  K=%ld: ended with %d\n", k, outcome);
        CHECK(accepted);
        sweep.wanted += outcome == wanted;
        sweep.also_wanted += outcome == also_wanted;
    }
    return sweep;
}
