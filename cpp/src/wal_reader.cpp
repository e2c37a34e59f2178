// Write-ahead log reader: segment listing, frame checks, recovery and the torn-tail cut.
#include "vecgraph/wal_reader.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "wal_files.hpp"

namespace vecgraph::wal {

using detail::dir_of;
using detail::errno_text;
using detail::fsync_dir;
using detail::join_path;

namespace {

std::string base_name(const std::string& path) {
    std::size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string where(const std::string& path, std::uint64_t offset) { return path + ":" + std::to_string(offset); }

// Read-only file with a window buffer: sequential and nearby reads cost one pread per chunk,
// and no request can reach past the file's size as measured at open.
class FileReader {
  public:
    FileReader() = default;
    FileReader(const FileReader&) = delete;
    FileReader& operator=(const FileReader&) = delete;
    ~FileReader() {
        if (fd_ >= 0) ::close(fd_);
    }

    Status open(const std::string& path) {
        path_ = path;
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) return Status::io_error(errno_text("open", path, errno));
        struct stat st;
        if (::fstat(fd_, &st) != 0) return Status::io_error(errno_text("fstat", path, errno));
        if (!S_ISREG(st.st_mode)) return Status::corruption("WAL segment " + path + " is not a regular file");
        size_ = static_cast<std::uint64_t>(st.st_size);
        return Status::OK();
    }

    std::uint64_t size() const noexcept { return size_; }

    // Bytes [offset, offset + bytes) of the file; requires offset + bytes <= size().
    Status view(std::uint64_t offset, std::uint64_t bytes, std::string_view* out) {
        if (offset > size_ || bytes > size_ - offset)
            return Status::internal("WAL read of " + std::to_string(bytes) + " bytes at " + where(path_, offset) +
                                    " is past the end of the file");
        if (offset >= buffer_offset_ && offset + bytes <= buffer_offset_ + buffer_bytes_) {
            *out = std::string_view(buffer_.data() + (offset - buffer_offset_), bytes);
            return Status::OK();
        }
        std::uint64_t want = std::min<std::uint64_t>(std::max<std::uint64_t>(bytes, chunk_bytes), size_ - offset);
        try {
            if (buffer_.size() > 4 * chunk_bytes && want <= chunk_bytes) std::string().swap(buffer_);
            if (buffer_.size() < want) buffer_.resize(want);
        } catch (const std::bad_alloc&) {
            buffer_bytes_ = 0;
            return Status::internal("out of memory reading " + std::to_string(want) + " bytes at " +
                                    where(path_, offset));
        }
        buffer_offset_ = offset;
        buffer_bytes_ = 0;
        while (buffer_bytes_ < want) {
            ssize_t got = ::pread(fd_, &buffer_[buffer_bytes_], want - buffer_bytes_, off_t(offset + buffer_bytes_));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                int error = errno;
                buffer_bytes_ = 0;
                return Status::io_error(errno_text("read", where(path_, offset), error));
            }
            if (got == 0) {
                buffer_bytes_ = 0;
                return Status::io_error("WAL segment " + path_ + " shrank while it was read (it was " +
                                        std::to_string(size_) + " bytes)");
            }
            buffer_bytes_ += std::size_t(got);
        }
        *out = std::string_view(buffer_.data(), bytes);
        return Status::OK();
    }

  private:
    static constexpr std::uint64_t chunk_bytes = 1u << 20;
    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
    std::string buffer_;
    std::uint64_t buffer_offset_ = 0;
    std::size_t buffer_bytes_ = 0;
};

// Reads and checks a segment header; the file must hold at least segment_header_bytes.
Status check_header(FileReader& file, const std::string& path, std::uint64_t name_lsn, const Uuid& uuid,
                    SegmentHeader* header) {
    std::string_view bytes;
    VG_RETURN_IF_ERROR(file.view(0, segment_header_bytes, &bytes));
    std::string why = decode_segment_header(reinterpret_cast<const std::uint8_t*>(bytes.data()), header);
    if (!why.empty()) return Status::corruption("WAL segment " + path + " has a bad header: " + why);
    if (header->uuid != uuid)
        return Status::corruption("WAL segment " + path + " belongs to database " + format_uuid(header->uuid) +
                                  ", expected " + format_uuid(uuid));
    if (header->first_lsn != name_lsn)
        return Status::corruption("WAL segment " + path + " says its first LSN is " +
                                  std::to_string(header->first_lsn) + ", its name says " + std::to_string(name_lsn));
    if (header->first_lsn == 0)
        return Status::corruption("WAL segment " + path + " starts at LSN 0, which is never used");
    return Status::OK();
}

// What is wrong with a frame (frame_problem_t::none: nothing).
enum class frame_problem_t {
    none,
    short_header,
    zero_filled,
    too_long,
    past_end,
    type_zero,
    reserved_bits,
    bad_crc,
    bad_pad,
};

// Checks the frame at `offset` by every rule of wal_format.hpp except the LSN chain. Sets
// *problem, and if it is none, fills header and payload. Only a failed read is a non-OK Status.
// Cheap enough to run at every 8-byte offset of a segment: no allocation, the CRC last but one.
Status check_frame(FileReader& file, std::uint64_t offset, FrameHeader* header, std::string_view* payload,
                   frame_problem_t* problem) {
    std::uint64_t remaining = file.size() - offset;
    if (remaining < frame_header_bytes) {
        *problem = frame_problem_t::short_header;
        return Status::OK();
    }
    std::string_view head;
    VG_RETURN_IF_ERROR(file.view(offset, frame_header_bytes, &head));
    const auto* h = reinterpret_cast<const std::uint8_t*>(head.data());
    *header = decode_frame_header(h);
    std::uint64_t total = frame_bytes(header->payload_bytes);
    if (std::all_of(h, h + frame_header_bytes, [](std::uint8_t b) { return b == 0; }))
        *problem = frame_problem_t::zero_filled;
    else if (header->payload_bytes > max_payload_bytes)
        *problem = frame_problem_t::too_long;
    else if (total > remaining)
        *problem = frame_problem_t::past_end;
    else if (header->type == 0)
        *problem = frame_problem_t::type_zero;
    else if (header->reserved != 0 || (header->flags & ~flag_skippable) != 0)
        *problem = frame_problem_t::reserved_bits;
    else
        *problem = frame_problem_t::none;
    if (*problem != frame_problem_t::none) return Status::OK();

    std::string_view frame;
    VG_RETURN_IF_ERROR(file.view(offset, total, &frame));
    const auto* f = reinterpret_cast<const std::uint8_t*>(frame.data());
    if (header->masked_crc != frame_crc(f, f + frame_header_bytes, header->payload_bytes)) {
        *problem = frame_problem_t::bad_crc;
        return Status::OK();
    }
    const std::uint8_t* pad = f + frame_header_bytes + header->payload_bytes;
    if (!std::all_of(pad, f + total, [](std::uint8_t b) { return b == 0; })) {
        *problem = frame_problem_t::bad_pad;
        return Status::OK();
    }
    *payload = frame.substr(frame_header_bytes, header->payload_bytes);
    return Status::OK();
}

std::string describe(frame_problem_t problem, const FrameHeader& header, std::uint64_t remaining) {
    switch (problem) {
        case frame_problem_t::none: return "it is valid";
        case frame_problem_t::short_header:
            return "a frame header needs " + std::to_string(frame_header_bytes) + " bytes, " +
                   std::to_string(remaining) + " remain";
        case frame_problem_t::zero_filled: return "the frame is zero-filled";
        case frame_problem_t::too_long:
            return "its payload length " + std::to_string(header.payload_bytes) + " is above the limit of " +
                   std::to_string(max_payload_bytes);
        case frame_problem_t::past_end:
            return "the frame needs " + std::to_string(frame_bytes(header.payload_bytes)) + " bytes, " +
                   std::to_string(remaining) + " remain";
        case frame_problem_t::type_zero: return "its record type is 0";
        case frame_problem_t::reserved_bits: return "reserved header bits are set";
        case frame_problem_t::bad_crc: return "checksum mismatch";
        case frame_problem_t::bad_pad: return "its pad bytes are not zero";
    }
    return "unknown problem";
}

// Looks for a frame valid on its own with an LSN above `last_good_lsn` at any 8-byte aligned
// offset from `from_offset` on; *found_offset is 0 if there is none.
Status find_later_record(FileReader& file, std::uint64_t from_offset, std::uint64_t last_good_lsn,
                         std::uint64_t* found_offset, std::uint64_t* found_lsn) {
    *found_offset = 0;
    FrameHeader header;
    std::string_view payload;
    frame_problem_t problem;
    for (std::uint64_t offset = from_offset; offset + frame_bytes(0) <= file.size(); offset += frame_alignment) {
        VG_RETURN_IF_ERROR(check_frame(file, offset, &header, &payload, &problem));
        if (problem == frame_problem_t::none && header.lsn > last_good_lsn) {
            *found_offset = offset;
            *found_lsn = header.lsn;
            return Status::OK();
        }
    }
    return Status::OK();
}

Status truncate_file(const std::string& path, std::uint64_t bytes) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status::io_error(errno_text("open", path, errno));
    Status status;
    if (::ftruncate(fd, off_t(bytes)) != 0)
        status = Status::io_error(errno_text("ftruncate", path, errno));
    else if (::fsync(fd) != 0)
        status = Status::io_error(errno_text("fsync", path, errno));
    ::close(fd);
    return status;
}

}  // namespace

Result<std::vector<SegmentFile>> list_segments(const std::string& dir) {
    std::vector<SegmentFile> segments;
    DIR* handle = ::opendir(dir.c_str());
    if (handle == nullptr) {
        if (errno == ENOENT) return segments;
        return Status::io_error(errno_text("opendir", dir, errno));
    }
    errno = 0;
    while (struct dirent* entry = ::readdir(handle)) {
        std::uint64_t first_lsn = 0;
        if (parse_segment_file_name(entry->d_name, &first_lsn))
            segments.push_back({first_lsn, join_path(dir, entry->d_name)});
        errno = 0;
    }
    int error = errno;
    ::closedir(handle);
    if (error != 0) return Status::io_error(errno_text("readdir", dir, error));
    std::sort(segments.begin(), segments.end(),
              [](const SegmentFile& a, const SegmentFile& b) { return a.first_lsn < b.first_lsn; });
    return segments;
}

Result<SegmentEnd> read_segment_end(const std::string& path, const Uuid& uuid) {
    std::uint64_t name_lsn = 0;
    if (!parse_segment_file_name(base_name(path), &name_lsn))
        return Status::invalid_argument(path + " is not named like a WAL segment (<20 digits>.log)");
    FileReader file;
    VG_RETURN_IF_ERROR(file.open(path));
    if (file.size() < segment_header_bytes)
        return Status::corruption("WAL segment " + path + " is " + std::to_string(file.size()) +
                                  " bytes, shorter than its " + std::to_string(segment_header_bytes) + "-byte header");
    SegmentHeader header;
    VG_RETURN_IF_ERROR(check_header(file, path, name_lsn, uuid, &header));
    SegmentEnd end;
    end.first_lsn = header.first_lsn;
    end.next_lsn = header.first_lsn;
    end.valid_bytes = segment_header_bytes;
    end.file_bytes = file.size();
    FrameHeader frame;
    std::string_view payload;
    frame_problem_t problem;
    while (end.valid_bytes < file.size()) {
        VG_RETURN_IF_ERROR(check_frame(file, end.valid_bytes, &frame, &payload, &problem));
        if (problem != frame_problem_t::none || frame.lsn != end.next_lsn) break;
        ++end.next_lsn;
        end.valid_bytes += frame_bytes(frame.payload_bytes);
    }
    return end;
}

Result<bool> read_tail_marker(const std::string& path, TailMarker* out) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return false;
        return Status::io_error(errno_text("open", path, errno));
    }
    // One byte more than a marker holds, so that a longer file is told apart.
    std::uint8_t bytes[tail_marker_bytes + 1];
    std::size_t got = 0;
    int error = 0;
    while (got < sizeof bytes) {
        ssize_t n = ::read(fd, bytes + got, sizeof bytes - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) error = errno;
        if (n <= 0) break;
        got += std::size_t(n);
    }
    ::close(fd);
    if (error != 0) return Status::io_error(errno_text("read", path, error));
    std::string why = decode_tail_marker(bytes, got, out);
    if (!why.empty())
        return Status::corruption("the WAL tail marker " + path + " is damaged: " + why +
                                  "; it names the newest WAL segment, so that deleted segments are noticed: remove "
                                  "it to open the graph without that check (the next open writes a new one)");
    return true;
}

Status check_tail(const std::string& dir, const std::string& marker_path, const Uuid& uuid, std::uint64_t from_lsn) {
    TailMarker marker;
    Result<bool> found = read_tail_marker(marker_path, &marker);
    if (!found.ok()) return found.status();
    if (!found.value() || marker.uuid != uuid) return Status::OK();
    Result<std::vector<SegmentFile>> listed = list_segments(dir);
    if (!listed.ok()) return listed.status();
    const std::vector<SegmentFile>& segments = listed.value();
    if (!segments.empty() && segments.back().first_lsn >= marker.first_lsn) return Status::OK();

    // Writes are lost from the record after the newest segment left (its valid records; the
    // segment's first LSN if it cannot be read), and at least from the first LSN recovery needs.
    std::uint64_t lost_from = marker.first_lsn;
    std::string found_text;
    struct stat st;
    if (segments.empty()) {
        lost_from = std::max<std::uint64_t>(from_lsn, 1);
        found_text = ::stat(dir.c_str(), &st) == 0 ? dir + " holds no segment" : dir + " is missing";
    } else {
        const SegmentFile& newest = segments.back();
        Result<SegmentEnd> end = read_segment_end(newest.path, uuid);
        std::uint64_t next = end.ok() ? end.value().next_lsn : newest.first_lsn;
        lost_from = std::min(std::max({next, from_lsn, std::uint64_t(1)}), marker.first_lsn);
        found_text = "the newest segment in " + dir + " is " + base_name(newest.path) +
                     (end.ok() ? (end.value().next_lsn > newest.first_lsn
                                      ? ", which ends at LSN " + std::to_string(end.value().next_lsn - 1)
                                      : ", which holds no record")
                               : "");
    }
    return Status::corruption(
        "WAL segment " + join_path(dir, segment_file_name(marker.first_lsn)) + " is missing: the tail marker " +
        marker_path + " names it as the newest segment, but " + found_text + ". Writes acknowledged from LSN " +
        std::to_string(lost_from) + " on are lost (the WAL segments holding them were deleted, or the folder was "
        "copied without them). Restore the graph from an export (vecgraph restore EXPORT_DIR NEW_FOLDER), or remove " +
        marker_path + " to open it without those writes");
}

Result<RecoveryReport> recover(const std::string& dir, const Uuid& uuid, std::uint64_t from_lsn,
                               const RecordVisitor& visit, bool truncate_tail, const std::string& tail_marker_path) {
    Result<std::vector<SegmentFile>> listed = list_segments(dir);
    if (!listed.ok()) return listed.status();
    const std::vector<SegmentFile>& segments = listed.value();
    RecoveryReport report;
    std::uint64_t expected_lsn = 0;  // LSN the next record must have; 0 before the first segment
    // Segments whose records all lie below from_lsn (by the next segment's name) are kept only
    // to fall back to an older snapshot: not read, so damage there does not stop a recovery
    // that does not need them; their headers are checked and damage reported.
    const std::uint64_t needed = std::max<std::uint64_t>(from_lsn, 1);
    std::size_t start = 0;
    while (start + 1 < segments.size() && segments[start + 1].first_lsn <= needed) ++start;
    for (std::size_t i = 0; i < start; ++i) {
        ++report.fallback_segments;
        FileReader file;
        SegmentHeader header;
        Status status = file.open(segments[i].path);
        if (status.ok())
            status = file.size() < segment_header_bytes
                         ? Status::corruption("WAL segment " + segments[i].path + " is " + std::to_string(file.size()) +
                                              " bytes, shorter than its header")
                         : check_header(file, segments[i].path, segments[i].first_lsn, uuid, &header);
        if (!status.ok()) report.fallback_damaged.push_back(status.message());
    }
    for (std::size_t i = start; i < segments.size(); ++i) {
        const std::string& path = segments[i].path;
        bool is_last = i + 1 == segments.size();
        FileReader file;
        VG_RETURN_IF_ERROR(file.open(path));

        if (file.size() < segment_header_bytes) {
            std::string what = "WAL segment " + path + " is " + std::to_string(file.size()) +
                               " bytes, shorter than its " + std::to_string(segment_header_bytes) + "-byte header";
            if (!is_last) return Status::corruption(what + ", and it is not the last segment");
            // A crash while the segment was created: the whole file is the torn tail.
            report.truncated_bytes = file.size();
            report.truncated_at = where(path, 0);
            if (truncate_tail) {
                if (!tail_marker_path.empty()) {
                    TailMarker marker;
                    Result<bool> found = read_tail_marker(tail_marker_path, &marker);
                    if (!found.ok()) return found.status();
                    if (found.value() && marker.uuid == uuid && marker.first_lsn == segments[i].first_lsn) {
                        if (::unlink(tail_marker_path.c_str()) != 0 && errno != ENOENT)
                            return Status::io_error(errno_text("unlink", tail_marker_path, errno));
                        VG_RETURN_IF_ERROR(fsync_dir(dir_of(tail_marker_path)));
                    }
                }
                if (::unlink(path.c_str()) != 0) return Status::io_error(errno_text("unlink", path, errno));
                VG_RETURN_IF_ERROR(fsync_dir(dir_of(path)));
            }
            break;
        }
        SegmentHeader header;
        VG_RETURN_IF_ERROR(check_header(file, path, segments[i].first_lsn, uuid, &header));
        if (i == start) {
            if (header.first_lsn > needed)
                return Status::corruption("the WAL starts at LSN " + std::to_string(header.first_lsn) + " (" + path +
                                          "), but recovery needs the records from LSN " + std::to_string(needed) +
                                          ": LSNs " + std::to_string(needed) + " to " +
                                          std::to_string(header.first_lsn - 1) + " are missing");
        } else if (header.first_lsn != expected_lsn) {
            return Status::corruption("LSN gap between WAL segments: " + segments[i - 1].path + " ends at LSN " +
                                      std::to_string(expected_lsn - 1) + ", " + path + " starts at LSN " +
                                      std::to_string(header.first_lsn));
        }
        ++report.segments;
        expected_lsn = header.first_lsn;

        std::uint64_t offset = segment_header_bytes;
        FrameHeader frame;
        std::string_view payload;
        frame_problem_t problem;
        while (offset < file.size()) {
            VG_RETURN_IF_ERROR(check_frame(file, offset, &frame, &payload, &problem));
            if (problem != frame_problem_t::none || frame.lsn != expected_lsn) {
                std::string why = problem != frame_problem_t::none
                                      ? describe(problem, frame, file.size() - offset)
                                      : "its LSN is " + std::to_string(frame.lsn) + ", expected " +
                                            std::to_string(expected_lsn);
                std::string what = "WAL segment " + path + ", record at offset " + std::to_string(offset) + ": " + why;
                if (!is_last)
                    return Status::corruption(what + "; the segment is not the last one, so this is not a torn write");
                std::uint64_t found_offset = 0, found_lsn = 0;
                VG_RETURN_IF_ERROR(find_later_record(file, offset, expected_lsn - 1, &found_offset, &found_lsn));
                if (found_offset != 0)
                    return Status::corruption("damage in the middle of the log: " + what +
                                              "; a valid record (LSN " + std::to_string(found_lsn) +
                                              ") follows at offset " + std::to_string(found_offset));
                report.truncated_bytes = file.size() - offset;
                report.truncated_at = where(path, offset);
                if (truncate_tail) VG_RETURN_IF_ERROR(truncate_file(path, offset));
                break;
            }
            ++report.records;
            if (report.first_lsn == 0) report.first_lsn = frame.lsn;
            report.last_lsn = frame.lsn;
            if (frame.lsn >= from_lsn) {
                if (is_known_record_type(frame.type)) {
                    if (visit) VG_RETURN_IF_ERROR(visit(frame.type, frame.flags, frame.lsn, payload));
                    ++report.replayed;
                } else if (frame.flags & flag_skippable) {
                    ++report.skipped;
                } else {
                    return Status::corruption("WAL segment " + path + ", record at offset " + std::to_string(offset) +
                                              ": record type " + std::to_string(frame.type) + " at LSN " +
                                              std::to_string(frame.lsn) +
                                              " is unknown to this version and not marked skippable; the log was "
                                              "written by a newer vecgraph");
                }
            }
            ++expected_lsn;
            offset += frame_bytes(frame.payload_bytes);
        }
    }
    report.next_lsn = expected_lsn;
    return report;
}

}  // namespace vecgraph::wal
