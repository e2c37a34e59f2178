// Write-ahead log: every recovery rule of wal_format.hpp as a named case, the writer's sync
// policies and failure state, and the v1 golden segment.
#include <limits.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "child_process.hpp"
#include "temp_dir.hpp"
#include "vecgraph/wal_format.hpp"
#include "vecgraph/wal_reader.hpp"
#include "vecgraph/wal_writer.hpp"

using namespace vecgraph;
using namespace vecgraph::wal;
namespace fs = std::filesystem;

// While positive, counts down the allocations of threads other than the one that armed it
// (which clears its own counted_thread); the one that brings it to zero throws std::bad_alloc.
// (The library's operator delete frees with std::free, which fits this operator new.)
std::atomic<long> fail_thread_allocation_in{0};
thread_local bool counted_thread = true;

void* operator new(std::size_t bytes) {
    if (counted_thread && fail_thread_allocation_in.load(std::memory_order_relaxed) > 0 &&
        fail_thread_allocation_in.fetch_sub(1) == 1)
        throw std::bad_alloc();
    if (void* p = std::malloc(bytes ? bytes : 1)) return p;
    throw std::bad_alloc();
}

// While set, the next fsync(2) (the WAL's fsync of its folder) fails with EIO, and then arms
// fail_thread_allocation_in with this count. Every other fsync is the system's.
std::atomic<long> fail_next_fsync_then_allocation{0};
std::atomic<long> fsync_calls{0};  // fsync(2) calls so far (the WAL fsyncs only folders)

extern "C" int fsync(int fd) {
    ++fsync_calls;
    if (const long k = fail_next_fsync_then_allocation.exchange(0)) {
        fail_thread_allocation_in = k;
        errno = EIO;
        return -1;
    }
    return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace {

const Uuid db_uuid = {0x6b, 0x1e, 0x00, 0x5a, 0x91, 0x2c, 0x4f, 0x0e,
                      0x8d, 0x33, 0x70, 0x12, 0xab, 0xcd, 0xef, 0x01};
const Uuid other_uuid = {0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88,
                         0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00};

const Status& status_of(const Status& status) { return status; }
template <typename value_at>
const Status& status_of(const Result<value_at>& result) {
    return result.status();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

#define REQUIRE_OK(expr)                                                                                   \
    do {                                                                                                   \
        const auto& vg_result_ = (expr);                                                                   \
        if (!status_of(vg_result_).ok()) {                                                                 \
            vecgraph_test::report(__FILE__, __LINE__, std::string(#expr) + ": " + status_of(vg_result_).message()); \
            throw vecgraph_test::require_failed_t{};                                                       \
        }                                                                                                  \
    } while (0)

namespace {

// A fresh temp folder (removed with everything in it) whose wal/ subfolder the tests write.
struct TempDir : vecgraph_test::TempDir {
    TempDir() : vecgraph_test::TempDir("vecgraph_wal") {}
    std::string wal() const { return path("wal"); }
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

void append_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::vector<std::string> segment_paths(const std::string& dir) {
    auto listed = list_segments(dir);
    std::vector<std::string> paths;
    if (listed.ok())
        for (const SegmentFile& segment : listed.value()) paths.push_back(segment.path);
    return paths;
}

// Writer options without real fdatasyncs (the durability cases below count or fail them).
WriterOptions fast_options(std::uint64_t segment_bytes = 64ull << 20) {
    WriterOptions options;
    options.sync = SyncPolicy::always;
    options.segment_bytes = segment_bytes;
    options.sync_hook = [](int) { return 0; };
    return options;
}

std::unique_ptr<Writer> open_writer(const std::string& dir, std::uint64_t next_lsn,
                                    const WriterOptions& options = fast_options()) {
    auto opened = Writer::open(dir, db_uuid, next_lsn, options);
    REQUIRE_OK(opened);
    return std::move(opened).value();
}

struct Record {
    std::uint8_t type = 0;
    std::uint8_t flags = 0;
    std::uint64_t lsn = 0;
    std::string payload;
};

struct Replayed {
    Status status;
    RecoveryReport report;
    std::vector<Record> records;
};

Replayed replay(const std::string& dir, bool truncate_tail = false, std::uint64_t from_lsn = 1,
                const Uuid& uuid = db_uuid) {
    Replayed out;
    auto result = recover(
        dir, uuid, from_lsn,
        [&](std::uint8_t type, std::uint8_t flags, std::uint64_t lsn, std::string_view payload) {
            out.records.push_back({type, flags, lsn, std::string(payload)});
            return Status::OK();
        },
        truncate_tail);
    out.status = result.status();
    if (result.ok()) out.report = result.value();
    return out;
}

// Payload of the record with LSN `lsn` in the logs the cases below write: letters, never a frame.
std::string payload_for(std::uint64_t lsn, std::size_t bytes) {
    std::string payload(bytes, ' ');
    for (std::size_t i = 0; i < bytes; ++i) payload[i] = char('a' + (lsn * 7 + i) % 26);
    return payload;
}

// Appends one record per size (type add_nodes, payload_for(lsn, size)) and closes the writer.
void write_log(const std::string& dir, const std::vector<std::size_t>& sizes, std::uint64_t next_lsn = 1,
               const WriterOptions& options = fast_options()) {
    auto writer = open_writer(dir, next_lsn, options);
    for (std::size_t size : sizes) {
        std::string payload = payload_for(writer->last_lsn() + 1, size);
        REQUIRE_OK(writer->append(std::uint8_t(RecordType::add_nodes), payload.data(), payload.size()));
    }
    REQUIRE_OK(writer->close());
}

// Offsets at which each record of a one-segment log written by write_log starts, plus its end.
std::vector<std::uint64_t> frame_offsets(const std::vector<std::size_t>& sizes) {
    std::vector<std::uint64_t> offsets = {segment_header_bytes};
    for (std::size_t size : sizes) offsets.push_back(offsets.back() + frame_bytes(size));
    return offsets;
}

// A frame built by hand (for records the writer refuses to produce).
std::string make_frame(std::uint8_t type, std::uint8_t flags, std::uint64_t lsn, const std::string& payload) {
    std::string frame(frame_bytes(payload.size()), '\0');
    auto* p = reinterpret_cast<std::uint8_t*>(frame.data());
    std::memcpy(p + frame_header_bytes, payload.data(), payload.size());
    encode_frame_header(type, flags, lsn, payload.data(), std::uint32_t(payload.size()), p);
    return frame;
}

std::string make_segment_header(const Uuid& uuid, std::uint64_t first_lsn) {
    std::string header(segment_header_bytes, '\0');
    encode_segment_header(SegmentHeader{uuid, first_lsn}, reinterpret_cast<std::uint8_t*>(header.data()));
    return header;
}

void flip_bit(std::string& bytes, std::size_t bit) { bytes[bit / 8] = char(bytes[bit / 8] ^ (1 << (bit % 8))); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Format details.

TEST_CASE("format: masked CRC round-trips and differs from the plain CRC; names are 20 digits") {
    for (std::uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u}) {
        CHECK_EQ(unmask_crc(mask_crc(crc)), crc);
        CHECK(mask_crc(crc) != crc);
    }
    CHECK_EQ(segment_file_name(1), std::string("00000000000000000001.log"));
    CHECK_EQ(segment_file_name(UINT64_MAX), std::string("18446744073709551615.log"));
    std::uint64_t lsn = 0;
    CHECK(parse_segment_file_name("00000000000000000042.log", &lsn));
    CHECK_EQ(lsn, 42u);
    CHECK(parse_segment_file_name("18446744073709551615.log", &lsn));
    CHECK_EQ(lsn, UINT64_MAX);
    CHECK(!parse_segment_file_name("18446744073709551616.log", &lsn));  // overflows u64
    CHECK(!parse_segment_file_name("0000000000000000042.log", &lsn));
    CHECK(!parse_segment_file_name("00000000000000000042.log.tmp", &lsn));
    CHECK(!parse_segment_file_name("0000000000000000004x.log", &lsn));
    CHECK_EQ(frame_bytes(0), 24u);
    CHECK_EQ(frame_bytes(4), 24u);
    CHECK_EQ(frame_bytes(5), 32u);
    CHECK_EQ(format_uuid(db_uuid), std::string("6b1e005a-912c-4f0e-8d33-7012abcdef01"));
}

// ---------------------------------------------------------------------------------------------
// Recovery rules.

TEST_CASE("recovery: a missing or empty folder is an empty log") {
    TempDir tmp;
    Replayed missing = replay(tmp.wal());
    REQUIRE_OK(missing.status);
    CHECK_EQ(missing.report.records, 0u);
    CHECK_EQ(missing.report.segments, 0u);
    CHECK_EQ(missing.report.next_lsn, 0u);
    fs::create_directories(tmp.wal());
    write_file(tmp.wal() + "/notes.txt", "not a segment");
    Replayed empty = replay(tmp.wal());
    REQUIRE_OK(empty.status);
    CHECK_EQ(empty.report.records, 0u);
    CHECK(empty.records.empty());
}

TEST_CASE("recovery: round trip of many random-size records across several segments, then resume") {
    TempDir tmp;
    std::mt19937 rng(21);
    std::vector<Record> written;
    auto writer = open_writer(tmp.wal(), 1, fast_options(4096));
    for (int i = 0; i < 400; ++i) {
        std::size_t size = (i % 50 == 0) ? 5000 : rng() % 700;  // some records larger than a segment
        std::string payload(size, '\0');
        for (auto& c : payload) c = char(rng());
        std::uint8_t type = std::uint8_t(1 + rng() % 7);
        auto lsn = writer->append(type, payload.data(), payload.size());
        REQUIRE_OK(lsn);
        CHECK_EQ(lsn.value(), std::uint64_t(i + 1));
        written.push_back({type, 0, lsn.value(), payload});
    }
    REQUIRE_OK(writer->sync_to(400));
    CHECK_EQ(writer->synced_lsn(), 400u);
    REQUIRE_OK(writer->close());
    std::size_t segments = segment_paths(tmp.wal()).size();
    CHECK(segments > 20);

    Replayed got = replay(tmp.wal());
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, 400u);
    CHECK_EQ(got.report.replayed, 400u);
    CHECK_EQ(got.report.first_lsn, 1u);
    CHECK_EQ(got.report.last_lsn, 400u);
    CHECK_EQ(got.report.next_lsn, 401u);
    CHECK_EQ(got.report.segments, std::uint64_t(segments));
    CHECK_EQ(got.report.truncated_bytes, 0u);
    CHECK(got.report.truncated_at.empty());
    REQUIRE(got.records.size() == written.size());
    for (std::size_t i = 0; i < written.size(); ++i) {
        CHECK_EQ(int(got.records[i].type), int(written[i].type));
        CHECK_EQ(got.records[i].lsn, written[i].lsn);
        CHECK(got.records[i].payload == written[i].payload);
    }
    // Every segment but the last holds at most segment_bytes unless it is a single large record.
    for (const std::string& path : segment_paths(tmp.wal())) {
        auto end = read_segment_end(path, db_uuid);
        REQUIRE_OK(end);
        bool single = end.value().next_lsn - end.value().first_lsn == 1;
        CHECK(end.value().file_bytes <= 4096 || single);
        CHECK_EQ(end.value().valid_bytes, end.value().file_bytes);
    }

    write_log(tmp.wal(), {10, 20}, got.report.next_lsn, fast_options(4096));
    Replayed again = replay(tmp.wal());
    REQUIRE_OK(again.status);
    CHECK_EQ(again.report.last_lsn, 402u);
    CHECK(again.records.back().payload == payload_for(402, 20));
}

TEST_CASE("recovery: truncation at every byte inside the last three records keeps the records before the cut") {
    TempDir tmp;
    const std::vector<std::size_t> sizes = {5, 0, 17, 40, 3, 8, 12, 1, 30, 13};
    write_log(tmp.wal(), sizes);
    const std::string segment = segment_paths(tmp.wal()).at(0);
    const std::string original = read_file(segment);
    const std::vector<std::uint64_t> offsets = frame_offsets(sizes);
    REQUIRE(original.size() == offsets.back());

    const std::size_t n = sizes.size();
    for (std::uint64_t cut = offsets[n - 3]; cut < offsets[n]; ++cut) {
        // Records wholly before the cut survive; the one the cut falls into is the torn tail.
        std::size_t complete = 0;
        while (offsets[complete + 1] <= cut) ++complete;
        write_file(segment, original.substr(0, cut));

        Replayed got = replay(tmp.wal(), /*truncate_tail=*/true);
        REQUIRE_OK(got.status);
        CHECK_EQ(got.report.records, std::uint64_t(complete));
        CHECK_EQ(got.records.size(), complete);
        CHECK_EQ(got.report.last_lsn, std::uint64_t(complete));
        CHECK_EQ(got.report.truncated_bytes, cut - offsets[complete]);
        if (cut == offsets[complete])
            CHECK(got.report.truncated_at.empty());
        else
            CHECK_EQ(got.report.truncated_at, segment + ":" + std::to_string(offsets[complete]));
        CHECK_EQ(std::uint64_t(fs::file_size(segment)), offsets[complete]);

        // Appending resumes where the cut was, and the log recovers again.
        auto writer = open_writer(tmp.wal(), got.report.next_lsn);
        auto lsn = writer->append(std::uint8_t(RecordType::delete_nodes), "resumed", 7);
        REQUIRE_OK(lsn);
        CHECK_EQ(lsn.value(), std::uint64_t(complete + 1));
        REQUIRE_OK(writer->close());
        Replayed again = replay(tmp.wal());
        REQUIRE_OK(again.status);
        CHECK_EQ(again.report.records, std::uint64_t(complete + 1));
        CHECK_EQ(again.report.truncated_bytes, 0u);
        REQUIRE(!again.records.empty());
        CHECK_EQ(again.records.back().payload, std::string("resumed"));
        for (std::size_t i = 0; i < complete; ++i) CHECK(again.records[i].payload == payload_for(i + 1, sizes[i]));
    }
}

TEST_CASE("recovery: every single-bit flip in the last record recovers to the previous record") {
    TempDir tmp;
    const std::vector<std::size_t> sizes = {9, 21, 13};  // the last frame has 7 pad bytes
    write_log(tmp.wal(), sizes);
    const std::string segment = segment_paths(tmp.wal()).at(0);
    const std::string original = read_file(segment);
    const std::vector<std::uint64_t> offsets = frame_offsets(sizes);
    const std::uint64_t last = offsets[2];
    for (std::size_t bit = last * 8; bit < original.size() * 8; ++bit) {
        std::string damaged = original;
        flip_bit(damaged, bit);
        write_file(segment, damaged);
        Replayed got = replay(tmp.wal());
        if (!got.status.ok()) {
            std::printf("  bit %zu: %s\n", bit, got.status.message().c_str());
            CHECK(got.status.ok());
            continue;
        }
        CHECK_EQ(got.report.records, 2u);
        CHECK_EQ(got.report.last_lsn, 2u);
        CHECK_EQ(got.report.truncated_bytes, original.size() - last);
        CHECK_EQ(got.report.truncated_at, segment + ":" + std::to_string(last));
    }
}

TEST_CASE("recovery: a damaged record followed by valid ones is damage in the middle of the log") {
    TempDir tmp;
    const std::vector<std::size_t> sizes = {9, 21, 13, 30};
    write_log(tmp.wal(), sizes);
    const std::string segment = segment_paths(tmp.wal()).at(0);
    const std::string original = read_file(segment);
    const std::vector<std::uint64_t> offsets = frame_offsets(sizes);
    // A bit in the CRC, the length, the LSN and the payload of record 2.
    for (std::uint64_t byte : {offsets[1] + 0, offsets[1] + 5, offsets[1] + 13, offsets[1] + 25}) {
        std::string damaged = original;
        flip_bit(damaged, byte * 8 + 3);
        write_file(segment, damaged);
        for (bool truncate_tail : {false, true}) {
            Replayed got = replay(tmp.wal(), truncate_tail);
            CHECK(got.status.code() == StatusCode::corruption);
            CHECK(contains(got.status.message(), "damage in the middle of the log"));
            CHECK(contains(got.status.message(), segment));
            CHECK(contains(got.status.message(), "offset " + std::to_string(offsets[1])));
            CHECK(read_file(segment) == damaged);  // nothing is cut
        }
    }
}

TEST_CASE("recovery: a bad record in a segment that is not the last is corruption") {
    TempDir tmp;
    write_log(tmp.wal(), std::vector<std::size_t>(40, 100), 1, fast_options(1024));
    std::vector<std::string> paths = segment_paths(tmp.wal());
    REQUIRE(paths.size() >= 3);
    const std::string first = paths[0];
    const std::string original = read_file(first);

    std::string flipped = original;
    flip_bit(flipped, (original.size() - 10) * 8);  // in the segment's last record
    write_file(first, flipped);
    Replayed got = replay(tmp.wal(), true);
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), first));
    CHECK(contains(got.status.message(), "not the last"));

    write_file(first, original.substr(0, original.size() - 3));  // torn, but not the last segment
    got = replay(tmp.wal(), true);
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "not the last"));
    CHECK_EQ(std::uint64_t(fs::file_size(first)), std::uint64_t(original.size() - 3));

    write_file(first, original.substr(0, 20));  // a torn header, not in the last segment
    got = replay(tmp.wal(), true);
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "shorter than its 48-byte header"));
}

TEST_CASE("recovery: a zero-filled tail is cut") {
    TempDir tmp;
    write_log(tmp.wal(), {10, 20, 30});
    const std::string segment = segment_paths(tmp.wal()).at(0);
    const std::uint64_t size = fs::file_size(segment);
    append_file(segment, std::string(4096, '\0'));
    Replayed got = replay(tmp.wal(), true);
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, 3u);
    CHECK_EQ(got.report.truncated_bytes, 4096u);
    CHECK_EQ(got.report.truncated_at, segment + ":" + std::to_string(size));
    CHECK_EQ(std::uint64_t(fs::file_size(segment)), size);
    write_log(tmp.wal(), {5}, got.report.next_lsn);
    CHECK_EQ(replay(tmp.wal()).report.records, 4u);
}

TEST_CASE("recovery: a random garbage tail is cut") {
    TempDir tmp;
    write_log(tmp.wal(), {10, 20, 30});
    const std::string segment = segment_paths(tmp.wal()).at(0);
    const std::uint64_t size = fs::file_size(segment);
    std::mt19937 rng(99);
    for (std::size_t garbage_bytes : {1u, 7u, 19u, 20u, 100u, 3001u}) {
        std::string garbage(garbage_bytes, '\0');
        for (auto& c : garbage) c = char(rng());
        append_file(segment, garbage);
        Replayed got = replay(tmp.wal(), true);
        REQUIRE_OK(got.status);
        CHECK_EQ(got.report.records, 3u);
        CHECK_EQ(got.report.truncated_bytes, std::uint64_t(garbage_bytes));
        CHECK_EQ(std::uint64_t(fs::file_size(segment)), size);
    }
}

TEST_CASE("recovery: a last segment shorter than its header is a torn tail and is deleted") {
    TempDir tmp;
    write_log(tmp.wal(), {10, 20});
    const std::string torn = tmp.wal() + "/" + segment_file_name(3);
    write_file(torn, make_segment_header(db_uuid, 3).substr(0, 30));
    Replayed reported = replay(tmp.wal(), false);
    REQUIRE_OK(reported.status);
    CHECK_EQ(reported.report.records, 2u);
    CHECK_EQ(reported.report.truncated_bytes, 30u);
    CHECK_EQ(reported.report.truncated_at, torn + ":0");
    CHECK(fs::exists(torn));
    Replayed cut = replay(tmp.wal(), true);
    REQUIRE_OK(cut.status);
    CHECK(!fs::exists(torn));
    CHECK_EQ(cut.report.next_lsn, 3u);
    write_log(tmp.wal(), {1}, cut.report.next_lsn);
    CHECK_EQ(replay(tmp.wal()).report.last_lsn, 3u);
}

TEST_CASE("recovery: bad magic, version, header size or header checksum is corruption") {
    TempDir tmp;
    write_log(tmp.wal(), {10, 20});
    const std::string segment = segment_paths(tmp.wal()).at(0);
    const std::string original = read_file(segment);
    struct damage_t {
        std::size_t byte;
        const char* expected;
    };
    for (damage_t damage : {damage_t{0, "magic"}, damage_t{8, "format version"}, damage_t{12, "header size"},
                            damage_t{20, "checksum"}, damage_t{33, "checksum"}, damage_t{41, "checksum"}}) {
        std::string damaged = original;
        flip_bit(damaged, damage.byte * 8 + 1);
        write_file(segment, damaged);
        Replayed got = replay(tmp.wal(), true);
        CHECK(got.status.code() == StatusCode::corruption);
        CHECK(contains(got.status.message(), damage.expected));
        CHECK(contains(got.status.message(), segment));
        CHECK(read_file(segment) == damaged);
    }
}

TEST_CASE("recovery: a segment of another database is corruption naming both uuids") {
    TempDir tmp;
    write_log(tmp.wal(), {10});
    Replayed got = replay(tmp.wal(), true, 1, other_uuid);
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "belongs to database " + format_uuid(db_uuid) + ", expected " +
                                             format_uuid(other_uuid)));
    auto writer = Writer::open(tmp.wal(), other_uuid, 2, fast_options());
    CHECK(writer.status().code() == StatusCode::corruption);
}

TEST_CASE("recovery: a header whose first LSN differs from the file name is corruption") {
    TempDir tmp;
    fs::create_directories(tmp.wal());
    write_file(tmp.wal() + "/" + segment_file_name(5), make_segment_header(db_uuid, 6) + make_frame(1, 0, 6, "x"));
    Replayed got = replay(tmp.wal());
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "first LSN is 6"));
}

TEST_CASE("recovery: an unknown record type without the skippable flag is corruption naming type and LSN") {
    TempDir tmp;
    auto writer = open_writer(tmp.wal(), 1);
    REQUIRE_OK(writer->append(1, "a", 1));
    REQUIRE_OK(writer->append(2, "b", 1));
    REQUIRE_OK(writer->append(99, "from the future", 15));
    REQUIRE_OK(writer->append(3, "c", 1));
    REQUIRE_OK(writer->close());
    Replayed got = replay(tmp.wal());
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "record type 99 at LSN 3"));
    CHECK(contains(got.status.message(), "not marked skippable"));
    // Below from_lsn a record is checked, not interpreted.
    Replayed later = replay(tmp.wal(), false, 4);
    REQUIRE_OK(later.status);
    CHECK_EQ(later.report.replayed, 1u);
}

TEST_CASE("recovery: an unknown record type with the skippable flag is skipped") {
    TempDir tmp;
    auto writer = open_writer(tmp.wal(), 1);
    REQUIRE_OK(writer->append(1, "a", 1));
    REQUIRE_OK(writer->append(200, "optional hint", 13, flag_skippable));
    REQUIRE_OK(writer->append(7, "b", 1, flag_skippable));  // a known type is replayed, flag or not
    REQUIRE_OK(writer->close());
    Replayed got = replay(tmp.wal());
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, 3u);
    CHECK_EQ(got.report.skipped, 1u);
    CHECK_EQ(got.report.replayed, 2u);
    REQUIRE(got.records.size() == 2);
    CHECK_EQ(got.records[0].lsn, 1u);
    CHECK_EQ(got.records[1].lsn, 3u);
    CHECK_EQ(int(got.records[1].flags), int(flag_skippable));
}

TEST_CASE("recovery: an LSN gap between segments is corruption") {
    TempDir tmp, other;
    write_log(tmp.wal(), {10, 10, 10});       // LSNs 1..3
    write_log(other.wal(), {10, 10}, 5);      // LSNs 5..6
    fs::copy_file(segment_paths(other.wal()).at(0), tmp.wal() + "/" + segment_file_name(5));
    Replayed got = replay(tmp.wal(), true);
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "LSN gap between WAL segments"));
    CHECK(contains(got.status.message(), "ends at LSN 3"));
    CHECK(contains(got.status.message(), "starts at LSN 5"));
}

TEST_CASE("recovery: inside the last segment, a valid record that skips LSNs is corruption, a stale one a torn tail") {
    TempDir tmp;
    fs::create_directories(tmp.wal());
    const std::string path = tmp.wal() + "/" + segment_file_name(1);
    const std::string head = make_segment_header(db_uuid, 1) + make_frame(1, 0, 1, "one") + make_frame(1, 0, 2, "two");
    // 1, 2, 4, 5: a record is missing in the middle.
    write_file(path, head + make_frame(1, 0, 4, "four") + make_frame(1, 0, 5, "five"));
    Replayed got = replay(tmp.wal(), true);
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "its LSN is 4, expected 3"));
    // 1, 2, 4 at the very end: still a gap, not a torn write.
    write_file(path, head + make_frame(1, 0, 4, "four"));
    got = replay(tmp.wal(), true);
    CHECK(got.status.code() == StatusCode::corruption);
    // 1, 2, then a stale copy of record 2 (an old block surfacing after a crash): cut.
    write_file(path, head + make_frame(1, 0, 2, "two"));
    got = replay(tmp.wal(), true);
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.last_lsn, 2u);
    CHECK_EQ(got.report.truncated_bytes, frame_bytes(3));
}

TEST_CASE("recovery: records with LSN below from_lsn are checked but not visited") {
    TempDir tmp;
    write_log(tmp.wal(), std::vector<std::size_t>(10, 16));
    Replayed got = replay(tmp.wal(), false, 6);
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, 10u);
    CHECK_EQ(got.report.replayed, 5u);
    REQUIRE(got.records.size() == 5);
    CHECK_EQ(got.records.front().lsn, 6u);
    CHECK_EQ(got.records.back().lsn, 10u);
    Replayed none = replay(tmp.wal(), false, 11);
    REQUIRE_OK(none.status);
    CHECK(none.records.empty());
    CHECK_EQ(none.report.next_lsn, 11u);

    // A damaged record below from_lsn is still found.
    const std::string segment = segment_paths(tmp.wal()).at(0);
    std::string damaged = read_file(segment);
    flip_bit(damaged, (segment_header_bytes + 22) * 8);
    write_file(segment, damaged);
    CHECK(replay(tmp.wal(), false, 6).status.code() == StatusCode::corruption);
}

TEST_CASE("recovery: a visitor's error stops recovery and is returned") {
    TempDir tmp;
    write_log(tmp.wal(), std::vector<std::size_t>(5, 8));
    int calls = 0;
    auto result = recover(
        tmp.wal(), db_uuid, 1,
        [&](std::uint8_t, std::uint8_t, std::uint64_t lsn, std::string_view) {
            ++calls;
            return lsn == 3 ? Status::invalid_argument("record 3 does not apply") : Status::OK();
        },
        true);
    CHECK(result.status().code() == StatusCode::invalid_argument);
    CHECK_EQ(result.status().message(), std::string("record 3 does not apply"));
    CHECK_EQ(calls, 3);
}

TEST_CASE("recovery: the first segment starting after from_lsn means missing records") {
    TempDir tmp;
    write_log(tmp.wal(), {8, 8}, 10);  // LSNs 10, 11
    CHECK(replay(tmp.wal(), false, 10).status.ok());
    CHECK(replay(tmp.wal(), false, 12).status.ok());
    Replayed got = replay(tmp.wal(), false, 7);
    CHECK(got.status.code() == StatusCode::corruption);
    CHECK(contains(got.status.message(), "LSNs 7 to 9 are missing"));
}

TEST_CASE("recovery: segments holding only records below from_lsn are not read, their damage only reported") {
    TempDir tmp;
    write_log(tmp.wal(), {3000, 3000, 3000, 3000}, 1, fast_options(4096));  // one record a segment
    const std::vector<std::string> paths = segment_paths(tmp.wal());
    REQUIRE(paths.size() == 4);
    write_file(paths[0], std::string(read_file(paths[0]).size(), '\0'));  // zero-filled, as a disk may leave it
    Replayed got = replay(tmp.wal(), false, 3);
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.fallback_segments, 2u);
    REQUIRE(got.report.fallback_damaged.size() == 1);
    CHECK(contains(got.report.fallback_damaged[0], paths[0]));
    CHECK_EQ(got.report.replayed, 2u);
    CHECK_EQ(got.report.next_lsn, 5u);
    Replayed intact = replay(tmp.wal(), false, 2);  // segment 1 still not needed: reported, not read
    REQUIRE_OK(intact.status);
    CHECK_EQ(intact.report.fallback_damaged.size(), 1u);
    CHECK_EQ(intact.report.replayed, 3u);
    Replayed needed = replay(tmp.wal(), false, 1);  // the damaged bytes are needed: corruption
    CHECK(needed.status.code() == StatusCode::corruption);
    CHECK(contains(needed.status.message(), "bad header"));
}

TEST_CASE("recovery: leftover .log.tmp files are ignored, and the writer deletes them") {
    TempDir tmp;
    write_log(tmp.wal(), {8, 8});
    const std::string leftover = tmp.wal() + "/" + segment_file_name(3) + ".tmp";
    write_file(leftover, make_segment_header(db_uuid, 3).substr(0, 11));
    Replayed got = replay(tmp.wal());
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, 2u);
    CHECK_EQ(got.report.truncated_bytes, 0u);
    auto writer = open_writer(tmp.wal(), 3);
    CHECK(!fs::exists(leftover));
}

// ---------------------------------------------------------------------------------------------
// Writer.

TEST_CASE("writer: reopening appends to the last segment and continues its LSNs") {
    TempDir tmp;
    write_log(tmp.wal(), {8, 8});
    write_log(tmp.wal(), {8}, 3);
    CHECK_EQ(segment_paths(tmp.wal()).size(), 1u);
    Replayed got = replay(tmp.wal());
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.last_lsn, 3u);
}

TEST_CASE("writer: open refuses a torn tail, a next_lsn that does not continue the log, and bad options") {
    TempDir tmp;
    write_log(tmp.wal(), {8, 8});
    CHECK(Writer::open(tmp.wal(), db_uuid, 5, fast_options()).status().code() == StatusCode::invalid_argument);
    CHECK(Writer::open(tmp.wal(), db_uuid, 2, fast_options()).status().code() == StatusCode::invalid_argument);
    CHECK(Writer::open(tmp.wal(), db_uuid, 0, fast_options()).status().code() == StatusCode::invalid_argument);
    CHECK(Writer::open(tmp.wal(), db_uuid, 3, fast_options(48)).status().code() == StatusCode::invalid_argument);
    WriterOptions interval = fast_options();
    interval.sync = SyncPolicy::interval;
    interval.sync_interval_ms = 0;
    CHECK(Writer::open(tmp.wal(), db_uuid, 3, interval).status().code() == StatusCode::invalid_argument);

    append_file(segment_paths(tmp.wal()).at(0), "torn");
    auto refused = Writer::open(tmp.wal(), db_uuid, 3, fast_options());
    CHECK(refused.status().code() == StatusCode::corruption);
    CHECK(contains(refused.status().message(), "truncate_tail"));
    REQUIRE_OK(replay(tmp.wal(), true).status);
    REQUIRE_OK(Writer::open(tmp.wal(), db_uuid, 3, fast_options()));
}

TEST_CASE("writer: append rejects type 0, undefined flags, oversize payloads and unwritten sync LSNs") {
    TempDir tmp;
    auto writer = open_writer(tmp.wal(), 1);
    char byte = 'x';
    CHECK(writer->append(0, &byte, 1).status().code() == StatusCode::invalid_argument);
    CHECK(writer->append(1, &byte, 1, 0x02).status().code() == StatusCode::invalid_argument);
    // The length is checked before the payload is touched.
    CHECK(writer->append(1, &byte, std::size_t(max_payload_bytes) + 1).status().code() == StatusCode::invalid_argument);
    CHECK(writer->append(1, nullptr, 3).status().code() == StatusCode::invalid_argument);
    CHECK_EQ(writer->last_lsn(), 0u);
    REQUIRE_OK(writer->append(1, nullptr, 0));
    CHECK(writer->sync_to(2).code() == StatusCode::invalid_argument);
    REQUIRE_OK(writer->sync_to(1));
    CHECK(!writer->failed());
}

TEST_CASE("writer: drop_segments_before deletes only segments wholly below the LSN, never the current one") {
    TempDir tmp;
    auto writer = open_writer(tmp.wal(), 1, fast_options(256));
    for (int i = 0; i < 40; ++i) REQUIRE_OK(writer->append(1, payload_for(i + 1, 60).data(), 60));
    auto listed = list_segments(tmp.wal());
    REQUIRE_OK(listed);
    std::vector<SegmentFile> before = listed.value();
    REQUIRE(before.size() >= 8);

    const std::uint64_t keep_from = before[3].first_lsn + 1;  // inside segment 3
    REQUIRE_OK(writer->drop_segments_before(keep_from));
    std::vector<std::string> after = segment_paths(tmp.wal());
    CHECK_EQ(after.size(), before.size() - 3);
    CHECK_EQ(after.front(), before[3].path);
    Replayed got = replay(tmp.wal(), false, keep_from);
    REQUIRE_OK(got.status);
    CHECK_EQ(got.records.front().lsn, keep_from);
    CHECK_EQ(got.report.last_lsn, 40u);

    // At a segment boundary the segment before it goes too.
    REQUIRE_OK(writer->drop_segments_before(before[5].first_lsn));
    CHECK_EQ(segment_paths(tmp.wal()).front(), before[5].path);

    // Past the end: everything but the segment being written.
    REQUIRE_OK(writer->drop_segments_before(1000));
    after = segment_paths(tmp.wal());
    REQUIRE(after.size() == 1);
    CHECK_EQ(after.front(), before.back().path);
    REQUIRE_OK(writer->append(1, "z", 1));
    REQUIRE_OK(writer->close());
    Replayed rest = replay(tmp.wal(), false, before.back().first_lsn);
    REQUIRE_OK(rest.status);
    CHECK_EQ(rest.report.last_lsn, 41u);
}

TEST_CASE("writer: roll_segment starts a segment at the next LSN, so a checkpoint can drop all older ones") {
    TempDir tmp;
    auto writer = open_writer(tmp.wal(), 1);
    REQUIRE_OK(writer->roll_segment());  // nothing written yet: no new segment
    CHECK_EQ(segment_paths(tmp.wal()).size(), 1u);
    for (int i = 0; i < 5; ++i) REQUIRE_OK(writer->append(1, payload_for(i + 1, 30).data(), 30));
    REQUIRE_OK(writer->roll_segment());
    REQUIRE_OK(writer->roll_segment());  // the new segment is empty: no third one
    std::vector<std::string> paths = segment_paths(tmp.wal());
    REQUIRE(paths.size() == 2);
    CHECK(contains(paths.back(), segment_file_name(6)));
    CHECK(writer->synced_lsn() >= 5u);  // the ended segment was synced
    REQUIRE_OK(writer->drop_segments_before(6));
    CHECK_EQ(segment_paths(tmp.wal()).size(), 1u);
    REQUIRE_OK(writer->append(1, "z", 1));
    REQUIRE_OK(writer->close());
    Replayed got = replay(tmp.wal(), false, 6);
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.first_lsn, 6u);
    CHECK_EQ(got.report.last_lsn, 6u);
}

TEST_CASE("writer: group commit shares fdatasyncs among concurrent sync_to calls") {
    TempDir tmp;
    std::atomic<int> syncs{0};
    WriterOptions options;
    options.sync = SyncPolicy::always;
    options.segment_bytes = 4096;  // rolls while others sync
    options.sync_hook = [&](int fd) {
        ++syncs;
        std::this_thread::sleep_for(std::chrono::microseconds(500));  // a disk that takes its time
        return ::fdatasync(fd);
    };
    auto writer = open_writer(tmp.wal(), 1, options);
    const int baseline = syncs.load();
    constexpr int threads = 4, commits_per_thread = 50;
    std::mutex append_mutex;
    std::atomic<int> failures{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (int i = 0; i < commits_per_thread; ++i) {
                std::uint64_t lsn;
                {
                    std::lock_guard<std::mutex> lock(append_mutex);
                    std::string payload = "thread " + std::to_string(t) + " commit " + std::to_string(i);
                    payload.resize(100, '.');
                    auto appended = writer->append(1, payload.data(), payload.size());
                    if (!appended.ok()) {
                        ++failures;
                        return;
                    }
                    lsn = appended.value();
                }
                if (!writer->sync_to(lsn).ok()) ++failures;
                if (writer->synced_lsn() < lsn) ++failures;
            }
        });
    for (auto& thread : pool) thread.join();
    const int commits = threads * commits_per_thread;
    CHECK_EQ(failures.load(), 0);
    CHECK_EQ(writer->synced_lsn(), std::uint64_t(commits));
    const int used = syncs.load() - baseline;
    std::printf("  %d commits, %d fdatasyncs\n", commits, used);
    CHECK(used < commits);
    REQUIRE_OK(writer->close());
    Replayed got = replay(tmp.wal());
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, std::uint64_t(commits));
}

// An fdatasync hook that blocks while held, and counts the calls that entered it.
class HeldSyncs {
  public:
    std::function<int(int)> hook() {
        return [this](int fd) {
            std::unique_lock<std::mutex> lock(mutex_);
            ++entered_;
            cv_.notify_all();
            cv_.wait(lock, [this] { return !hold_; });
            return ::fdatasync(fd);
        };
    }
    void hold() {
        std::lock_guard<std::mutex> lock(mutex_);
        hold_ = true;
    }
    void release() {
        std::lock_guard<std::mutex> lock(mutex_);
        hold_ = false;
        cv_.notify_all();
    }
    int entered() {
        std::lock_guard<std::mutex> lock(mutex_);
        return entered_;
    }
    // Waits (10 s at most) until `count` calls have entered; false when they have not.
    bool wait_entered(int count) {
        std::unique_lock<std::mutex> lock(mutex_);
        return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_ >= count; });
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool hold_ = false;
    int entered_ = 0;
};

TEST_CASE("writer: after an fdatasync that covered three callers, the next leader waits for three") {
    // Round 1: a lone caller's fdatasync is held while three more callers arrive. Round 2: one
    // fdatasync covers those three (the leader does not wait: round 1 covered one caller).
    // Round 3: a caller alone leads; it waits for as many callers as round 2 covered, so the two
    // that arrive one after the other later share its fdatasync. A leader that did not wait, or
    // waited for fewer, would sync without them and leave them a fourth round.
    TempDir tmp;
    HeldSyncs held;
    WriterOptions options;
    options.sync = SyncPolicy::always;
    options.group_commit_wait_us = 10'000'000;  // far above any scheduling delay; round 3 waits about 100 ms
    options.sync_hook = held.hook();
    auto writer = open_writer(tmp.wal(), 1, options);
    auto syncs = [&] { return held.entered(); };
    const int before = syncs();
    held.hold();
    REQUIRE_OK(writer->append(1, "a", 1));
    std::thread first([&] { CHECK(writer->sync_to(1).ok()); });
    REQUIRE(held.wait_entered(before + 1));
    std::vector<std::thread> round_two;
    std::atomic<int> calling{0};
    for (std::uint64_t lsn = 2; lsn <= 4; ++lsn) {
        REQUIRE_OK(writer->append(1, "b", 1));
        round_two.emplace_back([&, lsn] {
            ++calling;
            CHECK(writer->sync_to(lsn).ok());
        });
    }
    while (calling.load() < 3) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all three wait for the held fdatasync
    held.release();
    first.join();
    for (auto& thread : round_two) thread.join();
    REQUIRE(writer->synced_lsn() == 4u);
    CHECK_EQ(syncs() - before, 2);  // round 1, then one fdatasync for all three

    REQUIRE_OK(writer->append(1, "c", 1));
    std::thread leader([&] { CHECK(writer->sync_to(5).ok()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_EQ(syncs() - before, 2);  // the leader is waiting for callers
    // The late callers arrive 100 ms apart: a leader that left when the first arrived would
    // cover it alone.
    std::vector<std::thread> late;
    const auto late_start = std::chrono::steady_clock::now();
    for (std::uint64_t lsn = 6; lsn <= 7; ++lsn) {
        REQUIRE_OK(writer->append(1, "d", 1));
        late.emplace_back([&, lsn] { CHECK(writer->sync_to(lsn).ok()); });
        if (lsn == 6) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            CHECK_EQ(syncs() - before, 2);  // still waiting: two of three callers
        }
    }
    leader.join();
    // Ended by the third caller, not by the 10 s bound (a leader waiting for four).
    CHECK(std::chrono::steady_clock::now() - late_start < std::chrono::seconds(5));
    for (auto& thread : late) thread.join();
    CHECK_EQ(writer->synced_lsn(), std::uint64_t(7));
    CHECK_EQ(syncs() - before, 3);  // one fdatasync covered the leader and both late callers
    REQUIRE_OK(writer->close());
    Replayed got = replay(tmp.wal());
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, std::uint64_t(7));
}

TEST_CASE("writer: a lone writer's sync never waits for other callers") {
    // The group-commit wait applies only after an fdatasync that covered several callers: with
    // a 10 s bound, 40 commits from one thread would take 400 s if a lone writer waited.
    TempDir tmp;
    WriterOptions options;
    options.sync = SyncPolicy::always;
    options.group_commit_wait_us = 10'000'000;
    auto writer = open_writer(tmp.wal(), 1, options);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i) {
        auto appended = writer->append(1, "commit", 6);
        REQUIRE_OK(appended.status());
        if (i % 2) writer->start_sync();  // the syncer thread's fdatasyncs never wait
        REQUIRE_OK(writer->sync_to(appended.value()));
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    CHECK_EQ(writer->synced_lsn(), std::uint64_t(40));
}

// Appends a record of `bytes` bytes under a file size limit of `limit_bytes`, so that its
// write(2) stops part-way (EFBIG) instead of killing the process (SIGXFSZ).
Result<std::uint64_t> append_past_size_limit(Writer& writer, std::uint64_t limit_bytes, std::size_t bytes) {
    struct rlimit saved;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limited = saved;
    limited.rlim_cur = limit_bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
    const std::string payload(bytes, 'x');
    auto appended = writer.append(1, payload.data(), payload.size());
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    return appended;
}

// Options for `policy` whose fdatasyncs only count into `syncs`.
WriterOptions counting_syncs(SyncPolicy policy, std::atomic<int>& syncs) {
    WriterOptions options;
    options.sync = policy;
    options.sync_hook = [&syncs](int) {
        ++syncs;
        return 0;
    };
    return options;
}

TEST_CASE("writer: start_sync runs the fdatasync on the syncer thread while the caller works") {
    TempDir tmp;
    std::mutex hook_mutex;
    std::condition_variable hook_cv;
    std::vector<std::thread::id> sync_threads;
    bool hold = false;  // while true, the hook blocks: the caller's sync_to must wait for it
    WriterOptions options;
    options.sync = SyncPolicy::always;
    options.sync_hook = [&](int fd) {
        std::unique_lock<std::mutex> lock(hook_mutex);
        sync_threads.push_back(std::this_thread::get_id());
        hook_cv.notify_all();
        hook_cv.wait(lock, [&] { return !hold; });
        return ::fdatasync(fd);
    };
    auto writer = open_writer(tmp.wal(), 1, options);
    std::size_t before = 0;
    {
        std::lock_guard<std::mutex> lock(hook_mutex);
        before = sync_threads.size();  // the new segment's own fdatasync
        hold = true;
    }
    REQUIRE_OK(writer->append(1, "a", 1));
    writer->start_sync();
    {
        std::unique_lock<std::mutex> lock(hook_mutex);
        REQUIRE(hook_cv.wait_for(lock, std::chrono::seconds(10), [&] { return sync_threads.size() == before + 1; }));
        CHECK(sync_threads.back() != std::this_thread::get_id());  // not run by the caller
    }
    CHECK_EQ(writer->synced_lsn(), 0u);  // still running: not durable yet
    writer->start_sync();                // covered by the running sync: not asked for again
    std::thread release([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::lock_guard<std::mutex> lock(hook_mutex);
        hold = false;
        hook_cv.notify_all();
    });
    REQUIRE_OK(writer->sync_to(1));  // waits for the syncer's fdatasync, leads none of its own
    release.join();
    CHECK_EQ(writer->synced_lsn(), 1u);
    {
        std::lock_guard<std::mutex> lock(hook_mutex);
        CHECK_EQ(sync_threads.size(), before + 1);
    }
    // A record appended while a sync runs is covered by the next one start_sync asks for.
    REQUIRE_OK(writer->append(1, "b", 1));
    writer->start_sync();
    REQUIRE_OK(writer->sync_to(2));
    CHECK_EQ(writer->synced_lsn(), 2u);
    writer->start_sync();  // nothing unsynced: no fdatasync
    REQUIRE_OK(writer->close());
    {
        std::lock_guard<std::mutex> lock(hook_mutex);
        CHECK_EQ(sync_threads.size(), before + 2);
    }
    Replayed got = replay(tmp.wal());
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.records, 2u);
}

TEST_CASE("writer: a failed fdatasync asked for by start_sync fails the write it was to cover") {
    for (bool wait_first : {false, true}) {
        // The failure lands before the caller reaches sync_to, or while it waits there.
        TempDir tmp;
        std::atomic<bool> broken{false};
        std::atomic<int> calls_while_broken{0};
        WriterOptions options;
        options.sync = SyncPolicy::always;
        options.sync_hook = [&](int fd) {
            if (!broken.load()) return ::fdatasync(fd);
            ++calls_while_broken;
            std::this_thread::sleep_for(std::chrono::milliseconds(wait_first ? 50 : 0));
            errno = EIO;
            return -1;
        };
        auto writer = open_writer(tmp.wal(), 1, options);
        REQUIRE_OK(writer->append(1, "a", 1));
        writer->start_sync();
        REQUIRE_OK(writer->sync_to(1));
        broken = true;
        REQUIRE_OK(writer->append(1, "b", 1));
        writer->start_sync();
        if (!wait_first)
            for (int i = 0; i < 1000 && !writer->failed(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        Status first = writer->sync_to(2);
        CHECK(first.code() == StatusCode::io_error);
        CHECK(contains(first.message(), std::strerror(EIO)));
        CHECK(writer->failed());
        CHECK_EQ(writer->synced_lsn(), 1u);
        CHECK(writer->sync_to(2).code() == StatusCode::read_only);  // io_error once
        CHECK(writer->sync().code() == StatusCode::read_only);
        writer->start_sync();  // does nothing once failed
        CHECK(writer->close().code() == StatusCode::read_only);
        CHECK_EQ(calls_while_broken.load(), 1);  // never retried
    }
}

TEST_CASE("writer: after a failed fdatasync, each record it was to cover fails once; durable ones stay OK") {
    TempDir tmp;
    std::atomic<bool> broken{false};
    WriterOptions options;
    options.sync = SyncPolicy::always;
    options.sync_hook = [&](int fd) {
        if (!broken.load()) return ::fdatasync(fd);
        errno = EIO;
        return -1;
    };
    auto writer = open_writer(tmp.wal(), 1, options);
    REQUIRE_OK(writer->append(1, "a", 1));
    REQUIRE_OK(writer->sync_to(1));  // durable before the failure
    REQUIRE_OK(writer->append(1, "b", 1));
    REQUIRE_OK(writer->append(1, "c", 1));
    broken = true;
    CHECK(writer->sync_to(3).code() == StatusCode::io_error);  // leads the fdatasync covering 2 and 3
    CHECK(writer->sync_to(2).code() == StatusCode::io_error);  // its record was in that fdatasync too
    CHECK(writer->sync_to(2).code() == StatusCode::read_only);  // told once
    CHECK(writer->sync_to(3).code() == StatusCode::read_only);
    REQUIRE_OK(writer->sync_to(1));  // that write did not fail
    CHECK_EQ(writer->synced_lsn(), 1u);
    CHECK(writer->close().code() == StatusCode::read_only);
}

// How a child of sweep_writer_failures ended (its exit code).
enum WriterSweepOutcome : int { writer_failed_cleanly = 0, writer_went_on = 3, allocation_not_reached = 10 };

// Runs run(k, wal_folder) for K = 1, 2, ... in forked children (sweep_failing_allocations), each
// child failing its K-th allocation after a failed write or fdatasync. Every child must leave the
// writer failed; the sweep must reach at least two allocations (the error's message and its
// status), and end.
template <typename run_at>
void sweep_writer_failures(run_at&& run) {
    const AllocationSweep sweep = sweep_failing_allocations(
        [&](long k, const std::string& folder) { return int(run(k, folder + "/wal")); }, writer_failed_cleanly,
        allocation_not_reached, writer_went_on, false, 100);
    std::printf("  %d allocations failed in turn, the writer failed cleanly after each (K up to %ld)\n", sweep.wanted,
                sweep.end_k);
    CHECK(sweep.wanted >= 2);
    CHECK(sweep.end_k < 100);
}

TEST_CASE("writer: out of memory in the syncer thread after its fdatasync failed leaves the writer failed") {
    // The syncer thread's fdatasync fails (EIO) with the K-th allocation of that thread failing,
    // K = 1, 2, ... until none does: the failure's messages and status. A std::bad_alloc leaving
    // the syncer thread would end the process through std::terminate; a writer left usable
    // would trust a later fdatasync.
    sweep_writer_failures([&](long k, const std::string& wal) {
        std::atomic<int> syncs{0};
        std::atomic<bool> broken{false};
        WriterOptions options;
        options.sync = SyncPolicy::always;
        options.sync_hook = [&](int fd) {
            ++syncs;
            if (!broken.load()) return ::fdatasync(fd);
            errno = EIO;
            return -1;
        };
        auto opened = Writer::open(wal, db_uuid, 1, options);
        if (!opened.ok()) return writer_went_on;
        auto writer = std::move(opened).value();
        if (!writer->append(1, "a", 1).ok() || !writer->sync_to(1).ok()) return writer_went_on;
        broken = true;
        if (!writer->append(1, "b", 1).ok()) return writer_went_on;
        counted_thread = false;  // only the syncer thread's allocations count
        fail_thread_allocation_in = k;
        const int syncs_before = syncs.load();
        writer->start_sync();
        for (int i = 0; i < 10'000 && syncs.load() == syncs_before; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (!writer->failed()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const bool reached = fail_thread_allocation_in.exchange(0) <= 0;
        const int syncs_after = syncs.load();
        bool clean = writer->failed() && syncs_after == syncs_before + 1;
        clean = clean && !writer->sync_to(2).ok() && writer->synced_lsn() == 1;
        clean = clean && writer->append(1, "c", 1).status().code() == StatusCode::read_only;
        clean = clean && writer->sync().code() == StatusCode::read_only;
        clean = clean && writer->close().code() == StatusCode::read_only;
        clean = clean && syncs.load() == syncs_after;  // no fdatasync after the failed one
        if (!clean) return writer_went_on;
        return reached ? writer_failed_cleanly : allocation_not_reached;
    });
}

TEST_CASE("writer: out of memory while a failed write is reported leaves the writer failed") {
    // A record's write(2) stops part-way (EFBIG past a file size limit) with the K-th allocation
    // after it failing, K = 1, 2, ... until none does: the error's message and status. Whichever
    // fails, the writer must be failed: a record appended after the partial frame would be
    // acknowledged, then lost by recovery, which stops at that frame.
    sweep_writer_failures([&](long k, const std::string& wal) {
        WriterOptions options;
        options.sync = SyncPolicy::always;
        auto opened = Writer::open(wal, db_uuid, 1, options);
        if (!opened.ok()) return int(writer_went_on);
        auto writer = std::move(opened).value();
        if (!writer->append(1, "a", 1).ok() || !writer->sync_to(1).ok()) return int(writer_went_on);
        const std::uint64_t size = fs::file_size(segment_paths(wal).at(0));
        struct rlimit saved;
        if (::getrlimit(RLIMIT_FSIZE, &saved) != 0) return int(writer_went_on);
        std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit limited = saved;
        limited.rlim_cur = size + 10;  // the next frame stops after 10 bytes
        const std::string payload(1000, 'x');
        if (::setrlimit(RLIMIT_FSIZE, &limited) != 0) return int(writer_went_on);
        fail_thread_allocation_in = k;
        bool reported = false;
        try {
            reported = writer->append(1, payload.data(), payload.size()).status().code() == StatusCode::io_error;
        } catch (const std::bad_alloc&) {
            reported = true;  // MemoryError in Python
        }
        const bool reached = fail_thread_allocation_in.exchange(0) <= 0;
        ::setrlimit(RLIMIT_FSIZE, &saved);
        bool clean = reported && writer->failed();
        clean = clean && writer->append(1, "b", 1).status().code() == StatusCode::read_only;
        clean = clean && writer->close().code() == StatusCode::read_only;
        Replayed got = replay(wal);
        clean = clean && got.status.ok() && got.report.records == 1;
        if (!clean) return int(writer_went_on);
        return int(reached ? writer_failed_cleanly : allocation_not_reached);
    });
}

TEST_CASE("writer: a failed fsync of the folder in a segment roll fails the writer, also when allocations then fail") {
    // The roll to a new segment renames it into the folder, whose fsync fails (EIO); the K-th
    // allocation after that fails too, K = 1, 2, ... until none does. The writer must be failed
    // whichever allocation fails: a writer going on would append a record to the old segment
    // after the new one's name is in the folder, and recovery would find an LSN gap there.
    sweep_writer_failures([&](long k, const std::string& wal) {
        WriterOptions options;
        options.sync = SyncPolicy::off;
        options.segment_bytes = 256;
        auto opened = Writer::open(wal, db_uuid, 1, options);
        if (!opened.ok()) return int(writer_went_on);
        auto writer = std::move(opened).value();
        const std::string big(150, 'b'), small(8, 's');
        if (!writer->append(1, big.data(), big.size()).ok()) return int(writer_went_on);
        fail_next_fsync_then_allocation = k;
        bool reported = false;
        try {
            reported = writer->append(1, big.data(), big.size()).status().code() == StatusCode::io_error;  // rolls
        } catch (const std::bad_alloc&) {
            reported = true;
        }
        fail_next_fsync_then_allocation = 0;
        const bool reached = fail_thread_allocation_in.exchange(0) <= 0;
        bool clean = reported && writer->failed();
        clean = clean && writer->append(1, small.data(), small.size()).status().code() == StatusCode::read_only;
        (void)writer->close();
        Replayed got = replay(wal);
        clean = clean && got.status.ok() && got.report.records == 1;
        if (!clean) return int(writer_went_on);
        return int(reached ? writer_failed_cleanly : allocation_not_reached);
    });
}

TEST_CASE("writer: a failed fdatasync fails a waiting record's write whoever led it, the syncer or a caller") {
    // A caller leads a slow fdatasync; meanwhile records 2 and 3 are appended, a caller waits
    // for 3 and start_sync() has the syncer wait too; every fdatasync after that first one
    // fails. Whether the syncer or that caller leads the failing fdatasync, the write of
    // record 2 gets io_error.
    for (int round = 0; round < 20; ++round) {
        TempDir tmp;
        std::atomic<int> syncs{0};
        std::atomic<int> working{1 << 30};  // fdatasyncs that succeed (the segment's own, then one)
        WriterOptions options;
        options.sync = SyncPolicy::always;
        options.sync_hook = [&](int fd) {
            const bool fail = ++syncs > working.load();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (!fail) return ::fdatasync(fd);
            errno = EIO;
            return -1;
        };
        auto writer = open_writer(tmp.wal(), 1, options);
        working = syncs.load() + 1;
        REQUIRE_OK(writer->append(1, "a", 1));
        std::thread first([&] { (void)writer->sync_to(1); });
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // its fdatasync is running
        REQUIRE_OK(writer->append(1, "b", 1));
        REQUIRE_OK(writer->append(1, "c", 1));
        std::atomic<int> third_code{-1};
        std::thread third([&] { third_code = static_cast<int>(writer->sync_to(3).code()); });
        if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // waits before the syncer
        writer->start_sync();
        first.join();
        third.join();
        Status second = writer->sync_to(2);
        // Record 2 was durable (an fdatasync before the failure covered it), or its write failed.
        if (writer->synced_lsn() >= 2) CHECK(second.ok());
        else CHECK(second.code() == StatusCode::io_error);
        CHECK(writer->failed() || writer->synced_lsn() == 3);  // the first fdatasync covered all three
        CHECK(writer->sync_to(2).code() == (second.ok() ? StatusCode::ok : StatusCode::read_only));
        CHECK(third_code.load() == static_cast<int>(StatusCode::io_error) || writer->synced_lsn() >= 3);
    }
}

TEST_CASE("writer: a leader waiting for callers issues no fdatasync once a write has failed") {
    TempDir tmp;
    HeldSyncs held;
    WriterOptions options;
    options.sync = SyncPolicy::always;
    options.group_commit_wait_us = 2'000'000;
    options.sync_hook = held.hook();
    auto writer = open_writer(tmp.wal(), 1, options);
    // A caller leads an fdatasync the hook holds while two more callers arrive: the next
    // fdatasync covers both, so the caller after them waits for callers before its own.
    const int before = held.entered();
    held.hold();
    REQUIRE_OK(writer->append(1, "a", 1));
    std::thread first([&] { CHECK(writer->sync_to(1).ok()); });
    REQUIRE(held.wait_entered(before + 1));
    REQUIRE_OK(writer->append(1, "b", 1));
    REQUIRE_OK(writer->append(1, "c", 1));
    std::thread second([&] { CHECK(writer->sync_to(2).ok()); });
    std::thread third([&] { CHECK(writer->sync_to(3).ok()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both wait for the held fdatasync
    held.release();
    first.join();
    second.join();
    third.join();
    REQUIRE(writer->synced_lsn() == 3u);
    REQUIRE_OK(writer->append(1, "d", 1));
    std::atomic<int> fourth_code{-1};
    std::thread fourth([&] { fourth_code = static_cast<int>(writer->sync_to(4).code()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it waits for a second caller
    const int syncs_before_failure = held.entered();
    // The next record's write(2) stops part-way at a file size limit (EFBIG).
    const std::uint64_t size = fs::file_size(segment_paths(tmp.wal()).at(0));
    Status appended = append_past_size_limit(*writer, size + 100, 1000).status();
    CHECK(appended.code() == StatusCode::io_error);
    fourth.join();
    CHECK_EQ(held.entered(), syncs_before_failure);  // the waiting leader issued no fdatasync after it
    // Record 4 is in the log but no fdatasync made it durable: its write fails, once.
    CHECK_EQ(fourth_code.load(), static_cast<int>(StatusCode::io_error));
    CHECK_EQ(writer->synced_lsn(), 3u);
    REQUIRE_OK(writer->sync_to(3));
    CHECK(writer->sync_to(4).code() == StatusCode::read_only);  // told once
}

TEST_CASE("writer: a segment roll's fdatasync waits for a running one, and none follows a failed one") {
    for (bool fail_first : {false, true}) {
        TempDir tmp;
        std::mutex hook_mutex;
        std::condition_variable hook_cv;
        bool hold = false;
        int running = 0, most_running = 0, calls = 0;
        std::atomic<bool> failing{false};
        WriterOptions options;
        options.sync = SyncPolicy::always;
        options.segment_bytes = 4096;
        options.sync_hook = [&](int fd) {
            std::unique_lock<std::mutex> lock(hook_mutex);
            ++calls;
            most_running = std::max(most_running, ++running);
            hook_cv.notify_all();
            hook_cv.wait(lock, [&] { return !hold; });
            --running;
            if (failing.load()) {
                errno = EIO;
                return -1;
            }
            return ::fdatasync(fd);
        };
        auto writer = open_writer(tmp.wal(), 1, options);
        const std::string large(3000, 'x');
        REQUIRE_OK(writer->append(1, large.data(), large.size()));
        int before = 0;
        {
            std::lock_guard<std::mutex> lock(hook_mutex);
            before = calls;
            hold = true;
        }
        std::atomic<int> first_code{-1};
        std::thread first([&] { first_code = static_cast<int>(writer->sync_to(1).code()); });
        {
            std::unique_lock<std::mutex> lock(hook_mutex);
            REQUIRE(hook_cv.wait_for(lock, std::chrono::seconds(10), [&] { return calls == before + 1; }));
        }
        failing = fail_first;
        // This record does not fit: the append rolls the segment, whose fdatasync must wait.
        std::atomic<int> second_code{-1};
        std::thread second([&] { second_code = static_cast<int>(writer->append(1, large.data(), large.size()).status().code()); });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        {
            std::lock_guard<std::mutex> lock(hook_mutex);
            CHECK_EQ(calls, before + 1);  // the roll waits for the running fdatasync
            hold = false;
            hook_cv.notify_all();
        }
        first.join();
        second.join();
        std::lock_guard<std::mutex> lock(hook_mutex);
        CHECK_EQ(most_running, 1);
        if (fail_first) {
            CHECK_EQ(first_code.load(), static_cast<int>(StatusCode::io_error));
            CHECK_EQ(second_code.load(), static_cast<int>(StatusCode::read_only));  // no roll after it
            CHECK_EQ(calls, before + 1);
            CHECK_EQ(segment_paths(tmp.wal()).size(), 1u);
        } else {
            CHECK_EQ(first_code.load(), static_cast<int>(StatusCode::ok));
            CHECK_EQ(second_code.load(), static_cast<int>(StatusCode::ok));
            CHECK_EQ(segment_paths(tmp.wal()).size(), 2u);
        }
    }
}

TEST_CASE("writer: start_sync does nothing under the interval and off policies") {
    for (SyncPolicy policy : {SyncPolicy::off, SyncPolicy::interval}) {
        TempDir tmp;
        std::atomic<int> syncs{0};
        WriterOptions options = counting_syncs(policy, syncs);
        options.sync_interval_ms = 60'000;  // the interval thread does not sync within the test
        auto writer = open_writer(tmp.wal(), 1, options);
        const int baseline = syncs.load();
        REQUIRE_OK(writer->append(1, "a", 1));
        writer->start_sync();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        CHECK_EQ(syncs.load(), baseline);
        CHECK_EQ(writer->synced_lsn(), 0u);
        REQUIRE_OK(writer->sync());
        CHECK_EQ(writer->synced_lsn(), 1u);
    }
}

TEST_CASE("writer: a failed fdatasync is io_error once, read_only after, and never retried") {
    TempDir tmp;
    std::atomic<bool> broken{false};
    std::atomic<int> calls_while_broken{0};
    WriterOptions options = fast_options();
    options.sync_hook = [&](int) {
        if (!broken.load()) return 0;
        ++calls_while_broken;
        errno = EIO;
        return -1;
    };
    auto writer = open_writer(tmp.wal(), 1, options);
    REQUIRE_OK(writer->append(1, "a", 1));
    REQUIRE_OK(writer->sync_to(1));
    REQUIRE_OK(writer->append(1, "b", 1));
    broken = true;

    Status first = writer->sync_to(2);
    CHECK(first.code() == StatusCode::io_error);
    CHECK(contains(first.message(), std::strerror(EIO)));
    CHECK(contains(first.message(), "fdatasync"));
    CHECK(writer->failed());
    CHECK_EQ(writer->synced_lsn(), 1u);

    auto later = writer->append(1, "c", 1);
    CHECK(later.status().code() == StatusCode::read_only);
    CHECK(contains(later.status().message(), "the WAL could not be synced"));
    CHECK(contains(later.status().message(), std::strerror(EIO)));
    CHECK(contains(later.status().message(), "the graph is read-only, reopen it to recover"));
    CHECK(writer->sync_to(2).code() == StatusCode::read_only);
    CHECK(writer->sync().code() == StatusCode::read_only);
    CHECK(writer->drop_segments_before(2).code() == StatusCode::read_only);
    CHECK(writer->close().code() == StatusCode::read_only);
    CHECK_EQ(calls_while_broken.load(), 1);  // the failed fdatasync was not retried
    CHECK_EQ(writer->last_lsn(), 2u);

    Replayed got = replay(tmp.wal(), true);  // reopening is the way back
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.last_lsn, 2u);
}

TEST_CASE("writer: a failed write is io_error once, read_only after; recovery cuts the partial frame") {
    TempDir tmp;
    auto writer = open_writer(tmp.wal(), 1);
    REQUIRE_OK(writer->append(1, "kept", 4));
    const std::string segment = segment_paths(tmp.wal()).at(0);
    const std::uint64_t size = fs::file_size(segment);

    auto failed = append_past_size_limit(*writer, size + 100, 1000);

    CHECK(failed.status().code() == StatusCode::io_error);
    CHECK(contains(failed.status().message(), std::strerror(EFBIG)));
    CHECK(writer->failed());
    auto later = writer->append(1, "x", 1);
    CHECK(later.status().code() == StatusCode::read_only);
    CHECK(contains(later.status().message(), "the WAL could not be written"));
    CHECK(writer->sync_to(1).code() == StatusCode::io_error);  // never made durable: its write failed
    CHECK(writer->sync_to(1).code() == StatusCode::read_only);  // told once
    writer.reset();

    Replayed got = replay(tmp.wal(), true);
    REQUIRE_OK(got.status);
    CHECK_EQ(got.report.last_lsn, 1u);
    CHECK_EQ(got.report.truncated_bytes, 100u);
    CHECK_EQ(std::uint64_t(fs::file_size(segment)), size);
}

TEST_CASE("writer: the interval policy syncs in the background") {
    TempDir tmp;
    std::atomic<int> syncs{0};
    WriterOptions options;
    options.sync = SyncPolicy::interval;
    options.sync_interval_ms = 10;
    options.sync_hook = [&](int) {
        ++syncs;
        return 0;
    };
    auto writer = open_writer(tmp.wal(), 1, options);
    REQUIRE_OK(writer->append(1, "a", 1));
    REQUIRE_OK(writer->append(1, "b", 1));
    REQUIRE_OK(writer->sync_to(2));  // returns at once under this policy
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (writer->synced_lsn() < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CHECK_EQ(writer->synced_lsn(), 2u);
    // Nothing new: the thread does not sync again.
    int after = syncs.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_EQ(syncs.load(), after);
    REQUIRE_OK(writer->close());
}

TEST_CASE("writer: the off policy syncs only on sync(), a roll, and not on close") {
    TempDir tmp;
    std::atomic<int> syncs{0};
    WriterOptions options = counting_syncs(SyncPolicy::off, syncs);
    auto writer = open_writer(tmp.wal(), 1, options);
    const int baseline = syncs.load();
    REQUIRE_OK(writer->append(1, "a", 1));
    REQUIRE_OK(writer->sync_to(1));
    CHECK_EQ(writer->synced_lsn(), 0u);
    CHECK_EQ(syncs.load(), baseline);
    REQUIRE_OK(writer->sync());
    CHECK_EQ(writer->synced_lsn(), 1u);
    CHECK_EQ(syncs.load(), baseline + 1);
    REQUIRE_OK(writer->append(1, "b", 1));
    REQUIRE_OK(writer->close());
    CHECK_EQ(syncs.load(), baseline + 1);
    CHECK_EQ(replay(tmp.wal()).report.last_lsn, 2u);
}

// ---------------------------------------------------------------------------------------------
// Tail marker (wal_format.hpp, TAIL MARKER).

namespace {

// fast_options() that keep the tail marker at <tmp>/WAL_TAIL.
WriterOptions marker_options(const TempDir& tmp, std::uint64_t segment_bytes = 64ull << 20) {
    WriterOptions options = fast_options(segment_bytes);
    options.tail_marker_path = tmp.path(tail_marker_name);
    return options;
}

// The first LSN the marker at `path` names; 0 when there is none.
std::uint64_t marker_lsn(const std::string& path) {
    TailMarker marker;
    auto found = read_tail_marker(path, &marker);
    REQUIRE_OK(found);
    if (!found.value()) return 0;
    CHECK(marker.uuid == db_uuid);
    return marker.first_lsn;
}

std::uint64_t newest_first_lsn(const std::string& dir) {
    auto listed = list_segments(dir);
    REQUIRE_OK(listed);
    return listed.value().empty() ? 0 : listed.value().back().first_lsn;
}

std::string marker_bytes(const Uuid& uuid, std::uint64_t first_lsn) {
    std::string bytes(tail_marker_bytes, '\0');
    encode_tail_marker(TailMarker{uuid, first_lsn}, reinterpret_cast<std::uint8_t*>(bytes.data()));
    return bytes;
}

// The file an open descriptor is on (the sync hook gets only the descriptor).
std::string path_of_fd(int fd) {
    char target[PATH_MAX] = {};
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    return n > 0 ? std::string(target, std::size_t(n)) : std::string();
}

bool ends_with(const std::string& text, const std::string& end) {
    return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// Recovery as Graph.open runs it: truncate_tail, with the marker; records are not kept.
Result<RecoveryReport> recover_with_marker(const TempDir& tmp, std::uint64_t from_lsn = 1) {
    return recover(tmp.wal(), db_uuid, from_lsn, RecordVisitor(), true, tmp.path(tail_marker_name));
}

}  // namespace

TEST_CASE("tail marker: written at open and at each roll with the new segment's first LSN, never per record") {
    TempDir tmp;
    const std::string marker = tmp.path(tail_marker_name);
    std::atomic<int> syncs{0};
    WriterOptions options = marker_options(tmp, 256);
    options.sync = SyncPolicy::off;  // fdatasyncs only at rolls: the marker's are counted exactly
    options.sync_hook = [&](int) {
        ++syncs;
        return 0;
    };
    auto writer = open_writer(tmp.wal(), 1, options);
    CHECK_EQ(marker_lsn(marker), 1u);
    CHECK_EQ(read_file(marker), marker_bytes(db_uuid, 1));
    CHECK(!fs::exists(marker + ".tmp"));
    CHECK_EQ(syncs.load(), 2);  // the new segment's header, the marker
    std::uint64_t newest = 1;
    int rolls = 0;
    for (std::uint64_t lsn = 1; lsn <= 40; ++lsn) {
        const int before = syncs.load();
        REQUIRE_OK(writer->append(1, payload_for(lsn, 60).data(), 60));
        const std::uint64_t now = newest_first_lsn(tmp.wal());
        if (now != newest) {
            ++rolls;
            CHECK_EQ(now, lsn);  // the roll made the segment of this record
            CHECK_EQ(syncs.load() - before, 3);  // old segment, new segment's header, marker
            newest = now;
        } else {
            CHECK_EQ(syncs.load(), before);  // an append within a segment writes no marker
        }
        CHECK_EQ(marker_lsn(marker), newest);
    }
    CHECK(rolls >= 8);
    REQUIRE_OK(writer->roll_segment());  // as a checkpoint does
    CHECK_EQ(newest_first_lsn(tmp.wal()), 41u);
    CHECK_EQ(marker_lsn(marker), 41u);
    REQUIRE_OK(writer->append(1, "z", 1));
    REQUIRE_OK(writer->close());

    // Reopening appends to the newest segment, which the marker names already: not rewritten.
    syncs = 0;
    writer = open_writer(tmp.wal(), 42, options);
    CHECK_EQ(syncs.load(), 1);  // the segment appended to, only
    CHECK_EQ(marker_lsn(marker), 41u);
    REQUIRE_OK(writer->close());

    // A folder written before markers (or whose marker was removed): the writer writes one.
    fs::remove(marker);
    syncs = 0;
    writer = open_writer(tmp.wal(), 42, options);
    CHECK_EQ(syncs.load(), 2);
    CHECK_EQ(marker_lsn(marker), 41u);
    REQUIRE_OK(writer->close());

    // A leftover marker .tmp (a crash while one was written) is deleted; so is one from another
    // database replaced.
    write_file(marker + ".tmp", marker_bytes(db_uuid, 99).substr(0, 13));
    write_file(marker, marker_bytes(other_uuid, 7));
    writer = open_writer(tmp.wal(), 42, options);
    CHECK(!fs::exists(marker + ".tmp"));
    CHECK_EQ(marker_lsn(marker), 41u);
    REQUIRE_OK(writer->close());
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
}

TEST_CASE("tail marker: check_tail refuses a log without the marker's segment, naming it and the lost LSN") {
    TempDir tmp;
    const std::string marker = tmp.path(tail_marker_name);
    write_log(tmp.wal(), std::vector<std::size_t>(30, 60), 1, marker_options(tmp, 256));
    auto listed = list_segments(tmp.wal());
    REQUIRE_OK(listed);
    const std::vector<SegmentFile> segments = listed.value();
    REQUIRE(segments.size() >= 4);
    const std::uint64_t newest = segments.back().first_lsn;
    const std::uint64_t second = segments[segments.size() - 2].first_lsn;
    CHECK_EQ(marker_lsn(marker), newest);
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));

    // The newest segment deleted: recovery alone ends early without a word; the check refuses.
    fs::rename(segments.back().path, tmp.path("newest.aside"));
    Replayed early = replay(tmp.wal());
    REQUIRE_OK(early.status);
    CHECK_EQ(early.report.last_lsn, newest - 1);
    Status lost = check_tail(tmp.wal(), marker, db_uuid, 1);
    CHECK(lost.code() == StatusCode::corruption);
    CHECK(contains(lost.message(), "WAL segment " + segments.back().path + " is missing"));
    CHECK(contains(lost.message(), "the newest segment in " + tmp.wal() + " is " + segment_file_name(second) +
                                       ", which ends at LSN " + std::to_string(newest - 1)));
    CHECK(contains(lost.message(), "Writes acknowledged from LSN " + std::to_string(newest) + " on are lost"));
    CHECK(contains(lost.message(), "vecgraph restore"));
    CHECK(contains(lost.message(), "remove " + marker + " to open it without those writes"));

    // The two newest deleted: lost from the end of what is left, or from the first LSN
    // recovery needs when a snapshot holds more than that.
    fs::rename(segments[segments.size() - 2].path, tmp.path("second.aside"));
    lost = check_tail(tmp.wal(), marker, db_uuid, 1);
    CHECK(contains(lost.message(), "from LSN " + std::to_string(second) + " on are lost"));
    lost = check_tail(tmp.wal(), marker, db_uuid, second + 1);
    CHECK(contains(lost.message(), "from LSN " + std::to_string(second + 1) + " on are lost"));

    // The whole wal/ folder gone, or empty: lost from the first LSN recovery needs.
    fs::rename(tmp.wal(), tmp.path("wal.aside"));
    lost = check_tail(tmp.wal(), marker, db_uuid, 7);
    CHECK(lost.code() == StatusCode::corruption);
    CHECK(contains(lost.message(), "but " + tmp.wal() + " is missing"));
    CHECK(contains(lost.message(), "from LSN 7 on are lost"));
    fs::create_directory(tmp.wal());
    lost = check_tail(tmp.wal(), marker, db_uuid, 7);
    CHECK(contains(lost.message(), "but " + tmp.wal() + " holds no segment"));
    fs::remove(tmp.wal());
    fs::rename(tmp.path("wal.aside"), tmp.wal());
    fs::rename(tmp.path("second.aside"), segments[segments.size() - 2].path);
    fs::rename(tmp.path("newest.aside"), segments.back().path);
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));

    // A segment newer than the marker (a crash before the marker named it) is fine.
    const std::uint64_t after = replay(tmp.wal()).report.next_lsn;
    write_file(tmp.wal() + "/" + segment_file_name(after), make_segment_header(db_uuid, after));
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
    fs::remove(tmp.wal() + "/" + segment_file_name(after));

    // Without the newest segment: no marker checks nothing; another database's is ignored.
    fs::remove(segments.back().path);
    write_file(marker, marker_bytes(other_uuid, newest));
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
    fs::remove(marker);
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));

    // A damaged marker is corruption naming the file and what is wrong.
    std::string flipped = marker_bytes(db_uuid, newest);
    flip_bit(flipped, 33 * 8);
    write_file(marker, flipped);
    lost = check_tail(tmp.wal(), marker, db_uuid, 1);
    CHECK(lost.code() == StatusCode::corruption);
    CHECK(contains(lost.message(), "the WAL tail marker " + marker + " is damaged: its checksum does not match"));
    write_file(marker, marker_bytes(db_uuid, newest).substr(0, 20));
    CHECK(contains(check_tail(tmp.wal(), marker, db_uuid, 1).message(), "it is 20 bytes, expected 48"));
    write_file(marker, marker_bytes(db_uuid, newest) + "x");
    CHECK(contains(check_tail(tmp.wal(), marker, db_uuid, 1).message(), "it is 49 bytes, expected 48"));
}

TEST_CASE("tail marker: a kill at any fdatasync of segment rolls (also between segment and marker rename) recovers") {
    // With policy off the writer fdatasyncs only in a roll: the old segment, the new segment's
    // .log.tmp (before its rename), WAL_TAIL.tmp (after the segment's rename, before the
    // marker's). The child dies at the K-th of them, K = 1, 2, ...; its writes are in the page
    // cache (a process dies, not the machine), so every record appended before stays.
    constexpr int not_reached = 250;
    int between_renames = 0, during_creation = 0, cases = 0;
    for (int k = 1; k < 200; ++k) {
        TempDir tmp;
        const int status = wait_status_of_child(251, [&] {
            int appended = 0, calls = 0;
            WriterOptions options = marker_options(tmp, 256);
            options.sync = SyncPolicy::off;
            bool armed = false;
            options.sync_hook = [&](int) {
                if (armed && ++calls == k) std::_Exit(appended);
                return 0;
            };
            auto opened = Writer::open(tmp.wal(), db_uuid, 1, options);
            if (!opened.ok()) return 252;
            auto writer = std::move(opened).value();
            armed = true;
            for (std::uint64_t lsn = 1; lsn <= 60; ++lsn) {
                if (!writer->append(1, payload_for(lsn, 60).data(), 60).ok()) return 253;
                ++appended;
            }
            return not_reached;
        });
        REQUIRE(WIFEXITED(status));
        const int appended = WEXITSTATUS(status);
        if (appended == not_reached) break;
        REQUIRE(appended <= 60);
        ++cases;
        const std::string marker = tmp.path(tail_marker_name);
        if (fs::exists(marker + ".tmp")) {
            ++between_renames;
            CHECK(newest_first_lsn(tmp.wal()) > marker_lsn(marker));  // the segment's rename is durable
        }
        if (fs::exists(tmp.wal() + "/" + segment_file_name(std::uint64_t(appended) + 1) + ".tmp")) ++during_creation;
        CHECK(newest_first_lsn(tmp.wal()) >= marker_lsn(marker));

        REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
        auto report = recover_with_marker(tmp);
        REQUIRE_OK(report);
        CHECK_EQ(report.value().last_lsn, std::uint64_t(appended));
        auto writer = open_writer(tmp.wal(), report.value().next_lsn, marker_options(tmp, 256));
        CHECK(!fs::exists(marker + ".tmp"));
        CHECK_EQ(marker_lsn(marker), newest_first_lsn(tmp.wal()));
        REQUIRE_OK(writer->append(1, "z", 1));
        REQUIRE_OK(writer->close());
        REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
        CHECK_EQ(replay(tmp.wal()).report.last_lsn, std::uint64_t(appended) + 1);
    }
    std::printf("  %d kills, %d between the renames, %d during creation\n", cases, between_renames, during_creation);
    CHECK(cases >= 30);
    CHECK(between_renames >= 10);
    CHECK(during_creation >= 10);
}

TEST_CASE("tail marker: a failed marker write fails the writer as a failed segment creation does") {
    TempDir tmp;
    const std::string marker = tmp.path(tail_marker_name);
    bool fail_marker = false;
    WriterOptions options = marker_options(tmp, 256);
    options.sync = SyncPolicy::off;
    options.sync_hook = [&](int fd) {
        if (fail_marker && ends_with(path_of_fd(fd), "/" + std::string(tail_marker_name) + ".tmp")) {
            errno = EIO;
            return -1;
        }
        return 0;
    };
    // At open: the open fails; the segment it created stays, empty, and the next open uses it.
    fail_marker = true;
    auto refused = Writer::open(tmp.wal(), db_uuid, 1, options);
    CHECK(refused.status().code() == StatusCode::io_error);
    CHECK(contains(refused.status().message(), "fdatasync of " + marker + ".tmp failed"));
    CHECK_EQ(marker_lsn(marker), 0u);
    CHECK(!fs::exists(marker + ".tmp"));
    CHECK_EQ(newest_first_lsn(tmp.wal()), 1u);
    fail_marker = false;
    auto writer = open_writer(tmp.wal(), 1, options);
    CHECK_EQ(marker_lsn(marker), 1u);

    // At a roll: the append that rolls fails, the writer is read-only, nothing is appended to the
    // new segment, and the marker still names the old one.
    REQUIRE_OK(writer->append(1, payload_for(1, 150).data(), 150));
    fail_marker = true;
    Result<std::uint64_t> rolled = writer->append(1, payload_for(2, 150).data(), 150);
    CHECK(rolled.status().code() == StatusCode::io_error);
    CHECK(writer->failed());
    CHECK(writer->append(1, "z", 1).status().code() == StatusCode::read_only);
    (void)writer->close();
    fail_marker = false;
    CHECK_EQ(newest_first_lsn(tmp.wal()), 2u);
    CHECK_EQ(marker_lsn(marker), 1u);
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
    auto report = recover_with_marker(tmp);
    REQUIRE_OK(report);
    CHECK_EQ(report.value().last_lsn, 1u);
    CHECK_EQ(report.value().next_lsn, 2u);
    writer = open_writer(tmp.wal(), 2, options);
    CHECK_EQ(marker_lsn(marker), 2u);
    REQUIRE_OK(writer->close());
}

TEST_CASE("tail marker: recovery deletes the marker before a short last segment it names: no false alarm") {
    TempDir tmp;
    const std::string marker = tmp.path(tail_marker_name);
    write_log(tmp.wal(), {10, 20}, 1, marker_options(tmp));
    const std::string torn = tmp.wal() + "/" + segment_file_name(3);
    write_file(torn, make_segment_header(db_uuid, 3).substr(0, 30));
    write_file(marker, marker_bytes(db_uuid, 3));
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
    // Without the marker's path recovery leaves the marker alone (and it would then name a
    // segment the log no longer has).
    {
        TempDir copy;
        fs::copy(tmp.wal(), copy.wal());
        fs::copy_file(marker, copy.path(tail_marker_name));
        REQUIRE_OK(replay(copy.wal(), true).status);
        CHECK(check_tail(copy.wal(), copy.path(tail_marker_name), db_uuid, 1).code() == StatusCode::corruption);
    }
    auto report = recover_with_marker(tmp);
    REQUIRE_OK(report);
    CHECK(!fs::exists(torn));
    CHECK(!fs::exists(marker));
    CHECK_EQ(report.value().next_lsn, 3u);
    REQUIRE_OK(check_tail(tmp.wal(), marker, db_uuid, 1));
    // A marker naming an older segment is kept.
    write_file(torn, make_segment_header(db_uuid, 3).substr(0, 30));
    write_file(marker, marker_bytes(db_uuid, 1));
    REQUIRE_OK(recover_with_marker(tmp));
    CHECK(!fs::exists(torn));
    CHECK_EQ(marker_lsn(marker), 1u);
    auto writer = open_writer(tmp.wal(), 3, marker_options(tmp));
    CHECK_EQ(marker_lsn(marker), 1u);
    REQUIRE_OK(writer->close());
}

TEST_CASE("writer: drop_segments_before fsyncs the folder after each deletion, so a crash leaves no LSN gap") {
    TempDir tmp;
    auto writer = open_writer(tmp.wal(), 1, fast_options(256));
    for (int i = 0; i < 20; ++i) REQUIRE_OK(writer->append(1, payload_for(i + 1, 60).data(), 60));
    auto listed = list_segments(tmp.wal());
    REQUIRE_OK(listed);
    REQUIRE(listed.value().size() >= 6);
    const long before = fsync_calls.load();
    REQUIRE_OK(writer->drop_segments_before(listed.value()[4].first_lsn));
    CHECK_EQ(fsync_calls.load() - before, 4);
    CHECK_EQ(segment_paths(tmp.wal()).front(), listed.value()[4].path);
    REQUIRE_OK(writer->close());
}

// ---------------------------------------------------------------------------------------------
// Golden file: a segment written by format version 1. It must keep loading, byte for byte.

namespace {

const Uuid golden_uuid = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                          0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};

std::vector<Record> golden_records() {
    std::string ascending(32, '\0');
    for (int i = 0; i < 32; ++i) ascending[i] = char(i);
    std::string checkpoint_lsn(8, '\0');
    checkpoint_lsn[0] = 6;
    return {
        {1, 0, 1, "add_nodes: alice, bob"},
        {2, 0, 2, ascending},
        {3, 0, 3, ""},
        {4, 0, 4, std::string("node-1\0node-2", 13)},
        {5, 0, 5, "\xff\xfe\xfd"},
        {6, 0, 6, "tenant-a"},
        {7, 0, 7, checkpoint_lsn},
        {200, flag_skippable, 8, "a record type from a later version"},
    };
}

}  // namespace

TEST_CASE("golden: the v1 segment reads back with exact LSNs, types and payloads") {
    const std::string golden = std::string(VECGRAPH_TEST_DATA_DIR) + "/wal/v1/" + segment_file_name(1);
    REQUIRE(fs::exists(golden));
    TempDir tmp;
    fs::create_directories(tmp.wal());
    fs::copy_file(golden, tmp.wal() + "/" + segment_file_name(1));
    Replayed got = replay(tmp.wal(), false, 1, golden_uuid);
    REQUIRE_OK(got.status);
    std::vector<Record> expected = golden_records();
    CHECK_EQ(got.report.records, 8u);
    CHECK_EQ(got.report.skipped, 1u);
    CHECK_EQ(got.report.truncated_bytes, 0u);
    REQUIRE(got.records.size() == 7);
    for (std::size_t i = 0; i < 7; ++i) {
        CHECK_EQ(int(got.records[i].type), int(expected[i].type));
        CHECK_EQ(int(got.records[i].flags), int(expected[i].flags));
        CHECK_EQ(got.records[i].lsn, expected[i].lsn);
        CHECK(got.records[i].payload == expected[i].payload);
    }
}

TEST_CASE("golden: this version writes the v1 segment byte for byte") {
    const std::string golden = std::string(VECGRAPH_TEST_DATA_DIR) + "/wal/v1/" + segment_file_name(1);
    TempDir tmp;
    auto opened = Writer::open(tmp.wal(), golden_uuid, 1, fast_options());
    REQUIRE_OK(opened);
    auto writer = std::move(opened).value();
    for (const Record& record : golden_records())
        REQUIRE_OK(writer->append(record.type, record.payload.data(), record.payload.size(), record.flags));
    REQUIRE_OK(writer->close());
    CHECK(read_file(segment_paths(tmp.wal()).at(0)) == read_file(golden));
}

TEST_MAIN()
