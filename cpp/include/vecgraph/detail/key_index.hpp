// The node key map: every node's encoded key (types.hpp) by node id, and the live keys' node
// ids by key.
//
// Keys live in an arena of chunks that never move, so a std::string_view of a key stays valid
// after the engine's lock is released, however many nodes are added later. Each record is the
// key's length (u32) followed by its bytes. A node id keeps its key after erase() (a deleted
// node still has one; a later add of the same key makes a new node).
//
// The lookup side is an open-addressing table (linear probing, at most 70% full counting
// tombstones) of 16-byte slots: a hash tag, the node id, and a word. The tag's top bit says what
// the word is: an encoded int key's 8 value bytes (the key itself: no record to read), or the
// key's record. The home slot is derived from the tag alone, so growing the table never rereads
// a key. A lookup reads one slot line, plus one record for a str key, where a
// std::unordered_map<std::string, ...> reads a bucket, a node and its string. find_many() looks
// up a batch with the cache misses of 16 keys in flight at once (software prefetch in stages),
// which is what bulk edge ingest spends its time on. The chunks (up to 2 MiB each), the slots
// and the per-id records go on huge pages once they are large enough (huge_pages.hpp): lookups
// read them at random.
//
// Measured at 1M int keys (AVX2 VM, one thread): find_many 45-49 ns a key and find 98-101 ns,
// against 81-112 and 182-298 ns with records for int keys too; the huge pages gave about 10%.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vecgraph/detail/huge_pages.hpp"
#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/types.hpp"

namespace vecgraph::detail {

class KeyIndex {
  public:
    /// Live keys (the ids not erased).
    std::size_t size() const noexcept { return count_live_; }
    /// Ids handed out so far (live and erased): the next append() returns this.
    std::size_t count_ids() const noexcept { return records_.size(); }

    /// The key of `id` (< count_ids(); erased ids keep theirs). Valid while the index lives.
    std::string_view key(node_id_t id) const noexcept { return view(records_[id]); }

    /// The id of live `key`, or invalid_id.
    node_id_t find(std::string_view key) const noexcept {
        if (table_.slots.empty()) return invalid_id;
        return find_hashed(key, tag_of(key));
    }

    /// ids[i] = find(keys[i]) for i < count, with up to `lookup_block` keys' cache misses overlapped.
    void find_many(const std::string* keys, std::size_t count, node_id_t* ids) const noexcept {
        in_blocks(count, ids, [&](std::size_t begin, std::size_t n) {
            std::uint32_t tags[lookup_block];
            // Stage 1: every key's home slot.
            for (std::size_t j = 0; j < n; ++j) {
                tags[j] = tag_of(keys[begin + j]);
                prefetch_read(&table_.slots[home(tags[j])]);
            }
            // Stage 2: the record of the first slot whose tag matches (nearly always the key's);
            // int keys are compared in the slot.
            for (std::size_t j = 0; j < n; ++j) {
                if (tags[j] & int_class) continue;
                for (std::size_t at = home(tags[j]);; at = (at + 1) & table_.mask) {
                    const Slot& slot = table_.slots[at];
                    if (slot.id == empty_id) break;
                    if (slot.tag == tags[j] && slot.id != tombstone_id) {
                        prefetch_read(record_of(slot));
                        break;
                    }
                }
            }
            // Stage 3: the lookups themselves, from cache.
            for (std::size_t j = 0; j < n; ++j) ids[begin + j] = find_hashed(keys[begin + j], tags[j]);
        });
    }

    /// ids[i] = find(encode_int_key(keys[i])) for i < count: int keys looked up without their
    /// encoded strings, misses overlapped as in find_many.
    void find_many_ints(const std::int64_t* keys, std::size_t count, node_id_t* ids) const noexcept {
        in_blocks(count, ids, [&](std::size_t begin, std::size_t n) {
            std::uint32_t tags[lookup_block];
            std::uint64_t bits[lookup_block];
            for (std::size_t j = 0; j < n; ++j) {
                bits[j] = int_bits(keys[begin + j]);
                tags[j] = int_tag(bits[j]);
                prefetch_read(&table_.slots[home(tags[j])]);
            }
            for (std::size_t j = 0; j < n; ++j) ids[begin + j] = find_int(bits[j], tags[j]);
        });
    }

    /// Makes room for `count_ids` ids in all and as many live keys, without a rehash on the way.
    void reserve(std::size_t count_ids) {
        if (count_ids <= records_.size()) return;
        const std::size_t adding = count_ids - records_.size();
        if (count_ids > records_.capacity())
            records_.reserve(std::max(count_ids, records_.capacity() + records_.capacity() / 2));
        if (!fits(count_used_ + adding)) grow(count_live_ + adding);
    }

    /// Adds `key`, which must not be live, as id count_ids(); returns that id.
    node_id_t append(std::string_view key) {
        if (!fits(count_used_ + 1)) grow(count_live_ + 1);
        const auto id = static_cast<node_id_t>(records_.size());
        const char* record = store(key, chunk_bytes_);
        records_.push_back(record);
        put(slot_for(record, id));
        ++count_live_;
        return id;
    }

    struct Staged;
    /// Appending many keys in two steps, so that nearly all the work happens before a lock
    /// that readers wait on. stage() copies the keys into the arena and, when the lookup table
    /// or the id array must grow anyway, builds the grown one with the new keys in it; it
    /// changes nothing a reader sees. commit() then publishes the keys: a swap for what grew,
    /// an insert in place for the rest. keys[0..count) must not be live or repeat; nothing else
    /// may change the index between the two calls. The keys get ids count_ids() onwards, in order.
    Staged stage(const std::string_view* keys, std::size_t count);
    void commit(Staged& staged);

    /// Takes live `id`'s key out of the lookup side (key(id) still returns it).
    void erase(node_id_t id) noexcept {
        const std::string_view k = key(id);
        for (std::size_t at = home(tag_of(k));; at = (at + 1) & table_.mask) {
            Slot& slot = table_.slots[at];
            if (slot.id == empty_id) return;  // not live: nothing to do
            if (slot.id == id) {
                slot.id = tombstone_id;
                --count_live_;
                return;
            }
        }
    }

    /// Calls fn(id, key) for every live key, in table order.
    template <typename fn_at>
    void for_each_live(fn_at&& fn) const {
        for (const Slot& slot : table_.slots)
            if (slot.id != empty_id && slot.id != tombstone_id) fn(slot.id, key(slot.id));
    }

    std::size_t memory_bytes() const noexcept {
        return table_.slots.capacity() * sizeof(Slot) + records_.capacity() * sizeof(const char*) + chunk_bytes_;
    }

  private:
    struct Slot {
        std::uint32_t tag;  // int_class set: `word` is the int key's value bytes; else its record
        node_id_t id;       // empty_id, tombstone_id or a live node
        std::uint64_t word;
    };
    // The lookup table: slots, a power-of-two count, and the hash shift that goes with it.
    struct Table {
        huge_vector<Slot> slots;
        std::size_t mask = 0;
        unsigned shift = 64;
    };

  public:
    struct Staged {
        std::vector<const char*> records;  // the new keys' records, in id order
        Table table;                       // the grown table holding them, or none (no slots)
        std::size_t count_used = 0;        // slots used in `table`
        huge_vector<const char*> ids;      // the grown id array holding them, or none (no capacity)
        std::size_t chunk_bytes = 0;       // arena bytes added
    };

  private:
    static constexpr std::uint32_t int_class = 0x80000000u;
    static constexpr std::size_t lookup_block = 16;  // keys whose misses a batch lookup overlaps
    // Calls lookup(begin, n) for consecutive blocks of at most lookup_block of `count` rows; on
    // an empty index, sets every id to invalid_id instead.
    template <typename lookup_at>
    void in_blocks(std::size_t count, node_id_t* ids, lookup_at&& lookup) const noexcept {
        if (table_.slots.empty()) {
            std::fill(ids, ids + count, invalid_id);
            return;
        }
        for (std::size_t begin = 0; begin < count; begin += lookup_block) lookup(begin, std::min(lookup_block, count - begin));
    }
    static constexpr node_id_t empty_id = invalid_id;
    static constexpr node_id_t tombstone_id = invalid_id - 1;  // never a node id (types.hpp: max_count_nodes)
    static_assert(max_count_nodes <= tombstone_id, "node ids must stay below the tombstone marker");

    // An encoded int key (types.hpp: key_tag_int + 8 bytes) is held in its slot.
    static bool is_int_key(std::string_view key) noexcept { return key.size() == 9 && key[0] == key_tag_int; }
    static std::uint64_t int_bits(std::string_view key) noexcept {
        std::uint64_t bits = 0;
        if (key.size() == 9) std::memcpy(&bits, key.data() + 1, sizeof(bits));  // (only int keys get here)
        return bits;
    }
    // The slot word of int key `value`: int_bits of encode_int_key(value) (little-endian bytes).
    static std::uint64_t int_bits(std::int64_t value) noexcept {
        char key[9];
        return int_bits(encode_int_key(value, key));
    }
    // An int key's tag: the 64-bit finaliser of MurmurHash3 (Appleby), cheaper than hashing bytes.
    static std::uint32_t int_tag(std::uint64_t h) noexcept {
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 33;
        return (static_cast<std::uint32_t>(h >> 32) ^ static_cast<std::uint32_t>(h)) | int_class;
    }
    static std::uint32_t tag_of(std::string_view key) noexcept {
        if (is_int_key(key)) return int_tag(int_bits(key));
        const std::uint64_t h = std::hash<std::string_view>{}(key);
        return (static_cast<std::uint32_t>(h >> 32) ^ static_cast<std::uint32_t>(h)) & ~int_class;
    }
    // Fibonacci hashing of the tag onto the table (its high bits: well mixed).
    static std::size_t home_in(const Table& table, std::uint32_t tag) noexcept {
        return static_cast<std::size_t>((std::uint64_t{tag} * 0x9E3779B97F4A7C15ull) >> table.shift) & table.mask;
    }
    std::size_t home(std::uint32_t tag) const noexcept { return home_in(table_, tag); }
    // The slot of key `record` as node `id`.
    static Slot slot_for(const char* record, node_id_t id) noexcept {
        const std::string_view key = view(record);
        const std::uint32_t tag = tag_of(key);
        return Slot{tag, id, (tag & int_class) ? int_bits(key) : std::uint64_t{reinterpret_cast<std::uintptr_t>(record)}};
    }
    // Puts `slot` into the first empty (or, with `reuse`, tombstone) slot of its probe run in
    // `table`; true when that slot was empty.
    static bool put_in(Table& table, const Slot& slot, bool reuse) noexcept {
        std::size_t at = home_in(table, slot.tag);
        for (;; at = (at + 1) & table.mask) {
            const node_id_t id = table.slots[at].id;
            if (id == empty_id || (reuse && id == tombstone_id)) break;
        }
        const bool was_empty = table.slots[at].id == empty_id;
        table.slots[at] = slot;
        return was_empty;
    }
    void put(const Slot& slot) noexcept { count_used_ += put_in(table_, slot, true); }
    static Table empty_table(std::size_t capacity) {
        Table table;
        table.slots.assign(capacity, Slot{0, empty_id, 0});
        table.mask = capacity - 1;
        for (std::size_t c = capacity; c > 1; c >>= 1) --table.shift;
        return table;
    }
    // A table of `capacity` slots holding this index's live keys (no tombstones).
    Table rehashed(std::size_t capacity) const {
        Table table = empty_table(capacity);
        for (const Slot& slot : table_.slots)
            if (slot.id != empty_id && slot.id != tombstone_id) put_in(table, slot, false);
        return table;
    }
    // The record of a str key's slot.
    static const char* record_of(const Slot& slot) noexcept {
        return reinterpret_cast<const char*>(static_cast<std::uintptr_t>(slot.word));
    }
    static std::string_view view(const char* record) noexcept {
        std::uint32_t length;
        std::memcpy(&length, record, sizeof(length));
        return std::string_view(record + sizeof(length), length);
    }
    node_id_t find_int(std::uint64_t bits, std::uint32_t tag) const noexcept {
        for (std::size_t at = home(tag);; at = (at + 1) & table_.mask) {
            const Slot& slot = table_.slots[at];
            if (slot.id == empty_id) return invalid_id;
            if (slot.tag == tag && slot.word == bits && slot.id != tombstone_id) return slot.id;
        }
    }
    node_id_t find_hashed(std::string_view key, std::uint32_t tag) const noexcept {
        if (tag & int_class) return find_int(int_bits(key), tag);
        for (std::size_t at = home(tag);; at = (at + 1) & table_.mask) {
            const Slot& slot = table_.slots[at];
            if (slot.id == empty_id) return invalid_id;
            if (slot.tag == tag && slot.id != tombstone_id && view(record_of(slot)) == key) return slot.id;
        }
    }
    // At most 70% of the slots in use (live or tombstone): short probe runs, and an empty slot
    // always ends one.
    bool fits(std::size_t used) const noexcept { return used * 10 <= table_.slots.size() * 7; }
    static std::size_t capacity_for(std::size_t used) noexcept {
        std::size_t capacity = 16;
        while (used * 10 > capacity * 7) capacity *= 2;
        return capacity;
    }
    // A table for `live` keys without tombstones. At least twice the live keys before the
    // call, so that growing (or clearing tombstones) costs amortised O(1) per key.
    void grow(std::size_t live) { rehash(capacity_for(std::max(live, 2 * count_live_))); }
    void rehash(std::size_t capacity) {
        table_ = rehashed(capacity);
        count_used_ = count_live_;
    }
    // Copies `key` into the arena as a length-prefixed record; the chunks never move.
    const char* store(std::string_view key, std::size_t& chunk_bytes) {
        const std::size_t need = sizeof(std::uint32_t) + key.size();
        if (chunk_left_ < need) {
            const std::size_t size = std::max(need, next_chunk_bytes_);
            chunks_.push_back(Chunk(HugePageAllocator<char>().allocate(size), ChunkDeleter{size}));
            chunk_at_ = chunks_.back().get();
            chunk_left_ = size;
            chunk_bytes += size;
            next_chunk_bytes_ = std::min(next_chunk_bytes_ * 2, huge_page_bytes);
        }
        char* record = chunk_at_;
        const auto length = static_cast<std::uint32_t>(key.size());
        std::memcpy(record, &length, sizeof(length));
        if (!key.empty()) std::memcpy(record + sizeof(length), key.data(), key.size());
        chunk_at_ += need;
        chunk_left_ -= need;
        return record;
    }

    struct ChunkDeleter {
        std::size_t bytes;
        void operator()(char* chunk) const noexcept { HugePageAllocator<char>().deallocate(chunk, bytes); }
    };
    using Chunk = std::unique_ptr<char[], ChunkDeleter>;

    Table table_;
    std::size_t count_used_ = 0;  // live + tombstones
    std::size_t count_live_ = 0;
    huge_vector<const char*> records_;  // by id
    std::vector<Chunk> chunks_;
    char* chunk_at_ = nullptr;
    std::size_t chunk_left_ = 0, chunk_bytes_ = 0, next_chunk_bytes_ = 4096;
};

inline KeyIndex::Staged KeyIndex::stage(const std::string_view* keys, std::size_t count) {
    Staged staged;
    staged.records.reserve(count);
    for (std::size_t i = 0; i < count; ++i) staged.records.push_back(store(keys[i], staged.chunk_bytes));
    const std::size_t first = records_.size();
    if (!fits(count_used_ + count)) {
        staged.table = rehashed(capacity_for(std::max(count_live_ + count, 2 * count_live_)));
        for (std::size_t i = 0; i < count; ++i)
            put_in(staged.table, slot_for(staged.records[i], static_cast<node_id_t>(first + i)), false);
        staged.count_used = count_live_ + count;
    }
    if (first + count > records_.capacity()) {
        staged.ids.reserve(std::max(first + count, records_.capacity() + records_.capacity() / 2));
        staged.ids.assign(records_.begin(), records_.end());
        staged.ids.insert(staged.ids.end(), staged.records.begin(), staged.records.end());
    }
    return staged;
}

inline void KeyIndex::commit(Staged& staged) {
    const std::size_t first = records_.size(), count = staged.records.size();
    if (staged.ids.capacity()) records_.swap(staged.ids);
    else records_.insert(records_.end(), staged.records.begin(), staged.records.end());
    if (!staged.table.slots.empty()) {
        std::swap(table_, staged.table);  // the old table is freed with `staged`
        count_used_ = staged.count_used;
    } else {
        for (std::size_t i = 0; i < count; ++i) put(slot_for(staged.records[i], static_cast<node_id_t>(first + i)));
    }
    count_live_ += count;
    chunk_bytes_ += staged.chunk_bytes;
    staged.chunk_bytes = 0;
}

}  // namespace vecgraph::detail
