// Runs test code in a forked child process, for cases whose failure would end the process.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "check.hpp"

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
