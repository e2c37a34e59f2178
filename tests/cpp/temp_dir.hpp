// A fresh folder under the system temp directory for one test, removed with everything in it.
// mkdtemp makes the name unique, so ctest can run a test binary and its serial-kernel twin side
// by side.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace vecgraph_test {

struct TempDir {
    std::filesystem::path root;

    explicit TempDir(const std::string& prefix = "vecgraph_test") {
        std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
        root = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(root, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    /// The path of `name` inside the folder.
    std::string path(const std::string& name) const { return (root / name).string(); }
};

}  // namespace vecgraph_test
