// The write-ahead log's on-disk format, version 1, and its encoders and decoders.
//
// FOLDER
//   A database's log is the folder wal/ holding segment files named <first-lsn>.log, where
//   <first-lsn> is the LSN of the segment's first record as 20-digit zero-padded decimal, so
//   that names sort in LSN order (00000000000000000001.log). Other names are not segments; a
//   writer creates a segment as <first-lsn>.log.tmp, fsyncs it and renames it, so a .log file
//   always starts with a complete, durable header. Every integer is little-endian.
//
// SEGMENT HEADER (48 bytes, at offset 0)
//    0  magic           8 bytes   "VGWAL\0\r\n" (the \0 and \r\n catch text-mode and truncating copies)
//    8  version         u32       1
//   12  header_bytes    u32       48
//   16  db_uuid         16 bytes  the uuid of the database the segment belongs to (MANIFEST has it too)
//   32  first_lsn       u64       LSN of the segment's first record; equals the number in the file name
//   40  header_crc      u32       masked CRC32C of bytes [0, 40)
//   44  reserved        u32       0
//
// RECORD FRAME (at offset 48 and then back to back; every frame starts at a multiple of 8)
//    0  crc             u32       masked CRC32C of bytes [4, 20 + payload_bytes): the rest of the
//                                 frame header and the payload, not the pad
//    4  payload_bytes   u32       at most max_payload_bytes (1 GiB)
//    8  type            u8        RecordType; 0 is never a record type
//    9  flags           u8        bit 0: skippable; bits 1-7 are 0
//   10  reserved        u16       0
//   12  lsn             u64       the previous record's LSN + 1 (the first record's: first_lsn)
//   20  payload         payload_bytes bytes, opaque to the log
//       pad             zero bytes up to the next multiple of 8; frame_bytes = align8(20 + payload_bytes)
//   A frame is written with one writev(2), pad included.
//
// MASKED CRC
//   Stored checksums are masked as in LevelDB: masked = rotate_right(crc, 15) + 0xa282ead8. The CRC
//   of a byte string that ends with its own plain CRC32C is a constant, so plain CRCs would make
//   data that embeds frames or checksums (a payload holding a copy of a frame, a log inside a log)
//   verify where it should not; the mask breaks that relation. Readers unmask before comparing.
//
// RECORD TYPES
//   Numbered explicitly and never renumbered (see RecordType). flags bit 0 (skippable) says a
//   reader that does not know the type may skip the record; an unknown type without it is
//   corruption (written by a newer version whose records this one cannot apply).
//
// VALIDITY
//   A segment header is valid when its file holds at least 48 bytes, and magic, version,
//   header_bytes, header_crc, db_uuid (the opening database's) and first_lsn (the file name's)
//   all match. A record frame at offset P is valid when: the file holds its 20-byte header;
//   payload_bytes <= max_payload_bytes; the whole frame, pad included, lies inside the file;
//   type != 0, reserved == 0 and flag bits 1-7 are 0; the CRC matches; the pad is zero; and its
//   LSN is the previous record's + 1 (first_lsn for the segment's first record). Segments chain:
//   each segment's first_lsn is the previous segment's last LSN + 1.
//
// TORN TAIL
//   A crash can leave the last segment ending in a partial or garbled frame (or, if it struck
//   while the file was created, a header shorter than 48 bytes). At the first invalid frame of
//   the LAST segment, the reader scans every 8-byte aligned offset from that frame to the end of
//   the file for a frame that is valid on its own (every rule above except the LSN chain) with
//   an LSN greater than the last good record's. If there is none, the rest of the file is a torn
//   tail: recovery reports it and, when asked, cuts it (ftruncate + fsync) so appending resumes
//   there. If there is one, records were lost in the middle of the log: corruption. An invalid
//   header or frame in any segment but the last, a header of another database, or a gap in the
//   LSN chain is always corruption.
//
// TAIL MARKER (WAL_TAIL in the graph folder, beside wal/, so that losing all of wal/ shows too)
//   A 48-byte file naming the newest segment the writer has created, so that a log whose newest
//   segments were deleted (or copied without them) is refused instead of silently ending early:
//    0  magic           8 bytes   "VGTAIL\0\n"
//    8  version         u32       1
//   12  marker_bytes    u32       48
//   16  db_uuid         16 bytes  the database's uuid, as in the segment headers
//   32  first_lsn       u64       first LSN of the newest segment (its file name's number)
//   40  marker_crc      u32       masked CRC32C of bytes [0, 40)
//   44  reserved        u32       0
//   The writer writes it when it attaches (naming the segment it appends to or creates) and each
//   time it creates a segment, never per record: after the new segment is durable in wal/ (its
//   .log.tmp fdatasynced and renamed, wal/ fsynced) and before any record is appended to it, as
//   WAL_TAIL.tmp, fdatasynced, renamed over WAL_TAIL, the graph folder fsynced. A failure there
//   fails the writer as a failed segment creation does. So after any crash the newest segment
//   in wal/ starts at or after the marker's first_lsn (the marker is old or new, the segment it
//   names exists; a WAL_TAIL.tmp is never read, and is deleted). Segments are only deleted below
//   the one being written, which is the newest. A log whose newest segment starts before the
//   marker's first_lsn, or no log at all, has lost segments: corruption. No marker (a folder
//   written before markers, or one removed on purpose to accept the loss) checks nothing, and
//   the writer writes one when it attaches; a marker of another database is ignored (and
//   replaced when the writer attaches); a damaged marker is corruption.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "vecgraph/crc32c.hpp"

namespace vecgraph::wal {

/// A database's uuid, as stored in every segment header.
using Uuid = std::array<std::uint8_t, 16>;

constexpr char segment_magic[8] = {'V', 'G', 'W', 'A', 'L', '\0', '\r', '\n'};
constexpr std::uint32_t format_version = 1;
constexpr std::size_t segment_header_bytes = 48;
constexpr std::size_t frame_header_bytes = 20;
constexpr std::size_t frame_alignment = 8;
constexpr std::uint32_t max_payload_bytes = 1u << 30;
constexpr std::uint8_t flag_skippable = 0x01;
constexpr std::uint32_t crc_mask_delta = 0xa282ead8u;
constexpr const char* segment_suffix = ".log";
constexpr const char* segment_tmp_suffix = ".log.tmp";
constexpr char tail_marker_magic[8] = {'V', 'G', 'T', 'A', 'I', 'L', '\0', '\n'};
constexpr std::uint32_t tail_marker_version = 1;
constexpr std::size_t tail_marker_bytes = 48;
constexpr const char* tail_marker_name = "WAL_TAIL";  // in the graph folder, beside wal/

/// Record types. Numbers are part of the format: never renumber or reuse one.
enum class RecordType : std::uint8_t {
    add_nodes = 1,
    add_edges = 2,
    upsert_nodes = 3,
    delete_nodes = 4,
    delete_edges = 5,
    delete_tenant = 6,
    checkpoint = 7,  // marker: a snapshot up to this LSN was committed
    set_aliases = 8,
    update_nodes = 9,  // an update that kept the nodes' vectors: replayed as an upsert, not indexed again
};

inline bool is_known_record_type(std::uint8_t type) noexcept { return type >= 1 && type <= 9; }

inline const char* record_type_name(std::uint8_t type) noexcept {
    switch (type) {
        case 1: return "add_nodes";
        case 2: return "add_edges";
        case 3: return "upsert_nodes";
        case 4: return "delete_nodes";
        case 5: return "delete_edges";
        case 6: return "delete_tenant";
        case 7: return "checkpoint";
        case 8: return "set_aliases";
        case 9: return "update_nodes";
        default: return "unknown";
    }
}

inline std::uint32_t mask_crc(std::uint32_t crc) noexcept { return ((crc >> 15) | (crc << 17)) + crc_mask_delta; }
inline std::uint32_t unmask_crc(std::uint32_t masked) noexcept {
    std::uint32_t rotated = masked - crc_mask_delta;
    return (rotated >> 17) | (rotated << 15);
}

/// Bytes a frame with `payload_bytes` of payload occupies, pad included.
constexpr std::uint64_t frame_bytes(std::uint64_t payload_bytes) noexcept {
    return (frame_header_bytes + payload_bytes + frame_alignment - 1) / frame_alignment * frame_alignment;
}

// Little-endian stores and loads, independent of the host's byte order.
inline void store_u16(std::uint8_t* p, std::uint16_t v) noexcept {
    for (int i = 0; i < 2; ++i) p[i] = std::uint8_t(v >> (8 * i));
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) noexcept {
    for (int i = 0; i < 4; ++i) p[i] = std::uint8_t(v >> (8 * i));
}
inline void store_u64(std::uint8_t* p, std::uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) p[i] = std::uint8_t(v >> (8 * i));
}
inline std::uint16_t load_u16(const std::uint8_t* p) noexcept { return std::uint16_t(p[0] | (p[1] << 8)); }
inline std::uint32_t load_u32(const std::uint8_t* p) noexcept {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
inline std::uint64_t load_u64(const std::uint8_t* p) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

struct SegmentHeader {
    Uuid uuid{};
    std::uint64_t first_lsn = 0;
};

// The 48-byte layout segment headers and tail markers share: magic (8), version (u32), size
// (u32), uuid (16), LSN (u64), masked CRC32C of bytes 0-40 (u32), reserved zero (u32).
inline void encode_uuid_lsn_block(const char* magic, std::uint32_t version, std::uint32_t bytes, const Uuid& uuid,
                                  std::uint64_t lsn, std::uint8_t* out /* 48 bytes */) noexcept {
    std::memset(out, 0, 48);
    std::memcpy(out, magic, 8);
    store_u32(out + 8, version);
    store_u32(out + 12, bytes);
    std::memcpy(out + 16, uuid.data(), 16);
    store_u64(out + 32, lsn);
    store_u32(out + 40, mask_crc(crc32c(out, 40)));
}

inline void encode_segment_header(const SegmentHeader& header, std::uint8_t* out /* segment_header_bytes */) noexcept {
    static_assert(segment_header_bytes == 48, "the shared 48-byte layout");
    encode_uuid_lsn_block(segment_magic, format_version, std::uint32_t(segment_header_bytes), header.uuid,
                          header.first_lsn, out);
}

/// Decodes a segment header from `segment_header_bytes` bytes. Returns "" if magic, version,
/// header_bytes, CRC and reserved field are right, else what is wrong. Uuid and first_lsn are
/// the caller's to check.
inline std::string decode_segment_header(const std::uint8_t* bytes, SegmentHeader* out) {
    if (std::memcmp(bytes, segment_magic, 8) != 0) return "it does not start with the WAL magic \"VGWAL\\0\\r\\n\"";
    std::uint32_t version = load_u32(bytes + 8);
    if (version != format_version)
        return "its format version is " + std::to_string(version) + ", this build reads version " +
               std::to_string(format_version);
    std::uint32_t header_bytes = load_u32(bytes + 12);
    if (header_bytes != segment_header_bytes)
        return "its header size is " + std::to_string(header_bytes) + " bytes, expected " +
               std::to_string(segment_header_bytes);
    if (unmask_crc(load_u32(bytes + 40)) != crc32c(bytes, 40)) return "its header checksum does not match";
    if (load_u32(bytes + 44) != 0) return "its header's reserved field is not zero";
    std::memcpy(out->uuid.data(), bytes + 16, 16);
    out->first_lsn = load_u64(bytes + 32);
    return {};
}

/// What the tail marker holds (see TAIL MARKER above).
struct TailMarker {
    Uuid uuid{};
    std::uint64_t first_lsn = 0;  // first LSN of the newest segment
};

inline void encode_tail_marker(const TailMarker& marker, std::uint8_t* out /* tail_marker_bytes */) noexcept {
    static_assert(tail_marker_bytes == 48, "the shared 48-byte layout");
    encode_uuid_lsn_block(tail_marker_magic, tail_marker_version, std::uint32_t(tail_marker_bytes), marker.uuid,
                          marker.first_lsn, out);
}

/// Decodes a tail marker from `bytes` bytes of file. Returns "" if its size, magic, version,
/// marker_bytes, CRC, reserved field and first_lsn (not 0) are right, else what is wrong.
inline std::string decode_tail_marker(const std::uint8_t* data, std::size_t bytes, TailMarker* out) {
    if (bytes != tail_marker_bytes)
        return "it is " + std::to_string(bytes) + " bytes, expected " + std::to_string(tail_marker_bytes);
    if (std::memcmp(data, tail_marker_magic, 8) != 0) return "it does not start with the magic \"VGTAIL\\0\\n\"";
    std::uint32_t version = load_u32(data + 8);
    if (version != tail_marker_version)
        return "its format version is " + std::to_string(version) + ", this build reads version " +
               std::to_string(tail_marker_version);
    if (load_u32(data + 12) != tail_marker_bytes)
        return "its size field says " + std::to_string(load_u32(data + 12)) + " bytes, expected " +
               std::to_string(tail_marker_bytes);
    if (unmask_crc(load_u32(data + 40)) != crc32c(data, 40)) return "its checksum does not match";
    if (load_u32(data + 44) != 0) return "its reserved field is not zero";
    std::memcpy(out->uuid.data(), data + 16, 16);
    out->first_lsn = load_u64(data + 32);
    if (out->first_lsn == 0) return "it names LSN 0, which is never used";
    return {};
}

struct FrameHeader {
    std::uint32_t masked_crc = 0;
    std::uint32_t payload_bytes = 0;
    std::uint8_t type = 0;
    std::uint8_t flags = 0;
    std::uint16_t reserved = 0;
    std::uint64_t lsn = 0;
};

/// Masked CRC of a frame: bytes [4, 20) of its header, then the payload.
inline std::uint32_t frame_crc(const std::uint8_t* header, const void* payload, std::size_t payload_bytes) noexcept {
    return mask_crc(crc32c_extend(crc32c(header + 4, frame_header_bytes - 4), payload, payload_bytes));
}

/// Writes the 20-byte frame header (CRC included) of a record.
inline void encode_frame_header(std::uint8_t type, std::uint8_t flags, std::uint64_t lsn, const void* payload,
                                std::uint32_t payload_bytes, std::uint8_t* out /* frame_header_bytes */) noexcept {
    store_u32(out + 4, payload_bytes);
    out[8] = type;
    out[9] = flags;
    store_u16(out + 10, 0);
    store_u64(out + 12, lsn);
    store_u32(out, frame_crc(out, payload, payload_bytes));
}

inline FrameHeader decode_frame_header(const std::uint8_t* p) noexcept {
    FrameHeader h;
    h.masked_crc = load_u32(p);
    h.payload_bytes = load_u32(p + 4);
    h.type = p[8];
    h.flags = p[9];
    h.reserved = load_u16(p + 10);
    h.lsn = load_u64(p + 12);
    return h;
}

/// "00000000000000000001.log" for LSN 1.
inline std::string segment_file_name(std::uint64_t first_lsn) {
    char name[32];
    std::snprintf(name, sizeof name, "%020llu.log", static_cast<unsigned long long>(first_lsn));
    return name;
}

/// The first LSN in a segment file name, or false if `name` is not one (20 digits + ".log").
inline bool parse_segment_file_name(std::string_view name, std::uint64_t* first_lsn) noexcept {
    if (name.size() != 24 || name.substr(20) != ".log") return false;
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < 20; ++i) {
        char c = name[i];
        if (c < '0' || c > '9') return false;
        std::uint64_t digit = std::uint64_t(c - '0');
        if (value > (UINT64_MAX - digit) / 10) return false;
        value = value * 10 + digit;
    }
    *first_lsn = value;
    return true;
}

/// A uuid as 8-4-4-4-12 lowercase hex.
inline std::string format_uuid(const Uuid& uuid) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < uuid.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        out += hex[uuid[i] >> 4];
        out += hex[uuid[i] & 15];
    }
    return out;
}

}  // namespace vecgraph::wal
