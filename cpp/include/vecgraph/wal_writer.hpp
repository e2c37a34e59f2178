// Writing the write-ahead log: framed appends, segment roll-over, durability by policy (group
// commit), and dropping segments a snapshot has made obsolete. Format: wal_format.hpp.
//
// Thread-safety: append() is not thread-safe; the caller serialises appends (it must anyway, to
// apply records in LSN order). sync_to(), start_sync(), sync(), drop_segments_before() and the
// accessors may be called from any thread, concurrently with each other and with append(). close() and the
// destructor must not run concurrently with any other call.
//
// Failure: after a failed write(2), fdatasync or segment creation (its tail marker included)
// the writer is failed for good. The call that met the error, and the first sync_to() for each appended record no
// fdatasync made durable, return StatusCode::io_error (the operating system's text for the
// records the failed fdatasync was to cover); sync_to() for a record an fdatasync made durable
// returns OK (that write did not fail); every other later append, sync, sync_to and
// drop_segments_before returns StatusCode::read_only saying the same, and appends nothing.
// A failed fdatasync is never retried, and no two fdatasyncs of the log overlap (of two that
// overlap on one file only one is told of a writeback error): after a failure the kernel may
// have dropped the dirty pages, so a later success would prove nothing. Reopening
// (recover() with truncate_tail, then Writer::open) is the way back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "vecgraph/status.hpp"
#include "vecgraph/wal_format.hpp"

namespace vecgraph::wal {

/// When appended records become durable.
///   always:   sync_to(lsn) returns once lsn is on disk; concurrent callers share one fdatasync.
///   interval: sync_to returns at once; a background thread fdatasyncs at most every
///             sync_interval_ms while there are unsynced records (a crash may lose that window).
///   off:      sync_to returns at once; only sync(), a segment roll and close() sync.
enum class SyncPolicy : std::uint8_t { always, interval, off };

struct WriterOptions {
    SyncPolicy sync = SyncPolicy::always;
    std::uint32_t sync_interval_ms = 100;  // interval policy only; at least 1
    /// A segment is closed and a new one started when the next record would take it past this
    /// size; a record larger than this gets a segment of its own.
    std::uint64_t segment_bytes = 64ull << 20;
    /// A record with a larger payload is refused (invalid_argument, nothing written); at most
    /// max_payload_bytes (1 GiB), the format's limit. Tests lower it.
    std::uint32_t max_record_bytes = max_payload_bytes;
    /// Group commit (policy "always"): when the last fdatasync covered several callers, the
    /// next leader waits at most this long for as many callers to append before it syncs, so
    /// one fdatasync covers them all. 0: never wait. A single writer never waits.
    std::uint32_t group_commit_wait_us = 100;
    /// Called instead of fdatasync(fd) on segment files and the tail marker when set (tests
    /// count syncs and inject failures). Returns 0, or -1 with errno set.
    std::function<int(int fd)> sync_hook;
    /// Where the tail marker goes (wal_format.hpp, TAIL MARKER): <graph folder>/WAL_TAIL. Empty:
    /// no marker is written.
    std::string tail_marker_path;
};

class Writer {
  public:
    /// Opens the log in `dir` (the folder is created if missing) for appending; the next record
    /// gets `next_lsn` (1 for a new database; after recovery, RecoveryReport::next_lsn).
    ///
    /// If the folder has segments, the last one (read once, every record checked) must belong
    /// to `uuid`, end in a valid record (recover() with truncate_tail has cut any torn tail; else
    /// corruption) and continue at next_lsn (else invalid_argument); the writer fdatasyncs it and
    /// appends to it. Otherwise it creates segment <next_lsn>.log: written as .log.tmp,
    /// fdatasynced, renamed, folder fsynced. Leftover .log.tmp files from a crash during creation
    /// are deleted. With options.tail_marker_path, the marker is then made to name the segment
    /// appended to (written only if it names another, or is missing or unreadable), and a
    /// leftover <marker>.tmp is deleted; a failure to write it fails the open.
    static Result<std::unique_ptr<Writer>> open(const std::string& dir, const Uuid& uuid, std::uint64_t next_lsn,
                                                const WriterOptions& options);

    /// close(), ignoring its Status.
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    /// Frames one record and writes it with one writev(2); returns its LSN (the previous + 1).
    /// Durability is sync_to's job. Before writing, rolls to a new segment if this record would
    /// take the current one past segment_bytes: fdatasync the old segment, create the new one,
    /// write the tail marker naming it (a failure there fails the writer).
    /// invalid_argument for type 0, flag bits other than flag_skippable, or more than
    /// max_payload_bytes of payload. Not thread-safe (see the top of this file).
    Result<std::uint64_t> append(std::uint8_t type, const void* payload, std::size_t bytes, std::uint8_t flags = 0);

    /// Makes every record up to `lsn` durable according to the policy: under `always` it returns
    /// once an fdatasync that started after the record was written has succeeded; a caller that
    /// finds a sync running waits for it and, if that did not cover `lsn`, leads the next one, so
    /// concurrent commits share fdatasyncs. Under `interval` and `off` it returns at once. An LSN
    /// not yet appended is invalid_argument. Thread-safe.
    Status sync_to(std::uint64_t lsn);

    /// Under `always`, asks the writer's syncer thread to fdatasync everything appended so far
    /// and returns at once: a caller with other work to do before sync_to() (an HNSW insert)
    /// overlaps that work with the fdatasync, and sync_to() then waits only for what is left
    /// of it. A sync already running or asked for that covers the last record is not asked
    /// for again. Nothing to do under the other policies, after close() or after a failure.
    /// Thread-safe.
    void start_sync();

    /// fdatasyncs everything appended so far, under every policy (before a checkpoint commits a
    /// snapshot, so that the log is never behind it). Thread-safe.
    Status sync();

    /// Ends the current segment (fdatasync) and starts the next one at the next LSN, so that a
    /// checkpoint at the last LSN can drop every older segment. Nothing to do when the current
    /// segment holds no record. The caller serialises it with append().
    Status roll_segment();
    /// Deletes, oldest first, the segments all of whose records have LSN < lsn (those whose
    /// successor starts at or below lsn), fsyncing the folder after each, so that a crash leaves
    /// the log without a gap (only its oldest segments gone); never the segment being written.
    /// Call with snapshot LSN + 1 after the snapshot is committed. Thread-safe.
    Status drop_segments_before(std::uint64_t lsn);

    /// Stops the syncer thread, fdatasyncs unsynced records unless the policy is off, and
    /// closes the segment. Returns read_only if the writer had failed. Later calls are errors.
    Status close();

    /// LSN of the last appended record (next_lsn - 1 right after open).
    std::uint64_t last_lsn() const noexcept;
    /// Every record up to this LSN is durable (records found at open count as durable).
    std::uint64_t synced_lsn() const noexcept;
    bool failed() const noexcept;
    const std::string& dir() const noexcept;

  private:
    struct Impl;
    explicit Writer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace vecgraph::wal
