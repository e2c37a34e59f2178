// Reading the write-ahead log: recovery (replay + torn-tail cut) and segment inspection.
//
// The format and the rules that decide what is a torn tail and what is corruption are in
// wal_format.hpp. The reader never trusts file content: every length is checked against the
// file before it is used, a damaged file gives StatusCode::corruption naming file and offset,
// and buffers never grow past the size of the file being read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "vecgraph/status.hpp"
#include "vecgraph/wal_format.hpp"

namespace vecgraph::wal {

/// What recovery found.
struct RecoveryReport {
    std::uint64_t first_lsn = 0;  // LSN of the first record in the log, 0 if there is none
    std::uint64_t last_lsn = 0;   // LSN of the last valid record, 0 if there is none
    /// LSN the next appended record must get to continue this log: last_lsn + 1, or the last
    /// segment's first LSN if no segment holds a record, or 0 if there is no segment.
    std::uint64_t next_lsn = 0;
    std::uint64_t segments = 0;  // segment files read (a removed torn-header segment not counted)
    std::uint64_t records = 0;   // valid records read, visited or not
    std::uint64_t replayed = 0;  // records passed to visit (lsn >= from_lsn, known type)
    std::uint64_t skipped = 0;   // records with lsn >= from_lsn of an unknown, skippable type
    std::uint64_t truncated_bytes = 0;  // size of the torn tail (cut if truncate_tail, else only found)
    std::string truncated_at;           // "<segment path>:<offset>" of the torn tail, empty if none
    /// Segments that hold only records below from_lsn (the next segment's name starts at or
    /// before it): kept to fall back to an older snapshot, not read, their headers checked.
    std::uint64_t fallback_segments = 0;
    /// "<path>: <problem>" of each such segment whose header is damaged (the fallback is gone;
    /// recovery from from_lsn does not need it).
    std::vector<std::string> fallback_damaged;
};

/// Called for each replayed record; `payload` is valid only during the call. A non-OK Status
/// stops recovery and is returned by recover().
using RecordVisitor =
    std::function<Status(std::uint8_t type, std::uint8_t flags, std::uint64_t lsn, std::string_view payload)>;

/// Reads every segment of the log in `dir` in LSN order, checking every record, and calls
/// `visit` in LSN order for each record with lsn >= from_lsn whose type is known; records of an
/// unknown type with the skippable flag are counted and skipped, without it they are corruption.
/// Records with lsn < from_lsn are checked but not interpreted.
///
/// A missing or empty folder is an empty log (OK, no records). If the first segment starts
/// after max(from_lsn, 1), the records in between are missing: corruption. A torn tail of the
/// last segment (wal_format.hpp, TORN TAIL) is reported; with `truncate_tail` it is also cut
/// (ftruncate + fsync; a last segment shorter than its header is deleted and the folder
/// fsynced) so that a Writer can append there. Everything else that is damaged is
/// StatusCode::corruption; a failing read, truncate or fsync is StatusCode::io_error.
///
/// With `tail_marker_path` (wal_format.hpp, TAIL MARKER), a last segment shorter than its header
/// that the marker names is deleted only after the marker is (and its folder fsynced): a crash
/// in between must not leave a marker naming a segment the log no longer has. The writer
/// writes a new marker when it attaches.
///
/// Not safe to run while a Writer has the folder open.
Result<RecoveryReport> recover(const std::string& dir, const Uuid& uuid, std::uint64_t from_lsn,
                               const RecordVisitor& visit, bool truncate_tail,
                               const std::string& tail_marker_path = {});

/// Reads the tail marker at `path` into *out: false if there is no such file, true if there is
/// and it is sound (its uuid is the caller's to check); corruption naming the file if it is
/// damaged, io_error if it cannot be read.
Result<bool> read_tail_marker(const std::string& path, TailMarker* out);

/// Checks that the log in `dir` still holds the newest segment the tail marker at
/// `marker_path` names: that some segment starts at or after the marker's first LSN. OK when
/// it does, when there is no marker, or when the marker belongs to another database than
/// `uuid`. Otherwise corruption naming the missing segment, the LSN from which logged writes
/// are lost (after the newest segment left's last record, and at least `from_lsn`, the first
/// LSN recovery needs), and the ways out: restore from an export, or remove the marker to open
/// the graph without those writes. A damaged marker is corruption too. Reads only: nothing on
/// disk changes.
Status check_tail(const std::string& dir, const std::string& marker_path, const Uuid& uuid, std::uint64_t from_lsn);

/// A segment file of the log.
struct SegmentFile {
    std::uint64_t first_lsn = 0;  // from the file name
    std::string path;
};

/// The segment files in `dir` (names <20 digits>.log), sorted by first LSN; a missing folder
/// has none. Does not open them.
Result<std::vector<SegmentFile>> list_segments(const std::string& dir);

/// Where the valid records of one segment end.
struct SegmentEnd {
    std::uint64_t first_lsn = 0;    // from the header
    std::uint64_t next_lsn = 0;     // LSN after the last valid record (first_lsn if it has none)
    std::uint64_t valid_bytes = 0;  // offset just past the last valid record (48 if it has none)
    std::uint64_t file_bytes = 0;   // size of the file; more than valid_bytes if a damaged or torn tail follows
};

/// Checks the header of the segment at `path` (it must belong to `uuid` and match its file name)
/// and walks its records up to the first invalid one. Corruption if the header is bad.
Result<SegmentEnd> read_segment_end(const std::string& path, const Uuid& uuid);

}  // namespace vecgraph::wal
