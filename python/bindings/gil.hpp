// Releasing the GIL around engine calls, safe at interpreter exit.
//
// A daemon thread that is inside an engine call when Python finalises must not take the GIL
// back: CPython (before 3.14) ends such a thread with a forced unwind from
// PyEval_RestoreThread, which aborts the process from a noexcept destructor
// (py::gil_scoped_release) or, unwinding further, frees Python objects without the GIL. As
// CPython 3.14 does, such a thread instead sleeps until the process ends. The thread that runs
// the finalisation (the main thread: a graph closed from __del__ at exit) takes the GIL back
// as usual. The exit hook drain_calls_at_exit (registered with Py_AtExit) waits for calls
// still running, so that none races the C++ static destructors.
#pragma once

#include <Python.h>

#if defined(__GLIBC__)
#include <cxxabi.h>  // abi::__forced_unwind
#endif

#include <atomic>
#include <chrono>
#include <thread>

namespace vecgraph::bindings {

// Python's thread identifier of the main thread, the one that finalises the interpreter; set by
// the module's init from threading.main_thread().
inline std::atomic<unsigned long>& main_thread_ident() {
    static std::atomic<unsigned long> ident{0};
    return ident;
}

inline std::atomic<int>& calls_in_flight() {
    static std::atomic<int> count{0};
    return count;
}

// Py_AtExit hook: waits (at most 10 s) for engine calls that run without the GIL to return.
inline void drain_calls_at_exit() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (calls_in_flight().load() > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

class GilRelease {
  public:
    GilRelease() { save(); }
    ~GilRelease() noexcept(false) { restore(); }
    GilRelease(const GilRelease&) = delete;
    GilRelease& operator=(const GilRelease&) = delete;

    // Takes the GIL back (the destructor does it too); save() gives it up again.
    void restore() {
        --calls_in_flight();
        const bool main_thread = PyThread_get_thread_ident() == main_thread_ident().load();
        if (finalizing() && !main_thread) sleep_until_exit();
#if defined(__GLIBC__)
        // Finalisation can begin while this thread waits for the GIL: CPython then ends the
        // thread with pthread_exit, whose forced unwind would run the destructors of this
        // call's Python objects (argument lists, arrays) without the GIL, beside the final
        // garbage collection. Stop the unwind here and sleep instead.
        try {
            PyEval_RestoreThread(state_);
        } catch (abi::__forced_unwind&) {
            if (!main_thread) sleep_until_exit();
            throw;
        }
#else
        PyEval_RestoreThread(state_);  // elsewhere pthread_exit runs no C++ destructors
#endif
    }
    void save() {
        state_ = PyEval_SaveThread();
        ++calls_in_flight();
    }
  private:
    [[noreturn]] static void sleep_until_exit() {
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // the process is ending
    }
    static bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
        return Py_IsFinalizing() != 0;
#else
        return _Py_IsFinalizing() != 0;
#endif
    }

    PyThreadState* state_;
};

// Inside a GilRelease scope: holds the GIL for this scope (work on Python objects), then
// gives it up again.
class GilReacquire {
  public:
    explicit GilReacquire(GilRelease& released) : released_(released) { released_.restore(); }
    ~GilReacquire() { released_.save(); }
    GilReacquire(const GilReacquire&) = delete;
    GilReacquire& operator=(const GilReacquire&) = delete;

  private:
    GilRelease& released_;
};

}  // namespace vecgraph::bindings
