// The search walk of the seed index (seed_index.hpp) and what it reads of USearch's graph: the
// node table and entry point (private members of index_gt) and the members' tapes.
//
// Private to seed_index.cpp, its only includer: what is defined here stays internal to that
// file (anonymous namespace), as it was there; the explicit instantiations below must appear
// once in the program.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include <usearch/index.hpp>

#include "vecgraph/detail/huge_pages.hpp"
#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/simd/kernels.hpp"
#include "vecgraph/types.hpp"
#include "vecgraph/vector_store.hpp"

namespace vecgraph {

namespace us = unum::usearch;
// Node tape and the slot table on huge pages (detail/huge_pages.hpp): a search reads both at random.
using hnsw_t = us::index_gt<float, std::uint64_t, std::uint32_t, detail::HugePageAllocator<us::byte_t>,
                            detail::HugePageArena>;

namespace {

// Private members of index_gt (see "search walk" below).
template <typename Tag, auto Member>
struct member_access {
    friend constexpr auto member_of(Tag) noexcept { return Member; }
};
struct nodes_member {
    friend constexpr auto member_of(nodes_member) noexcept;
};
struct entry_member {
    friend constexpr auto member_of(entry_member) noexcept;
};
struct contexts_member {
    friend constexpr auto member_of(contexts_member) noexcept;
};
template struct member_access<nodes_member, &hnsw_t::nodes_>;
template struct member_access<entry_member, &hnsw_t::entry_slot_>;
template struct member_access<contexts_member, &hnsw_t::contexts_>;

// Reads members' neighbour lists straight from their tapes (layout: see "search walk" below).
class Tapes {
  public:
    explicit Tapes(const hnsw_t& index)
        : nodes_(index.*member_of(nodes_member{})),
          base_room_(index.config().connectivity_base),
          level_room_(index.config().connectivity) {}

    // The tape layout: key, level, then per level from 0 up a uint32 count and room for
    // `base_room` (level 0) or `level_room` slots. Also that of a saved graph's tapes.
    static constexpr std::size_t head_bytes = sizeof(std::uint64_t) + sizeof(std::int16_t);
    static std::size_t list_offset(std::size_t level, std::size_t base_room, std::size_t level_room) noexcept {
        return level == 0 ? head_bytes : head_bytes + list_bytes(base_room) + (level - 1) * list_bytes(level_room);
    }
    static std::size_t tape_bytes(std::size_t level, std::size_t base_room, std::size_t level_room) noexcept {
        return list_offset(level + 1, base_room, level_room);
    }

    std::size_t base_room() const noexcept { return base_room_; }
    std::size_t level_room() const noexcept { return level_room_; }

    // The tape of `slot`: nullptr while the member is being added.
    const std::uint8_t* tape(std::uint32_t slot) const noexcept {
        return reinterpret_cast<const std::uint8_t*>(nodes_[slot].tape());
    }
    const void* table_entry(std::uint32_t slot) const noexcept { return nodes_.data() + slot; }
    static int level_of(const std::uint8_t* tape) noexcept {
        std::int16_t level;
        std::memcpy(&level, tape + sizeof(std::uint64_t), sizeof(level));
        return level;
    }
    // The list of `tape` on `level` (a uint32 count, then the slots), or nullptr when there is
    // no tape or the member is not on that level.
    const std::uint8_t* list(const std::uint8_t* tape, int level) const noexcept {
        if (!tape || level_of(tape) < level) return nullptr;
        return tape + list_offset(static_cast<std::size_t>(level), base_room_, level_room_);
    }
    // Asks for the head and base-level list of `slot`'s tape (into L1, or L2 and below).
    void prefetch_base(std::uint32_t slot) const noexcept {
        if (const std::uint8_t* at = tape(slot)) detail::prefetch_bytes(at, tape_bytes(0, base_room_, level_room_));
    }
    void prefetch_base_l2(std::uint32_t slot) const noexcept {
        if (const std::uint8_t* at = tape(slot)) detail::prefetch_bytes_l2(at, tape_bytes(0, base_room_, level_room_));
    }
    // The count of a list, clamped to the room of its level.
    static std::uint32_t count_of(const std::uint8_t* list, std::size_t room) noexcept {
        std::uint32_t count;
        std::memcpy(&count, list, sizeof(count));
        return static_cast<std::uint32_t>(std::min<std::size_t>(count, room));
    }
    static std::uint32_t slot_at(const std::uint8_t* list, std::size_t i) noexcept {
        std::uint32_t slot;
        std::memcpy(&slot, list + sizeof(std::uint32_t) * (1 + i), sizeof(slot));
        return slot;
    }

  private:
    static std::size_t list_bytes(std::size_t room) noexcept { return sizeof(std::uint32_t) * (1 + room); }

    const std::remove_reference_t<decltype(std::declval<const hnsw_t&>().*member_of(nodes_member{}))>& nodes_;
    const std::size_t base_room_;
    const std::size_t level_room_;
};

struct row_ref_t {
    const std::int8_t* codes;
    float scale;
    float sq_norm;
};

// Slots below `identity_slots` hold the node of the same id (SeedIndex::slots_in_node_order).
inline node_id_t node_at(const detail::huge_vector<node_id_t>& slot_to_node, std::size_t identity_slots,
                         std::size_t slot) noexcept {
    return slot < identity_slots ? static_cast<node_id_t>(slot) : slot_to_node[slot];
}

// ------------------------------------------------------------------------------ search walk
//
// Searches walk USearch's graph with a loop of their own. It is USearch's search algorithm
// (greedy descent through the upper levels, then a best-first search on the base level that
// keeps the ef nearest, the filter applied to what enters them) with the memory traffic
// reordered and two candidates expanded per step.
// USearch's loop loads a candidate's neighbour list only when it pops the candidate, then the
// slot -> node map and the rows of the neighbours: three misses in a row per candidate, and
// the list miss alone was about half of a search's time. This loop expands the two nearest
// candidates at a time (DiskANN's beam width of 2), measures their new neighbours with one
// gathered kernel call, asks for the lists of the two candidates likely next while it does, and
// asks for a member's node-table entry when it joins the queue. Its results are not USearch's
// to the member: the C++ tests hold its recall against an exact scan to USearch's.
//
// The node table (`nodes_`) and the entry point (`entry_slot_`) are private members of
// index_gt. They are reached through member pointers formed in explicit instantiations, where
// access checking does not apply ([temp.explicit]). The tape read here is the layout of the
// pinned USearch release (index_gt::node_t): key (8 bytes), level (int16), then per level from
// 0 up a uint32 count and that level's slots (2M on level 0, M above). The C++ tests check it
// against index_gt::neighbors() and this walk's recall against USearch's own search.
//
// Inserts may rewrite a list while a search reads it, as with USearch's own search (which
// takes no lock on the base level): counts are clamped to the list's room, slots at or beyond
// the members counted when the search began are skipped, and so are members whose tape or node
// is not set yet.


struct Candidate {
    float distance;
    std::uint32_t slot;
};
// Heap orders: `next` pops the nearest, `top` keeps the farthest of the beam at its front.
// Function objects, not functions: the heap algorithms inline a function object's call, while a
// function passed to them is called through a pointer on every comparison.
struct FartherFirst {
    bool operator()(const Candidate& a, const Candidate& b) const noexcept { return a.distance > b.distance; }
};
struct NearerFirst {
    bool operator()(const Candidate& a, const Candidate& b) const noexcept { return a.distance < b.distance; }
};
constexpr FartherFirst farther_first{};
constexpr NearerFirst nearer_first{};

// Per search context; reused, so a search allocates only while its buffers grow.
struct WalkScratch {
    static constexpr std::uint32_t empty = ~std::uint32_t{0};
    std::vector<std::uint32_t> visited;  // open addressing; capacity a power of two
    std::size_t count_visited = 0;
    unsigned visited_bits = 0;
    std::vector<Candidate> next;
    std::vector<Candidate> top;
    std::size_t batch_count = 0;  // members in the batch (its vectors only grow)
    std::vector<std::uint32_t> batch_slots;
    std::vector<std::uint32_t> batch_rows;
    std::vector<std::int32_t> batch_dots;
    std::vector<float> batch_distances;

    void clear_visited() {
        if (visited.empty()) {
            visited_bits = 12;
            visited.assign(std::size_t{1} << visited_bits, empty);
        } else if (count_visited) {
            std::fill(visited.begin(), visited.end(), empty);
        }
        count_visited = 0;
    }
    // True when `slot` was not visited before (it is now).
    bool visit(std::uint32_t slot) {
        if ((count_visited + 1) * 2 > visited.size()) grow_visited();
        const std::size_t mask = visited.size() - 1;
        for (std::size_t at = hash(slot);; at = (at + 1) & mask) {
            if (visited[at] == slot) return false;
            if (visited[at] == empty) {
                visited[at] = slot;
                ++count_visited;
                return true;
            }
        }
    }

  private:
    std::size_t hash(std::uint32_t slot) const noexcept {
        return static_cast<std::size_t>((std::uint64_t{slot} * 0x9E3779B97F4A7C15ull) >> (64 - visited_bits));
    }
    void grow_visited() {
        std::vector<std::uint32_t> old(std::size_t{1} << (visited_bits + 1), empty);
        old.swap(visited);
        ++visited_bits;
        count_visited = 0;
        for (std::uint32_t slot : old)
            if (slot != empty) visit(slot);
    }
};

class Walk {
  public:
    Walk(const hnsw_t& index, const VectorStore& store, const detail::huge_vector<node_id_t>& slot_to_node,
         std::size_t identity_slots, const row_ref_t& query, WalkScratch& scratch)
        : tapes_(index),
          store_(store),
          slot_to_node_(slot_to_node),
          query_(query),
          scratch_(scratch),
          entry_(static_cast<std::uint32_t>(index.*member_of(entry_member{}))),
          size_(read_size_after_entry(index)),
          identity_slots_(identity_slots),
          dot_rows_(simd::active().dot_rows_i8_prefetched) {}

    // The `ef` members nearest the query (all admitted by `admits(node)`) into scratch.top, in
    // no order. With `scan_nodes` (the node rows an exact scan would read; 0: never), gives up
    // and returns false when a filter admits so few members that filling the beam is predicted
    // to cost more than that scan (see give_up()).
    template <typename admits_at>
    bool run(std::size_t ef, admits_at&& admits, std::size_t scan_nodes = 0) {
        WalkScratch& s = scratch_;
        s.next.clear();
        s.top.clear();
        s.clear_visited();
        if (entry_ >= size_) return true;
        Candidate start = descend();
        if (start.slot == WalkScratch::empty) return true;
        s.visit(start.slot);
        s.next.push_back(start);
        float radius = start.distance;
        if (admits(node_of(start.slot))) s.top.push_back(start);
        std::size_t admitted = s.top.size(), next_check = check_every;
        double sampled = -1;  // the filter's selectivity over a sample of all nodes, once needed
        while (!s.next.empty()) {
            if (scan_nodes && s.count_visited >= next_check) {
                if (s.top.size() < ef) {
                    if (sampled < 0) sampled = sample_selectivity(admits, scan_nodes);
                    if (give_up(ef - s.top.size(), admitted, s.count_visited, sampled, scan_nodes)) return false;
                }
                next_check = s.count_visited + check_every;
            }
            // Expands the `beam_width` nearest candidates the beam still takes at once: their
            // new neighbours are measured in one gathered call, and the lists of the two
            // candidates likely next are asked for while they are. Those two requests go out
            // before the new neighbours' rows are: a burst of row requests fills the core's
            // miss buffers, and a request behind it waits (measured at 100,000 nodes: the walk
            // alone 1.02x faster this way).
            s.batch_count = 0;
            std::size_t expanded = 0;
            const std::uint8_t* lists[beam_width];
            for (; expanded < beam_width && !s.next.empty(); ++expanded) {
                const Candidate candidate = s.next.front();
                if (candidate.distance > radius && s.top.size() == ef) break;
                std::pop_heap(s.next.begin(), s.next.end(), farther_first);
                s.next.pop_back();
                lists[expanded] = tapes_.list(tapes_.tape(candidate.slot), 0);
            }
            if (expanded == 0) break;  // the nearest candidate left is beyond a full beam
            if (!s.next.empty()) tapes_.prefetch_base(s.next.front().slot);
            if (s.next.size() > 1) {  // the second nearest: the nearer of the front's two children
                const bool right = s.next.size() > 2 && farther_first(s.next[1], s.next[2]);
                tapes_.prefetch_base(s.next[right ? 2 : 1].slot);
            }
            for (std::size_t i = 0; i < expanded; ++i)
                if (lists[i]) collect(lists[i], tapes_.base_room(), true);
            const std::size_t count = score_batch();
            for (std::size_t i = 0; i < count; ++i) {
                const Candidate found{s.batch_distances[i], s.batch_slots[i]};
                if (s.top.size() < ef || found.distance < radius) {
                    s.next.push_back(found);
                    std::push_heap(s.next.begin(), s.next.end(), farther_first);
                    detail::prefetch_read(tapes_.table_entry(found.slot));
                    if (admits(s.batch_rows[i])) {
                        ++admitted;
                        s.top.push_back(found);
                        std::push_heap(s.top.begin(), s.top.end(), nearer_first);
                        if (s.top.size() > ef) {
                            std::pop_heap(s.top.begin(), s.top.end(), nearer_first);
                            s.top.pop_back();
                        }
                        radius = s.top.front().distance;
                    }
                }
            }
        }
        return true;
    }

    node_id_t node_of(std::uint32_t slot) const noexcept {
        return node_at(slot_to_node_, identity_slots_, slot);
    }

  private:
    static constexpr std::size_t check_every = 1024;  // visited members between give_up() checks
    // Candidates expanded per step of the base-level beam search: the beam width of DiskANN's
    // search (Subramanya et al., "DiskANN", NeurIPS 2019, section 3.3), here to overlap the
    // memory misses of two candidates' neighbour lists and rows.
    static constexpr std::size_t beam_width = 2;

    // The share of nodes the filter admits, from 1,024 node ids spread by a multiplicative hash
    // over [0, count) (dead nodes count as rejected, as in the scan).
    template <typename admits_at>
    static double sample_selectivity(admits_at&& admits, std::size_t count) {
        const std::size_t samples = std::min<std::size_t>(1024, count);
        std::size_t admitted = 0;
        for (std::size_t i = 0; i < samples; ++i)
            admitted += admits(static_cast<node_id_t>((std::uint64_t{i} * 0x9E3779B97F4A7C15ull + 12345) % count));
        return static_cast<double>(admitted + 1) / static_cast<double>(samples + 1);
    }

    // The beam misses `missing` members after `visited` visits that found `admitted` admitted
    // ones; `sampled` is the filter's selectivity over all nodes. The walk needs about missing /
    // selectivity more visits, with the selectivity it sees (the larger of what it met and the
    // sample: a filter that rejects the query's neighbourhood but admits many elsewhere is met
    // again once the walk leaves it); an exact scan reads every node's filter columns and
    // gathers the admitted rows. Measured on 384-d graphs, a walk's visit costs about 64 filter
    // checks and a gathered row about 8 (a filter admitting 0.2% of 100,000 nodes: 33 ms by the
    // walk, 0.45 ms by the scan). Give up when the walk is predicted to cost more.
    static bool give_up(std::size_t missing, std::size_t admitted, std::size_t visited, double sampled,
                        std::size_t scan_nodes) {
        const double met = static_cast<double>(admitted + 1) / static_cast<double>(visited);
        const double walk_visits = static_cast<double>(missing) / std::max(met, sampled);
        const double scan_visits = static_cast<double>(scan_nodes) * (1.0 + 8.0 * sampled) / 64.0;
        return walk_visits > scan_visits;
    }

    // The entry point is read first: a member is counted in size() before it can become the
    // entry point, so the entry is always below the size read after it.
    static std::size_t read_size_after_entry(const hnsw_t& index) noexcept {
        std::atomic_thread_fence(std::memory_order_acquire);
        return index.size();
    }

    // Adds the members of `list` (a count, then slots; at most `room`) that are set and, when
    // `visit`, not visited before to the scratch batch (their slots and nodes), and asks for
    // their rows.
    void collect(const std::uint8_t* list, std::size_t room, bool visit) {
        WalkScratch& s = scratch_;
        const std::uint32_t count = Tapes::count_of(list, room);
        std::size_t n = s.batch_count;
        // Each vector checked on its own: a resize that ran out of memory may have grown one.
        if (s.batch_slots.size() < n + count) s.batch_slots.resize(n + count);
        if (s.batch_rows.size() < n + count) s.batch_rows.resize(n + count);
        for (std::uint32_t i = 0; i < count; ++i) {
            const std::uint32_t slot = Tapes::slot_at(list, i);
            if (slot >= size_ || (visit && !s.visit(slot))) continue;
            const node_id_t node = node_of(slot);
            if (node == invalid_id) continue;  // a member another thread is still adding
            store_.prefetch_row_l2(node);
            s.batch_slots[n] = slot;
            s.batch_rows[n] = node;
            ++n;
        }
        s.batch_count = n;
    }

    // The distances of the batch's members to the query, into scratch.batch_distances; returns
    // the batch's size.
    std::size_t score_batch() {
        WalkScratch& s = scratch_;
        const std::size_t n = s.batch_count;
        if (s.batch_dots.size() < n) s.batch_dots.resize(n);
        if (s.batch_distances.size() < n) s.batch_distances.resize(n);
        if (n == 0) return 0;
        dot_rows_(query_.codes, store_.codes_data(), store_.code_stride(), s.batch_rows.data(), n, store_.dim(),
                  s.batch_dots.data());
        for (std::size_t i = 0; i < n; ++i) s.batch_distances[i] = distance(s.batch_rows[i], s.batch_dots[i]);
        return n;
    }

    // Measures the members of `list` as collect() adds them: returns the batch's size.
    std::size_t measure(const std::uint8_t* list, std::size_t room, bool visit) {
        scratch_.batch_count = 0;
        collect(list, room, visit);
        return score_batch();
    }

    float distance(node_id_t node, std::int32_t dot) const noexcept {
        return -score_from_dot(store_.metric(), dot, query_.scale, query_.sq_norm, store_.scale(node), store_.sq_norm(node));
    }

    // Greedy descent from the entry point through the upper levels: the base level's start.
    Candidate descend() {
        WalkScratch& s = scratch_;
        Candidate best{0.0f, entry_};
        const std::uint8_t* at = tapes_.tape(entry_);
        const node_id_t entry_node = node_of(entry_);
        if (!at || entry_node == invalid_id) return {0.0f, WalkScratch::empty};
        std::uint32_t entry_row = entry_node;
        std::int32_t dot;
        dot_rows_(query_.codes, store_.codes_data(), store_.code_stride(), &entry_row, 1, store_.dim(), &dot);
        best.distance = distance(entry_node, dot);
        // An insert links a new member's upper levels before its lower ones: a descent that
        // steps into it can find its lists below still empty. It then goes back to the member
        // it came from, which has lists on every level it descends through.
        Candidate came_from = best;
        for (int level = Tapes::level_of(at); level > 0; --level) {
            for (bool moved = true; moved;) {
                moved = false;
                const std::uint8_t* list = tapes_.list(tapes_.tape(best.slot), level);
                if (!list || Tapes::count_of(list, tapes_.level_room()) == 0) {
                    best = came_from;
                    break;
                }
                const std::size_t count = measure(list, tapes_.level_room(), false);
                const Candidate before = best;
                for (std::size_t i = 0; i < count; ++i)
                    if (s.batch_distances[i] < best.distance) {
                        best = {s.batch_distances[i], s.batch_slots[i]};
                        moved = true;
                    }
                if (moved) came_from = before;
            }
        }
        const std::uint8_t* base = tapes_.list(tapes_.tape(best.slot), 0);
        if ((!base || Tapes::count_of(base, tapes_.base_room()) == 0) && size_ > 1) best = came_from;
        return best;
    }

    const Tapes tapes_;
    const VectorStore& store_;
    const detail::huge_vector<node_id_t>& slot_to_node_;
    const row_ref_t query_;
    WalkScratch& scratch_;
    const std::uint32_t entry_;
    const std::size_t size_;
    const std::size_t identity_slots_;  // slots below map to the node of the same id
    const simd::dot_rows_i8_fn dot_rows_;
};

}  // namespace

}  // namespace vecgraph
