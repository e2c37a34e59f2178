// Write-ahead log writer: framing, segment creation and roll-over, group commit, the interval
// sync thread, and the failed (read-only) state.
#include "vecgraph/wal_writer.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <vector>

#include "vecgraph/wal_reader.hpp"

#include "wal_files.hpp"

namespace vecgraph::wal {

using detail::dir_of;
using detail::errno_text;
using detail::fsync_dir;
using detail::join_path;

namespace {

// Writes every byte of `iov`, continuing after short writes and EINTR.
Status write_all(int fd, struct iovec* iov, int count, const std::string& path) {
    while (count > 0) {
        ssize_t written = ::writev(fd, iov, count);
        if (written < 0 && errno == EINTR) continue;
        if (written < 0) return Status::io_error(errno_text("write", path, errno));
        if (written == 0) return Status::io_error("write of " + path + " failed: no bytes were written");
        auto left = static_cast<std::size_t>(written);
        while (count > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            ++iov;
            --count;
        }
        if (count > 0) {
            iov->iov_base = static_cast<char*>(iov->iov_base) + left;
            iov->iov_len -= left;
        }
    }
    return Status::OK();
}

// An open segment. Shared between the appender and a syncing thread, so that rolling to the
// next segment never closes a descriptor another thread is still fdatasyncing.
struct OpenSegment {
    int fd = -1;
    std::uint64_t first_lsn = 0;
    std::string path;

    OpenSegment(int fd_, std::uint64_t first_lsn_, std::string path_)
        : fd(fd_), first_lsn(first_lsn_), path(std::move(path_)) {}
    OpenSegment(const OpenSegment&) = delete;
    OpenSegment& operator=(const OpenSegment&) = delete;
    ~OpenSegment() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

struct Writer::Impl {
    std::string dir;
    Uuid uuid{};
    WriterOptions options;

    // Owned by the appending thread.
    std::uint64_t next_lsn = 1;
    std::uint64_t segment_size = 0;  // bytes in the current segment
    bool closed = false;

    mutable std::mutex mu;
    std::condition_variable sync_done;    // a group-commit leader finished
    std::condition_variable wake_syncer;  // the syncer thread should stop, or sync (start_sync)
    std::shared_ptr<OpenSegment> current;  // guarded by mu; replaced only by the appending thread
    std::atomic<std::uint64_t> written_lsn{0};  // stored under mu
    std::atomic<std::uint64_t> synced_lsn{0};   // stored under mu
    std::atomic<bool> has_failed{false};       // stored under mu; never cleared
    std::string failure;                        // guarded by mu: why the writer is read-only (may be
                                                // empty: out of memory when it failed)
    bool syncing = false;                       // guarded by mu: a leader's fdatasync is running
    std::condition_variable caller_arrived;     // a caller entered sync_up_to
    std::vector<std::uint64_t> waiting_lsns;    // guarded by mu: the LSN of each caller in sync_up_to
    std::size_t last_round_callers = 0;         // guarded by mu: callers the last fdatasync covered
    std::uint64_t synced_at_failure = 0;        // guarded by mu: synced_lsn when the writer failed
    std::uint64_t failed_sync_target = 0;       // guarded by mu: the LSN the failed fdatasync was to cover
    std::string failed_sync_error;              // guarded by mu: that fdatasync's error
    std::unordered_set<std::uint64_t> failed_sync_reported;  // guarded by mu: LSNs told that io_error
    std::uint64_t sync_requested_lsn = 0;       // guarded by mu: start_sync() asked for a sync up to here
    bool stop_syncer = false;                   // guarded by mu
    std::thread syncer;                         // policies interval and always (run_syncer)

    int data_sync(int fd) {
        if (options.sync_hook) return options.sync_hook(fd);
#if defined(__APPLE__)
        return ::fcntl(fd, F_FULLFSYNC);
#else
        return ::fdatasync(fd);
#endif
    }

    // Puts the writer in the failed state (mu held) without allocating, so that an allocation
    // failing afterwards cannot leave a later fdatasync trusted.
    void mark_failed_locked() noexcept {
        if (has_failed.load()) return;
        synced_at_failure = synced_lsn.load();
        has_failed.store(true);
        caller_arrived.notify_all();  // a leader waiting for callers issues no fdatasync now
    }

    // Puts the writer in the failed state (mu held). `what` is the operating system's error;
    // `verb` says what could not be done to the log. Returns the io_error for the current call;
    // later calls get read_only with the message kept here.
    Status fail_locked(const std::string& what, const char* verb) {
        mark_failed_locked();
        if (failure.empty())  // the first failure's (or, if that ran out of memory, the next one's)
            failure = std::string("the WAL could not be ") + verb + " (" + what +
                      "); the graph is read-only, reopen it to recover";
        return Status::io_error(what);
    }

    // The messages kept after a failure, or what stands in for one that could not be made.
    std::string failure_message() const {
        return failure.empty() ? "the WAL failed (out of memory for its error message); the graph is read-only, "
                                 "reopen it to recover"
                               : failure;
    }
    std::string failed_sync_message() const {
        return failed_sync_error.empty() ? "fdatasync of the WAL failed (out of memory for its error message)"
                                         : failed_sync_error;
    }
    Status fail(const std::string& what, const char* verb) {
        std::lock_guard<std::mutex> lock(mu);
        return fail_locked(what, verb);
    }
    void mark_failed() noexcept {
        std::lock_guard<std::mutex> lock(mu);
        mark_failed_locked();
    }
    // Runs `io`, a call that allocates only to describe its failure: a std::bad_alloc from it
    // means that failure, so the writer is marked failed before the exception goes on.
    template <typename io_at>
    Status failed_if_throws(io_at&& io) {
        try {
            return io();
        } catch (const std::bad_alloc&) {
            mark_failed();
            throw;
        }
    }
    Status read_only_status() const {
        std::lock_guard<std::mutex> lock(mu);
        return Status::read_only(failure_message());
    }

    // Makes the tail marker name the segment starting at `first_lsn` (wal_format.hpp, TAIL
    // MARKER): WAL_TAIL.tmp written and fdatasynced, renamed over WAL_TAIL, its folder fsynced.
    // Nothing to do without options.tail_marker_path.
    Status write_tail_marker(std::uint64_t first_lsn) {
        const std::string& path = options.tail_marker_path;
        if (path.empty()) return Status::OK();
        const std::string tmp_path = path + ".tmp";
        std::uint8_t bytes[tail_marker_bytes];
        encode_tail_marker(TailMarker{uuid, first_lsn}, bytes);
        int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) return Status::io_error(errno_text("create", tmp_path, errno));
        struct iovec iov = {bytes, sizeof bytes};
        Status status = write_all(fd, &iov, 1, tmp_path);
        if (status.ok() && data_sync(fd) != 0) status = Status::io_error(errno_text("fdatasync", tmp_path, errno));
        ::close(fd);
        if (status.ok() && ::rename(tmp_path.c_str(), path.c_str()) != 0)
            status = Status::io_error(errno_text("rename", tmp_path, errno));
        if (!status.ok()) {
            ::unlink(tmp_path.c_str());
            return status;
        }
        return fsync_dir(dir_of(path));
    }

    // Creates segment <first_lsn>.log: header to a .tmp file, fdatasync, rename, fsync the
    // folder; then the tail marker names it, before any record is appended to it.
    Result<std::shared_ptr<OpenSegment>> create_segment(std::uint64_t first_lsn) {
        std::string path = join_path(dir, segment_file_name(first_lsn));
        std::string tmp_path = path + ".tmp";
        int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) return Status::io_error(errno_text("create", tmp_path, errno));
        std::shared_ptr<OpenSegment> segment;
        try {
            segment = std::make_shared<OpenSegment>(fd, first_lsn, path);
        } catch (const std::bad_alloc&) {
            ::close(fd);
            ::unlink(tmp_path.c_str());
            throw;
        }
        std::uint8_t header[segment_header_bytes];
        encode_segment_header(SegmentHeader{uuid, first_lsn}, header);
        struct iovec iov = {header, sizeof header};
        Status status = write_all(fd, &iov, 1, tmp_path);
        if (status.ok() && data_sync(fd) != 0) status = Status::io_error(errno_text("fdatasync", tmp_path, errno));
        if (status.ok() && ::rename(tmp_path.c_str(), path.c_str()) != 0)
            status = Status::io_error(errno_text("rename", tmp_path, errno));
        if (!status.ok()) {
            ::unlink(tmp_path.c_str());
            return status;
        }
        // The segment is in the folder now: a failed fsync of the folder fails the writer (see
        // roll), also when its message cannot be made.
        Status synced = failed_if_throws([&] { return fsync_dir(dir); });
        if (!synced.ok()) {
            mark_failed();  // before the status is handed on (a copy of its message could throw)
            return Result<std::shared_ptr<OpenSegment>>(std::move(synced));
        }
        // Only now, with the segment durable in the folder, may the marker name it: after a
        // crash the newest segment starts at or after the marker's LSN. A failure here is a
        // failed segment creation (the segment stays, empty; recovery accepts it).
        Status marked = failed_if_throws([&] { return write_tail_marker(first_lsn); });
        if (!marked.ok()) {
            mark_failed();
            return Result<std::shared_ptr<OpenSegment>>(std::move(marked));
        }
        return segment;
    }

    // Ends the current segment (fdatasync) and starts the next at next_lsn. Appending thread only.
    Status roll() {
        std::shared_ptr<OpenSegment> old = current;  // only this thread replaces `current`
        {
            // One fdatasync of the log at a time: of two that overlap on one file, only one is
            // told of a writeback error, so the other's success would prove nothing.
            std::unique_lock<std::mutex> lock(mu);
            sync_done.wait(lock, [this] { return !syncing; });
            if (has_failed.load()) return Status::read_only(failure_message());  // no fdatasync after a failed one
            syncing = true;
            if (!lead_fdatasync(lock, *old, next_lsn - 1)) return Status::io_error(failed_sync_message());
        }
        Result<std::shared_ptr<OpenSegment>> created = create_segment(next_lsn);
        if (!created.ok()) return fail(created.status().message(), "written");
        std::lock_guard<std::mutex> lock(mu);
        current = std::move(created.value());
        segment_size = segment_header_bytes;
        return Status::OK();
    }

    // The fdatasync of `segment` that makes the records up to `target` durable, run by the
    // thread that set `syncing` (mu held by `lock`, released during the call). Records the
    // outcome; false when it failed (then failed_sync_error says why, and the writer has failed).
    bool lead_fdatasync(std::unique_lock<std::mutex>& lock, const OpenSegment& segment, std::uint64_t target) {
        lock.unlock();
        const int rc = data_sync(segment.fd);
        const int error = errno;
        lock.lock();
        syncing = false;
        sync_done.notify_all();
        if (rc != 0) {
            // Each record it was to make durable fails its write once (answer_after_failure).
            // The failed state comes first: building the messages can run out of memory.
            failed_sync_target = target;
            mark_failed_locked();
            try {
                failed_sync_error = errno_text("fdatasync", segment.path, error);
                (void)fail_locked(failed_sync_error, "synced");
            } catch (const std::bad_alloc&) {
            }
            return false;
        }
        if (synced_lsn.load() < target) synced_lsn.store(target);
        // A write(2) or segment creation that failed meanwhile left these records durable.
        if (has_failed.load() && synced_at_failure < target) synced_at_failure = target;
        return true;
    }

    // What sync_up_to answers for `lsn` once the writer has failed (mu held): OK for a record an
    // fdatasync made durable (that write succeeded); io_error, once, for any other record (its
    // write failed: it is in the log, not known to be on disk); read_only after that.
    Status answer_after_failure(std::uint64_t lsn, bool caller) {
        if (lsn <= synced_at_failure) return Status::OK();
        // The syncer thread reports to no one: it must not take a caller's io_error.
        if (!caller || !failed_sync_reported.insert(lsn).second) return Status::read_only(failure_message());
        return Status::io_error(lsn <= failed_sync_target ? failed_sync_message() : failure_message());
    }

    // Group commit: returns once every record up to `lsn` (<= written_lsn) is durable. One
    // caller at a time leads an fdatasync covering everything written when it started; callers
    // arriving meanwhile wait, and return if it covered them or else lead the next one.
    //
    // The syncer thread calls it too (`caller` false, for start_sync): it is not counted as a
    // caller and never waits for callers to arrive. When an fdatasync fails, whoever ran it, the
    // first caller asking for each record it was to make durable gets its io_error (the write
    // that failed); a caller whose record an earlier fdatasync made durable gets OK; every other
    // call gets read_only.
    Status sync_up_to(std::uint64_t lsn, bool caller = true) {
        std::unique_lock<std::mutex> lock(mu);
        // A caller that cannot be listed (out of memory) is only left out of the group-commit
        // wait's count: its write is done, so that call must not fail now.
        bool listed = false;
        if (caller) {
            try {
                waiting_lsns.push_back(lsn);
                listed = true;
            } catch (const std::bad_alloc&) {
            }
        }
        struct Leave {
            std::vector<std::uint64_t>& lsns;
            std::uint64_t lsn;
            bool listed;
            ~Leave() {  // mu held
                if (listed) lsns.erase(std::find(lsns.begin(), lsns.end(), lsn));
            }
        } leave{waiting_lsns, lsn, listed};
        if (caller) caller_arrived.notify_one();
        for (;;) {
            if (has_failed.load()) return answer_after_failure(lsn, caller);
            if (synced_lsn.load() >= lsn) return Status::OK();
            if (!syncing) break;
            sync_done.wait(lock);
        }
        syncing = true;
        // Callers not yet durable (each has appended its record: all are covered below).
        auto unsynced_callers = [this] {
            std::uint64_t synced = synced_lsn.load();
            return static_cast<std::size_t>(
                std::count_if(waiting_lsns.begin(), waiting_lsns.end(), [&](std::uint64_t l) { return l > synced; }));
        };
        // When the last fdatasync covered several callers, the others are most likely writing
        // their next records right now: wait a little for as many callers, so that this
        // fdatasync covers them too instead of leaving them to the next one. A lone writer
        // never waits.
        if (caller) {
            if (options.sync == SyncPolicy::always && last_round_callers > 1 && options.group_commit_wait_us > 0 &&
                unsynced_callers() < last_round_callers)
                caller_arrived.wait_for(lock, std::chrono::microseconds(options.group_commit_wait_us),
                                        [&] { return unsynced_callers() >= last_round_callers || has_failed.load(); });
            last_round_callers = unsynced_callers();
            if (has_failed.load()) {  // failed while it waited (a write(2)): no fdatasync after that
                syncing = false;
                sync_done.notify_all();
                return answer_after_failure(lsn, caller);
            }
        }
        std::uint64_t target = written_lsn.load();
        std::shared_ptr<OpenSegment> segment = current;
        if (lead_fdatasync(lock, *segment, target)) return Status::OK();
        if (caller) failed_sync_reported.insert(lsn);
        return Status::io_error(failed_sync_message());
    }

    // The syncer thread. Interval policy: at most one fdatasync per interval, only when records
    // are unsynced. Always policy: an fdatasync whenever start_sync() has asked for one that no
    // sync has covered yet, so that it runs while the caller does other work before sync_to().
    void run_syncer() {
        const bool on_request = options.sync == SyncPolicy::always;
        const auto interval = std::chrono::milliseconds(options.sync_interval_ms);
        std::unique_lock<std::mutex> lock(mu);
        while (!stop_syncer && !has_failed.load()) {
            if (on_request)
                wake_syncer.wait(lock, [this] { return stop_syncer || sync_requested_lsn > synced_lsn.load(); });
            else
                wake_syncer.wait_for(lock, interval, [this] { return stop_syncer; });
            if (stop_syncer || has_failed.load()) break;
            std::uint64_t target = on_request ? sync_requested_lsn : written_lsn.load();
            if (target <= synced_lsn.load()) continue;
            lock.unlock();
            try {
                (void)sync_up_to(target, false);  // a failure is kept in the writer and reported to callers
            } catch (const std::bad_alloc&) {
                // Only a failed fdatasync's status allocates here, after the writer has failed.
            }
            lock.lock();
        }
    }
};

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Writer::~Writer() {
    try {
        (void)close();
    } catch (const std::bad_alloc&) {  // its status could not be made; the syncer is stopped
    }
}

Result<std::unique_ptr<Writer>> Writer::open(const std::string& dir, const Uuid& uuid, std::uint64_t next_lsn,
                                             const WriterOptions& options) {
    if (next_lsn == 0) return Status::invalid_argument("next_lsn must be at least 1 (LSN 0 is never used)");
    if (options.segment_bytes <= segment_header_bytes)
        return Status::invalid_argument("segment_bytes is " + std::to_string(options.segment_bytes) +
                                        ", it must exceed the " + std::to_string(segment_header_bytes) +
                                        "-byte segment header");
    if (options.sync == SyncPolicy::interval && options.sync_interval_ms == 0)
        return Status::invalid_argument("sync_interval_ms must be at least 1 under the interval policy");

    std::error_code ec;
    bool created_dir = std::filesystem::create_directories(dir, ec);
    if (ec) return Status::io_error("create_directories of " + dir + " failed: " + ec.message());
    if (created_dir) {
        // The new folder's entry lives in its parent.
        std::filesystem::path path = std::filesystem::absolute(dir, ec).lexically_normal();
        if (ec) return Status::io_error("absolute path of " + dir + " failed: " + ec.message());
        if (path.filename().empty()) path = path.parent_path();  // "/x/wal/" -> "/x/wal"
        VG_RETURN_IF_ERROR(fsync_dir(path.parent_path().string()));
    }

    // A segment whose creation a crash interrupted: never renamed, so it holds no record.
    if (DIR* handle = ::opendir(dir.c_str())) {
        std::vector<std::string> leftovers;
        while (struct dirent* entry = ::readdir(handle)) {
            std::string name = entry->d_name;
            std::uint64_t lsn = 0;
            if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
                parse_segment_file_name(name.substr(0, name.size() - 4), &lsn))
                leftovers.push_back(join_path(dir, name));
        }
        ::closedir(handle);
        for (const std::string& path : leftovers)
            if (::unlink(path.c_str()) != 0 && errno != ENOENT)
                return Status::io_error(errno_text("unlink", path, errno));
    } else {
        return Status::io_error(errno_text("opendir", dir, errno));
    }
    // A marker whose writing a crash interrupted: never renamed, so never read.
    if (!options.tail_marker_path.empty()) {
        const std::string leftover = options.tail_marker_path + ".tmp";
        if (::unlink(leftover.c_str()) != 0 && errno != ENOENT)
            return Status::io_error(errno_text("unlink", leftover, errno));
    }

    auto impl = std::make_unique<Impl>();
    impl->dir = dir;
    impl->uuid = uuid;
    impl->options = options;
    impl->next_lsn = next_lsn;
    impl->written_lsn.store(next_lsn - 1);
    impl->synced_lsn.store(next_lsn - 1);

    Result<std::vector<SegmentFile>> listed = list_segments(dir);
    if (!listed.ok()) return listed.status();
    if (!listed.value().empty()) {
        const SegmentFile& last = listed.value().back();
        Result<SegmentEnd> end = read_segment_end(last.path, uuid);
        if (!end.ok()) return end.status();
        const SegmentEnd& e = end.value();
        if (e.valid_bytes != e.file_bytes)
            return Status::corruption("WAL segment " + last.path + " has " +
                                      std::to_string(e.file_bytes - e.valid_bytes) +
                                      " bytes of damaged or torn data from offset " + std::to_string(e.valid_bytes) +
                                      "; recover the log with truncate_tail before opening a writer");
        if (e.next_lsn != next_lsn)
            return Status::invalid_argument("the WAL in " + dir + " continues at LSN " + std::to_string(e.next_lsn) +
                                            " (segment " + last.path + "), but the writer was asked to start at LSN " +
                                            std::to_string(next_lsn));
        int fd = ::open(last.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0) return Status::io_error(errno_text("open", last.path, errno));
        auto segment = std::make_shared<OpenSegment>(fd, e.first_lsn, last.path);
        // The records recovery read may still be only in the page cache.
        if (impl->data_sync(fd) != 0) return Status::io_error(errno_text("fdatasync", last.path, errno));
        // The marker names the segment appended to (a folder written before markers has none;
        // the one there may name this segment already).
        if (!options.tail_marker_path.empty()) {
            TailMarker marker;
            Result<bool> found = read_tail_marker(options.tail_marker_path, &marker);
            if (!found.ok() || !found.value() || marker.uuid != uuid || marker.first_lsn != e.first_lsn) {
                VG_RETURN_IF_ERROR(fsync_dir(dir));  // the segment's name is durable before the marker's
                VG_RETURN_IF_ERROR(impl->write_tail_marker(e.first_lsn));
            }
        }
        impl->current = std::move(segment);
        impl->segment_size = e.file_bytes;
    } else {
        Result<std::shared_ptr<OpenSegment>> created = impl->create_segment(next_lsn);
        if (!created.ok()) return created.status();
        impl->current = std::move(created.value());
        impl->segment_size = segment_header_bytes;
    }

    if (options.sync != SyncPolicy::off) {
        Impl* state = impl.get();
        impl->syncer = std::thread([state] { state->run_syncer(); });
    }
    return std::unique_ptr<Writer>(new Writer(std::move(impl)));
}

Result<std::uint64_t> Writer::append(std::uint8_t type, const void* payload, std::size_t bytes, std::uint8_t flags) {
    Impl& s = *impl_;
    if (s.closed) return Status::invalid_argument("append to a closed WAL writer");
    if (s.has_failed.load()) return s.read_only_status();
    if (type == 0) return Status::invalid_argument("record type 0 is reserved; record types start at 1");
    if ((flags & ~flag_skippable) != 0)
        return Status::invalid_argument("record flags " + std::to_string(flags) +
                                        " set undefined bits; only bit 0 (skippable) is defined");
    const std::uint32_t limit = std::min(s.options.max_record_bytes, max_payload_bytes);
    if (bytes > limit)
        return Status::invalid_argument("record payload is " + std::to_string(bytes) + " bytes, the WAL limit is " +
                                        std::to_string(limit));
    if (bytes > 0 && payload == nullptr) return Status::invalid_argument("record payload is null");

    const std::uint64_t total = frame_bytes(bytes);
    if (s.segment_size > segment_header_bytes && s.segment_size + total > s.options.segment_bytes)
        VG_RETURN_IF_ERROR(s.roll());

    const std::uint64_t lsn = s.next_lsn;
    std::uint8_t header[frame_header_bytes];
    encode_frame_header(type, flags, lsn, payload, static_cast<std::uint32_t>(bytes), header);
    static const std::uint8_t zeros[frame_alignment] = {};
    struct iovec iov[3] = {{header, frame_header_bytes},
                           {const_cast<void*>(payload), bytes},
                           {const_cast<std::uint8_t*>(zeros), std::size_t(total - frame_header_bytes - bytes)}};
    const OpenSegment& segment = *s.current;  // only this thread replaces `current`
    // Out of memory describing a failed write: part of the frame may be in the file, so nothing
    // may be appended after it.
    Status written = s.failed_if_throws([&] { return write_all(segment.fd, iov, 3, segment.path); });
    if (!written.ok()) return s.fail(written.message(), "written");

    s.segment_size += total;
    s.next_lsn = lsn + 1;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        s.written_lsn.store(lsn);
    }
    return lsn;
}

Status Writer::roll_segment() {
    Impl& s = *impl_;
    if (s.closed) return Status::invalid_argument("roll_segment on a closed WAL writer");
    if (s.has_failed.load()) return s.read_only_status();
    if (s.segment_size <= segment_header_bytes) return Status::OK();
    return s.roll();
}

Status Writer::sync_to(std::uint64_t lsn) {
    Impl& s = *impl_;
    if (s.closed) return Status::invalid_argument("sync_to on a closed WAL writer");
    std::uint64_t written = s.written_lsn.load();
    if (lsn > written)
        return Status::invalid_argument("sync_to(" + std::to_string(lsn) + "): the last appended LSN is " +
                                        std::to_string(written));
    if (s.options.sync != SyncPolicy::always) return s.has_failed.load() ? s.read_only_status() : Status::OK();
    return s.sync_up_to(lsn);  // after a failure: io_error for a record it failed to sync, else read_only
}

void Writer::start_sync() {
    Impl& s = *impl_;
    if (s.closed || s.options.sync != SyncPolicy::always) return;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        std::uint64_t written = s.written_lsn.load();
        if (s.has_failed.load() || written <= s.synced_lsn.load() || written <= s.sync_requested_lsn) return;
        s.sync_requested_lsn = written;
    }
    s.wake_syncer.notify_one();
}

Status Writer::sync() {
    Impl& s = *impl_;
    if (s.closed) return Status::invalid_argument("sync on a closed WAL writer");
    return s.sync_up_to(s.written_lsn.load());
}

Status Writer::drop_segments_before(std::uint64_t lsn) {
    Impl& s = *impl_;
    if (s.closed) return Status::invalid_argument("drop_segments_before on a closed WAL writer");
    if (s.has_failed.load()) return s.read_only_status();
    std::uint64_t current_first = 0;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        current_first = s.current->first_lsn;
    }
    Result<std::vector<SegmentFile>> listed = list_segments(s.dir);
    if (!listed.ok()) return listed.status();
    const std::vector<SegmentFile>& segments = listed.value();
    for (std::size_t i = 0; i < segments.size() && segments[i].first_lsn < current_first; ++i) {
        std::uint64_t successor_first = i + 1 < segments.size() ? segments[i + 1].first_lsn : current_first;
        if (successor_first > lsn) break;  // this segment holds LSN successor_first - 1 >= lsn
        if (::unlink(segments[i].path.c_str()) != 0 && errno != ENOENT)
            return Status::io_error(errno_text("unlink", segments[i].path, errno));
        // One deletion durable before the next: a crash may leave the oldest segments gone,
        // never one with an older one still there (an LSN gap recovery would refuse).
        VG_RETURN_IF_ERROR(fsync_dir(s.dir));
    }
    return Status::OK();
}

Status Writer::close() {
    Impl& s = *impl_;
    if (s.closed) return Status::OK();
    {
        std::lock_guard<std::mutex> lock(s.mu);
        s.stop_syncer = true;
    }
    s.wake_syncer.notify_all();
    if (s.syncer.joinable()) s.syncer.join();
    Status status;
    if (s.has_failed.load())
        status = s.read_only_status();
    else if (s.options.sync != SyncPolicy::off)
        status = s.sync_up_to(s.written_lsn.load());
    s.closed = true;
    std::lock_guard<std::mutex> lock(s.mu);
    s.current.reset();
    return status;
}

std::uint64_t Writer::last_lsn() const noexcept { return impl_->written_lsn.load(); }
std::uint64_t Writer::synced_lsn() const noexcept { return impl_->synced_lsn.load(); }
bool Writer::failed() const noexcept { return impl_->has_failed.load(); }
const std::string& Writer::dir() const noexcept { return impl_->dir; }

}  // namespace vecgraph::wal
