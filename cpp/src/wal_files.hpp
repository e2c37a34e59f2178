// File helpers shared by the WAL writer and reader (internal to cpp/src).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "vecgraph/status.hpp"

namespace vecgraph::wal::detail {

inline std::string errno_text(const char* operation, const std::string& path, int error) {
    return std::string(operation) + " of " + path + " failed: " + std::strerror(error);
}

inline std::string join_path(const std::string& dir, const std::string& name) {
    if (!dir.empty() && dir.back() == '/') return dir + name;
    return dir + "/" + name;
}

/// The folder of `path` ("." for a bare name).
inline std::string dir_of(const std::string& path) {
    std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

/// fsync of a folder, so that a file created, renamed or deleted in it survives a crash.
inline Status fsync_dir(const std::string& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::io_error(errno_text("open", dir, errno));
    int rc = ::fsync(fd);
    int error = errno;
    ::close(fd);
    if (rc != 0) return Status::io_error(errno_text("fsync", dir, error));
    return Status::OK();
}

}  // namespace vecgraph::wal::detail
