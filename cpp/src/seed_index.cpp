// HNSW seed index over the int8 store (see seed_index.hpp).
#include "vecgraph/seed_index.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <usearch/index.hpp>

#include "seed_index_walk.hpp"
#include "vecgraph/detail/huge_pages.hpp"
#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/detail/ranges.hpp"
#include "vecgraph/simd/kernels.hpp"


namespace vecgraph {

namespace {

// Distance = -score, so that smaller is closer for every metric. Inserts read identity_slots
// live: it grows during a batch, and a slot below it never changes.
struct metric_t {
    const VectorStore* store;
    const detail::huge_vector<node_id_t>* slot_to_node;
    const std::atomic<std::size_t>* identity_slots;
    simd::dot_i8_fn dot;

    row_ref_t ref(const row_ref_t& row) const noexcept { return row; }
    template <typename entry_at>
    row_ref_t ref(const entry_at& entry) const noexcept {
        node_id_t node = node_at(*slot_to_node, identity_slots->load(std::memory_order_relaxed),
                                 static_cast<std::size_t>(get_slot(entry)));
        return {store->codes(node), store->scale(node), store->sq_norm(node)};
    }
    template <typename a_at, typename b_at>
    float operator()(const a_at& a, const b_at& b) const noexcept {
        row_ref_t x = ref(a), y = ref(b);
        std::int32_t product = dot(x.codes, y.codes, store->dim());
        return -score_from_dot(store->metric(), product, x.scale, x.sq_norm, y.scale, y.sq_norm);
    }
};

// Called by USearch with the neighbours an insert is about to measure. Their rows (codes, scale
// and squared norm) are requested from memory together, so the misses overlap instead of queueing one
// distance at a time; so are the heads and base-level lists of their tapes, so that the list
// of the candidate the insert's search expands next is already on its way (that miss was the
// largest single cost of an insert: inserts ran 10-20% faster with it, 100k nodes).
struct prefetch_rows_t {
    const VectorStore* store;
    const detail::huge_vector<node_id_t>* slot_to_node;
    const std::atomic<std::size_t>* identity_slots;
    const Tapes* tapes;

    template <typename member_iterator_at>
    void operator()(member_iterator_at begin, member_iterator_at end) const noexcept {
        const std::size_t identity = identity_slots->load(std::memory_order_relaxed);
        for (; begin != end; ++begin) {
            const std::size_t slot = static_cast<std::size_t>(get_slot(begin));
            node_id_t node = node_at(*slot_to_node, identity, slot);
            if (node == invalid_id) continue;  // a slot another thread is still adding
            store->prefetch_row_l2(node);
            tapes->prefetch_base_l2(static_cast<std::uint32_t>(slot));
        }
    }
};

// Counts the add_nodes() and relink_unreachable() calls inserting (SeedIndex::adds_running).
class InsertScope {
  public:
    explicit InsertScope(std::atomic<std::size_t>& inserting) : inserting_(inserting) { inserting_.fetch_add(1); }
    ~InsertScope() { inserting_.fetch_sub(1); }
    InsertScope(const InsertScope&) = delete;
    InsertScope& operator=(const InsertScope&) = delete;

  private:
    std::atomic<std::size_t>& inserting_;
};

// try_reserve gives every context new, empty candidate buffers and visited set, which the next
// insert on each would grow inside index_gt::add: noexcept, and it goes on after some failed
// growths, linking a node to fewer neighbours. They are grown here instead (out of memory:
// false), to what an insert of this expansion usually needs; a larger walk still grows them.
bool grow_insert_buffers(hnsw_t& index, std::size_t expansion) {
    const std::size_t connectivity_max = std::max(index.config().connectivity_base, index.config().connectivity);
    const std::size_t top_limit = std::max(connectivity_max + 1, expansion);
    // Members visited (and candidates queued) by one insert's walk: at most the index's capacity;
    // capped so that a large expansion cannot make every context hold megabytes (a walk that
    // needs more grows them inside add, as before).
    const std::size_t visited =
        std::min({2 * expansion * index.config().connectivity_base, index.capacity(), std::size_t(1) << 14});
    auto& contexts = index.*member_of(contexts_member{});
    detail::NullOnFailureScope no_throw;
    for (std::size_t i = 0; i < contexts.size(); ++i)
        if (!contexts[i].top_candidates.reserve(top_limit) || !contexts[i].next_candidates.reserve(visited) ||
            !contexts[i].visits.reserve(visited))
            return false;
    return true;
}

// index_gt::try_reserve is noexcept: it runs with an allocator that returns nullptr, so that out
// of memory it returns false instead of ending the process.
bool try_reserve_members(hnsw_t& index, std::size_t members, std::size_t count_contexts) {
    detail::NullOnFailureScope no_throw;
    return index.try_reserve(us::index_limits_t(members, count_contexts));
}

std::string take_error(us::error_t& error) {
    const char* message = error.release();
    return message ? message : "unknown error";
}

// Moves the members of a saved graph (USearch's stream: header, one int16 level per member,
// then each member's tape in slot order) so that each member's slot is its key, when the keys
// are exactly 0..n-1; otherwise leaves the bytes as they are. Neighbour slots and the entry
// point are mapped the same way; slots beyond the members are kept for verify() to report.
// Call only after the layout check (the levels and the byte count add up).
void renumber_by_node(std::vector<char>& bytes, us::index_serialized_header_t& header, std::size_t links,
                      std::size_t base_links) {
    using level_t = std::int16_t;
    const std::size_t n = static_cast<std::size_t>(header.size);
    if (n == 0 || header.entry_slot >= n) return;
    const std::size_t levels_at = sizeof(header), tapes_at = levels_at + n * sizeof(level_t);
    auto level_of = [&](std::size_t member) {
        level_t level;
        std::memcpy(&level, bytes.data() + levels_at + member * sizeof(level_t), sizeof(level));
        return static_cast<std::size_t>(level);
    };
    auto tape_bytes = [&](std::size_t level) { return Tapes::tape_bytes(level, base_links, links); };
    std::vector<std::size_t> offset(n);
    std::vector<std::uint32_t> key(n), member_of_key(n, ~std::uint32_t{0});
    bool in_order = true;
    for (std::size_t i = 0, at = tapes_at; i < n; ++i) {
        offset[i] = at;
        std::uint64_t k;
        std::memcpy(&k, bytes.data() + at, sizeof(k));
        if (k >= n || member_of_key[k] != ~std::uint32_t{0}) return;  // not a permutation of 0..n-1
        key[i] = static_cast<std::uint32_t>(k);
        member_of_key[k] = static_cast<std::uint32_t>(i);
        in_order = in_order && k == i;
        at += tape_bytes(level_of(i));
    }
    if (in_order) return;
    std::vector<char> out(bytes.size());
    for (std::size_t i = 0; i < n; ++i)
        std::memcpy(out.data() + levels_at + key[i] * sizeof(level_t), bytes.data() + levels_at + i * sizeof(level_t),
                    sizeof(level_t));
    for (std::size_t k = 0, at = tapes_at; k < n; ++k) {
        const std::size_t i = member_of_key[k], level = level_of(i), size = tape_bytes(level);
        char* tape = out.data() + at;
        std::memcpy(tape, bytes.data() + offset[i], size);
        for (std::size_t l = 0; l <= level; ++l) {
            char* list = tape + Tapes::list_offset(l, base_links, links);
            std::uint32_t count;
            std::memcpy(&count, list, sizeof(count));
            count = static_cast<std::uint32_t>(std::min<std::size_t>(count, l == 0 ? base_links : links));
            for (std::uint32_t j = 0; j < count; ++j) {
                char* at_slot = list + sizeof(std::uint32_t) * (1 + j);
                std::uint32_t slot;
                std::memcpy(&slot, at_slot, sizeof(slot));
                if (slot < n) std::memcpy(at_slot, &key[slot], sizeof(slot));
            }
        }
        at += size;
    }
    header.entry_slot = key[static_cast<std::size_t>(header.entry_slot)];
    std::memcpy(out.data(), &header, sizeof(header));
    bytes.swap(out);
}

}  // namespace

struct SeedIndex::Impl {
    Impl(std::size_t connectivity, std::size_t count_contexts)
        : index(us::index_config_t(connectivity)), count_contexts(count_contexts), walk_scratch(count_contexts) {}

    hnsw_t index;
    detail::huge_vector<node_id_t> slot_to_node;
    std::size_t count_contexts;
    std::vector<WalkScratch> walk_scratch;  // one per search context
    // Every slot below this holds the node of the same id, so a search reads no slot_to_node
    // entry for it. Batch inserts take their slots in node order (slot_order) and load()
    // renumbers a saved graph's slots by node, so a graph built in batches or reopened keeps
    // it for all its members; an upsert, or inserts of separate calls that take their slots
    // out of node order, stop it there.
    std::atomic<std::size_t> identity_slots{0};
    std::mutex slot_order;  // held by a batch insert from taking the next node to taking its slot

    // Raises identity_slots past the slots that now map to themselves (called after each
    // slot_to_node entry is set; the fence pairs with the other inserters' so that of two
    // inserts setting adjacent entries at once, one sees both).
    void extend_identity() noexcept {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        std::size_t at = identity_slots.load();
        while (at < slot_to_node.size() && slot_to_node[at] == at)
            if (identity_slots.compare_exchange_weak(at, at + 1)) ++at;
    }
};

SeedIndex::SeedIndex(const VectorStore& store, HnswParams params, std::size_t count_contexts)
    : store_(store), params_(params), impl_(new Impl(params.connectivity, count_contexts)) {}

SeedIndex::~SeedIndex() = default;

std::size_t SeedIndex::size() const noexcept { return impl_->index.size(); }

std::size_t SeedIndex::memory_bytes() const noexcept {
    return impl_->index.memory_usage() + impl_->slot_to_node.capacity() * sizeof(node_id_t);
}

Status SeedIndex::reserve_more(std::size_t count) {
    hnsw_t& index = impl_->index;
    std::size_t needed = index.size() + reserved_.load() + count;
    if (needed > index.capacity()) {
        std::size_t capacity = std::max(needed, index.capacity() + index.capacity() / 2);
        // The slot table first: slots beyond the index's capacity are never read, so it may stay
        // the larger of the two when the index cannot grow.
        impl_->slot_to_node.resize(capacity, invalid_id);
        if (!try_reserve_members(index, capacity, impl_->count_contexts))
            return Status::internal("out of memory: the HNSW index could not reserve " + std::to_string(capacity) +
                                    " members");
        insert_buffers_pending_.store(true);
    }
    // After a reserve, or after one whose buffers could not grow then.
    if (insert_buffers_pending_.load()) {
        if (!grow_insert_buffers(index, params_.expansion_add))
            return Status::internal("out of memory: the HNSW index could not grow its insert buffers");
        insert_buffers_pending_.store(false);
    }
    reserved_ += count;
    return Status::OK();
}

bool SeedIndex::reserve_in_place(std::size_t count) {
    // Adds running beside this raise size() before they release their reservation, so the sum
    // can only overstate what is taken: a false "does not fit" at worst.
    hnsw_t& index = impl_->index;
    if (insert_buffers_pending_.load() || index.size() + reserved_.load() + count > index.capacity()) return false;
    reserved_ += count;
    return true;
}

Status SeedIndex::add_nodes(const node_id_t* nodes, std::size_t count, std::size_t threads,
                            detail::ContextPool& contexts, std::size_t* added) {
    if (added) *added = 0;
    if (count == 0) return Status::OK();
    hnsw_t& index = impl_->index;
    if (index.size() + count > index.capacity()) return Status::internal("HNSW index: reserve_more was not called");
    struct Release {  // the reservation ends with this call, whatever happens
        std::atomic<std::size_t>& reserved;
        std::size_t count;
        ~Release() {
            std::size_t now = reserved.load();
            while (!reserved.compare_exchange_weak(now, now - std::min(now, count))) {}
        }
    } release{reserved_, count};
    InsertScope inserting(inserting_);
    metric_t metric{&store_, &impl_->slot_to_node, &impl_->identity_slots, simd::active().dot_i8};
    const Tapes tapes(index);
    prefetch_rows_t prefetch{&store_, &impl_->slot_to_node, &impl_->identity_slots, &tapes};
    threads = std::max<std::size_t>(1, std::min({threads, impl_->count_contexts, count / 256 + 1}));
    // Inserts that run side by side can leave a member unreachable (see relink_unreachable):
    // the members of such calls are kept as suspects for the next check.
    constexpr std::uint32_t no_slot = ~std::uint32_t{0};  // an insert that failed or never ran
    std::vector<std::uint32_t> slots(count, no_slot);
    {
        std::lock_guard<std::mutex> guard(adds_mutex_);
        // Room for this call's suspects now: Registered's destructor must not allocate.
        const std::size_t room = suspect_slots_.size() + suspects_promised_ + count;
        if (room > suspect_slots_.capacity()) suspect_slots_.reserve(std::max(room, 2 * suspect_slots_.capacity()));
        suspects_promised_ += count;
        if (active_adds_++ > 0 || threads > 1) adds_overlapped_ = true;
    }
    struct Registered {  // also reports `added`, whatever ends the call
        SeedIndex& self;
        const std::vector<std::uint32_t>& slots;
        std::size_t* added;
        ~Registered() {
            std::lock_guard<std::mutex> guard(self.adds_mutex_);
            self.suspects_promised_ -= slots.size();
            std::size_t members = 0;
            for (std::uint32_t slot : slots) {
                if (slot == no_slot) continue;
                ++members;
                if (self.adds_overlapped_) self.suspect_slots_.push_back(slot);
            }
            if (added) *added = members;
            if (self.adds_overlapped_ && !self.suspect_slots_.empty())
                self.needs_relink_.store(true, std::memory_order_release);
            if (--self.active_adds_ == 0) self.adds_overlapped_ = false;
        }
    } registered{*this, slots, added};
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::string failure;
    std::mutex failure_mutex;
    auto worker = [&] {
        detail::ContextPool::Lease lease(contexts);
        us::index_update_config_t config;
        config.expansion = params_.expansion_add;
        config.thread = lease.slot();
        while (!failed.load(std::memory_order_relaxed)) {
            // The next node and its slot are taken together, so that the slots of a batch follow
            // its nodes (Impl::identity_slots); USearch takes the slot early in add(), before
            // the search and linking that are nearly all of an insert.
            std::unique_lock<std::mutex> in_order(impl_->slot_order);
            const std::size_t i = next.fetch_add(1);
            if (i >= count) break;
            node_id_t node = nodes[i];
            row_ref_t value{store_.codes(node), store_.scale(node), store_.sq_norm(node)};
            auto result = index.add(
                node, value, metric, config,
                [&](hnsw_t::member_ref_t member) {
                    impl_->slot_to_node[member.slot] = node;
                    slots[i] = static_cast<std::uint32_t>(member.slot);
                    in_order.unlock();
                    impl_->extend_identity();
                },
                prefetch);
            if (in_order.owns_lock()) in_order.unlock();
            if (result && !has_entry_.load(std::memory_order_relaxed)) has_entry_.store(true, std::memory_order_release);
            if (!result) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                failure = take_error(result.error);
                failed = true;
            }
        }
    };
    detail::run_on_threads(threads, worker);
    if (failed) return Status::internal("HNSW insert failed: " + failure);
    return Status::OK();
}

std::size_t SeedIndex::relink_unreachable(detail::ContextPool& contexts, std::size_t threads) {
    std::vector<std::uint32_t> suspects;
    {
        std::lock_guard<std::mutex> guard(adds_mutex_);
        suspects.swap(suspect_slots_);  // the caller excludes adds: no room is promised to one
        needs_relink_.store(false, std::memory_order_release);
    }
    // Out of memory below (std::bad_alloc to the caller): the suspects go back, for the next call.
    struct GiveBack {
        SeedIndex& self;
        std::vector<std::uint32_t>& suspects;
        const int exceptions = std::uncaught_exceptions();
        ~GiveBack() {
            if (std::uncaught_exceptions() <= exceptions) return;
            std::lock_guard<std::mutex> guard(self.adds_mutex_);
            if (self.suspect_slots_.empty()) self.suspect_slots_.swap(suspects);  // no add ran meanwhile
            self.needs_relink_.store(true, std::memory_order_release);
        }
    } give_back{*this, suspects};
    hnsw_t& index = impl_->index;
    const std::size_t size = index.size();
    std::sort(suspects.begin(), suspects.end());
    suspects.erase(std::unique(suspects.begin(), suspects.end()), suspects.end());
    while (!suspects.empty() && suspects.back() >= size) suspects.pop_back();
    if (suspects.empty() || size < 2) return 0;
    std::vector<std::uint32_t> unreachable;
    auto lists = [&](std::uint32_t from, std::uint32_t slot) {
        auto back = index.neighbors(from, 0);
        for (auto it = back.begin(); it != back.end(); ++it)
            if (it.slot() == slot) return true;
        return false;
    };
    auto listed_back_by_a_neighbor = [&](std::uint32_t slot) {
        auto neighbors = index.neighbors(slot, 0);
        for (auto it = neighbors.begin(); it != neighbors.end(); ++it)
            if (it.slot() < size && lists(it.slot(), slot)) return true;
        return false;
    };
    if (suspects.size() * 8 >= size) {
        // Breadth-first over level 0 from the members of the top level. A search descends the
        // upper levels greedily and then walks level 0 only, from wherever the descent ended:
        // a member whose only in-links are on upper levels is found only when the descent
        // happens to end on it, so links on the upper levels do not count here.
        std::vector<std::uint8_t> reached(size, 0);
        std::vector<std::uint32_t> queue;
        const std::size_t top = index.max_level();
        for (std::size_t slot = 0; slot < size; ++slot)
            if (index.level_of(static_cast<std::uint32_t>(slot)) == top) {
                reached[slot] = 1;
                queue.push_back(static_cast<std::uint32_t>(slot));
            }
        for (std::size_t head = 0; head < queue.size(); ++head) {
            auto neighbors = index.neighbors(queue[head], 0);
            for (auto it = neighbors.begin(); it != neighbors.end(); ++it) {
                std::uint32_t neighbor = it.slot();
                if (neighbor < size && !reached[neighbor]) {
                    reached[neighbor] = 1;
                    queue.push_back(neighbor);
                }
            }
        }
        // Reached is not enough for a search to find a member: a beam search comes near it
        // through its own neighbours, so a suspect none of them lists back (its in-links come
        // from farther members only) is linked again as well.
        for (std::uint32_t suspect : suspects)
            if (reached[suspect] && !listed_back_by_a_neighbor(suspect)) reached[suspect] = 0;
        for (std::size_t slot = 0; slot < size; ++slot)
            if (!reached[slot]) unreachable.push_back(static_cast<std::uint32_t>(slot));
    } else {
        // A suspect is reached when a member outside the suspects, or a suspect already found
        // reached, is in its own list and lists it back (in-links of a fresh member come from
        // the neighbours it linked to). Repeated until nothing changes, so that a pair or a
        // clump of suspects linked only to each other is not taken as reached.
        auto position = [&](std::uint32_t slot) -> std::size_t {  // suspects.size() when not a suspect
            auto it = std::lower_bound(suspects.begin(), suspects.end(), slot);
            return it != suspects.end() && *it == slot ? static_cast<std::size_t>(it - suspects.begin())
                                                       : suspects.size();
        };
        std::vector<std::uint8_t> reached(suspects.size(), 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (std::size_t i = 0; i < suspects.size(); ++i) {
                if (reached[i]) continue;
                auto neighbors = index.neighbors(suspects[i], 0);
                for (auto it = neighbors.begin(); it != neighbors.end(); ++it) {
                    std::uint32_t neighbor = it.slot();
                    if (neighbor >= size) continue;
                    std::size_t at = position(neighbor);
                    if ((at == suspects.size() || reached[at]) && lists(neighbor, suspects[i])) {
                        reached[i] = 1;
                        changed = true;
                        break;
                    }
                }
            }
        }
        for (std::size_t i = 0; i < suspects.size(); ++i)
            if (!reached[i]) unreachable.push_back(suspects[i]);
    }
    metric_t metric{&store_, &impl_->slot_to_node, &impl_->identity_slots, simd::active().dot_i8};
    const NodeColumns no_columns;
    // A search for `query` (the row of `node`) that gave `found` reached it: it returned the
    // node, or `wanted` others that score at least as well as the node itself (among more than
    // `wanted` equal rows ties go by node id).
    auto reached_by = [&](node_id_t node, const QuantizedVector& query, const std::vector<ScoredNode>& found,
                          std::size_t wanted) {
        if (std::any_of(found.begin(), found.end(), [&](const ScoredNode& s) { return s.node == node; })) return true;
        return found.size() >= wanted && found.back().score >= store_.score(query, node);
    };
    // Derailed suspects: reached, but a search for their own row does not come near them.
    // USearch reads neighbour lists without locks while other inserts rewrite them, so the
    // search an insert makes for its own row can end among far members; it is then linked
    // there, where no search for its row goes. Each suspect not already listed is searched for
    // with a narrow beam (a member it finds is almost always found by wider ones too).
    // Not under ip, where a search for a node's own row need not reach it even in a sound graph
    // (a row of small norm is outscored by larger ones everywhere): re-linking would not help.
    if (store_.metric() != Metric::ip) {
        std::sort(unreachable.begin(), unreachable.end());
        std::vector<std::uint8_t> derailed(suspects.size(), 0);
        std::atomic<std::size_t> next{0};
        const std::size_t probe = std::min<std::size_t>(10, size);
        const std::size_t expansion = std::min<std::size_t>(derail_check_expansion, params_.expansion_search);
        auto check = [&] {  // with the walk searches use
            detail::ContextPool::Lease lease(contexts);
            QuantizedVector query;
            query.codes.resize(store_.dim());
            std::vector<ScoredNode> found;
            for (std::size_t i; (i = next.fetch_add(1)) < suspects.size();) {
                const std::uint32_t slot = suspects[i];
                if (std::binary_search(unreachable.begin(), unreachable.end(), slot)) continue;
                const node_id_t node = impl_->slot_to_node[slot];
                if (node == invalid_id) continue;
                std::memcpy(query.codes.data(), store_.codes(node), store_.dim());
                query.scale = store_.scale(node);
                query.sq_norm = store_.sq_norm(node);
                (void)find(query, probe, expansion, nullptr, no_columns, lease.slot(), false, found, 0);
                derailed[i] = !reached_by(node, query, found, probe);
            }
        };
        detail::run_on_threads(std::max<std::size_t>(1, std::min({threads, contexts.count_slots(),
                                                                   suspects.size() / 1024 + 1})),
                               check);
        for (std::size_t i = 0; i < suspects.size(); ++i)
            if (derailed[i]) unreachable.push_back(suspects[i]);
    }
    if (unreachable.empty()) return 0;
    InsertScope inserting(inserting_);  // update() rewrites lists as an insert does
    std::atomic<std::size_t> next_relink{0}, count_done{0};
    struct Count {  // also when a worker throws (out of memory): what was re-linked counts
        std::atomic<std::size_t>& from;
        std::atomic<std::size_t>& into;
        ~Count() { into.fetch_add(from.load(), std::memory_order_relaxed); }
    } count{count_done, count_relinked_};
    auto relink = [&] {
        detail::ContextPool::Lease lease(contexts);
        us::index_update_config_t config;
        config.thread = lease.slot();
        QuantizedVector query;
        query.codes.resize(store_.dim());
        std::vector<ScoredNode> found;
        for (std::size_t i; (i = next_relink.fetch_add(1)) < unreachable.size();) {
            const std::uint32_t slot = unreachable[i];
            const node_id_t node = impl_->slot_to_node[slot];
            if (node == invalid_id) continue;
            row_ref_t value{store_.codes(node), store_.scale(node), store_.sq_norm(node)};
            std::memcpy(query.codes.data(), value.codes, store_.dim());
            query.scale = value.scale;
            query.sq_norm = value.sq_norm;
            // Linked again until a search for its own row finds it among the 10 nearest: a
            // neighbour's list can drop it again when that list is full (its pruning keeps the
            // more diverse links), so later tries search wider for neighbours to link with.
            config.expansion = params_.expansion_add;
            for (int attempt = 0; attempt < 4; ++attempt) {
                auto result = index.update(index.iterator_at(slot), index.at(slot).key, value, metric, config);
                if (!result) {
                    take_error(result.error);  // out of memory: the member stays as it was
                    break;
                }
                if (attempt == 0) count_done.fetch_add(1, std::memory_order_relaxed);
                (void)find(query, std::min<std::size_t>(10, size), 0, nullptr, no_columns, lease.slot(), false, found, 0);
                if (reached_by(node, query, found, std::min<std::size_t>(10, size))) break;
                config.expansion = std::min(config.expansion * 2, size);
            }
        }
    };
    detail::run_on_threads(std::max<std::size_t>(1, std::min({threads, contexts.count_slots(), unreachable.size() / 64 + 1})),
                           relink);
    return count_done.load();
}

std::size_t SeedIndex::slots_in_node_order() const noexcept {
    return std::min(impl_->identity_slots.load(std::memory_order_acquire), impl_->index.size());
}

void SeedIndex::count_reindexed(std::size_t count) noexcept { count_reindexed_.fetch_add(count, std::memory_order_relaxed); }

Status SeedIndex::save(const std::string& path) const {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::io_error("cannot create " + path + ": " + std::strerror(errno));
    // Buffer the many small writes of the stream format into 1 MiB blocks.
    std::vector<char> buffer;
    buffer.reserve(1 << 20);
    int write_errno = 0;
    auto flush = [&]() {
        std::size_t done = 0;
        while (done < buffer.size() && !write_errno) {
            ssize_t n = ::write(fd, buffer.data() + done, buffer.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) write_errno = errno;
            else done += static_cast<std::size_t>(n);
        }
        buffer.clear();
        return write_errno == 0;
    };
    auto output = [&](const void* data, std::size_t length) {
        if (buffer.size() + length > buffer.capacity() && !flush()) return false;
        if (length >= buffer.capacity()) {
            buffer.assign(static_cast<const char*>(data), static_cast<const char*>(data) + length);
            return flush();
        }
        buffer.insert(buffer.end(), static_cast<const char*>(data), static_cast<const char*>(data) + length);
        return true;
    };
    auto result = impl_->index.save_to_stream(output);
    bool ok = result && flush();
    if (ok && ::fsync(fd) != 0) write_errno = errno, ok = false;
    ::close(fd);
    // A failed write makes USearch's stream fail too ("Failed to serialize into stream"): the
    // write's own error says why (a full disk, an I/O error), so it comes first. USearch's
    // error is taken either way (an error left unread throws when it is destroyed).
    std::string stream_error = result ? std::string() : take_error(result.error);
    if (write_errno != 0)
        return Status::io_error("cannot write the HNSW index to " + path + ": " + std::strerror(write_errno) +
                                (write_errno == ENOSPC || write_errno == EDQUOT ? " (the disk is full)" : ""));
    if (!stream_error.empty()) return Status::io_error("cannot write the HNSW index to " + path + ": " + stream_error);
    return Status::OK();
}

Status SeedIndex::load(const std::string& path, std::size_t count_nodes) {
    hnsw_t& index = impl_->index;
    if (index.size() != 0) return Status::internal("HNSW load: the index is not empty");
    auto fail = [&](const std::string& why) {
        index.reset();
        std::fill(impl_->slot_to_node.begin(), impl_->slot_to_node.end(), invalid_id);
        impl_->identity_slots = 0;
        return Status::corruption("HNSW index file " + path + ": " + why);
    };
    // Read the whole file and check that its layout adds up before USearch parses it: USearch
    // trusts the header and the levels (a truncated file would make it free unread nodes).
    std::vector<char> bytes;
    {
        std::FILE* file = std::fopen(path.c_str(), "rb");
        if (!file) return Status::io_error("cannot open " + path + ": " + std::strerror(errno));
        char block[1 << 16];
        for (std::size_t got; (got = std::fread(block, 1, sizeof(block), file)) > 0;) bytes.insert(bytes.end(), block, block + got);
        bool failed = std::ferror(file) != 0;
        std::fclose(file);
        if (failed) return Status::io_error("cannot read " + path);
    }
    us::index_serialized_header_t header;
    if (bytes.size() < sizeof(header)) return fail("shorter than its header");
    std::memcpy(&header, bytes.data(), sizeof(header));
    const std::size_t links = params_.connectivity, base_links = 2 * params_.connectivity;
    if (header.connectivity != links || header.connectivity_base != base_links)
        return fail("connectivity " + std::to_string(header.connectivity) + "/" + std::to_string(header.connectivity_base) +
                    ", the graph uses " + std::to_string(links) + "/" + std::to_string(base_links));
    if (header.size != count_nodes)
        return fail(std::to_string(header.size) + " members for a graph of " + std::to_string(count_nodes) + " nodes");
    if (header.size && (header.entry_slot >= header.size || header.max_level > 64)) return fail("bad entry slot or top level");
    using level_t = std::int16_t;
    const std::size_t n = static_cast<std::size_t>(header.size);
    if ((bytes.size() - sizeof(header)) / sizeof(level_t) < n) return fail("shorter than its levels");
    std::size_t expected = sizeof(header) + n * sizeof(level_t);
    for (std::size_t i = 0; i < n; ++i) {
        level_t level;
        std::memcpy(&level, bytes.data() + sizeof(header) + i * sizeof(level_t), sizeof(level));
        if (level < 0 || static_cast<std::uint64_t>(level) > header.max_level)
            return fail("member " + std::to_string(i) + " has level " + std::to_string(level));
        expected += Tapes::tape_bytes(static_cast<std::size_t>(level), base_links, links);
    }
    if (expected != bytes.size())
        return fail(std::to_string(bytes.size()) + " bytes where the header and levels make " + std::to_string(expected));
    renumber_by_node(bytes, header, links, base_links);
    std::size_t offset = 0;
    auto input = [&](void* data, std::size_t length) {
        if (length > bytes.size() - offset) return false;
        std::memcpy(data, bytes.data() + offset, length);
        offset += length;
        return true;
    };
    auto result = index.load_from_stream(input);
    if (!result) return fail(take_error(result.error));
    if (offset != bytes.size()) return fail("bytes after the last node");
    bytes = std::vector<char>();
    if (!try_reserve_members(index, index.size(), impl_->count_contexts)) {
        index.reset();
        return Status::internal("HNSW index could not reserve " + std::to_string(index.size()) + " members");
    }
    // Keys are checked before slot_to_node is filled from them: a key beyond the store must
    // never reach the metric.
    impl_->slot_to_node.assign(index.capacity(), invalid_id);
    for (std::size_t slot = 0; slot < index.size(); ++slot) {
        std::uint64_t key = index.at(static_cast<std::uint32_t>(slot)).key;
        if (key >= count_nodes) return fail("member " + std::to_string(slot) + " names node " + std::to_string(key) +
                                            " of a graph of " + std::to_string(count_nodes) + " nodes");
        impl_->slot_to_node[slot] = static_cast<node_id_t>(key);
    }
    impl_->identity_slots = 0;
    impl_->extend_identity();
    auto problems = verify(count_nodes, nullptr, 1);
    if (!problems.empty()) return fail(problems.front());
    count_reindexed_ = 0;
    has_entry_.store(index.size() > 0, std::memory_order_release);
    return Status::OK();
}

std::vector<std::string> SeedIndex::verify(std::size_t count_nodes, const std::uint8_t* dead, std::size_t limit) const {
    std::vector<std::string> problems;
    const hnsw_t& index = impl_->index;
    const std::size_t size = index.size();
    const std::size_t top = index.max_level();
    const std::size_t base_links = index.config().connectivity_base, links = index.config().connectivity;
    const Tapes tapes(index);
    std::vector<std::uint8_t> held(count_nodes, 0);
    auto report = [&](std::string line) {
        if (problems.size() < limit) problems.push_back(std::move(line));
    };
    for (std::size_t slot = 0; slot < size && problems.size() < limit; ++slot) {
        auto member = static_cast<std::uint32_t>(slot);
        std::uint64_t key = index.at(member).key;
        if (key >= count_nodes) {
            report("HNSW member " + std::to_string(slot) + " names node " + std::to_string(key) + " beyond the " +
                   std::to_string(count_nodes) + " nodes");
            continue;
        }
        if (impl_->slot_to_node[slot] != key)
            report("HNSW member " + std::to_string(slot) + " maps to node " + std::to_string(impl_->slot_to_node[slot]) +
                   " but its key is " + std::to_string(key));
        held[key] = 1;
        std::size_t level = index.level_of(member);
        if (level > top) {
            report("HNSW member " + std::to_string(slot) + " has level " + std::to_string(level) + " above the top level " +
                   std::to_string(top));
            continue;
        }
        for (std::size_t l = 0; l <= level; ++l) {
            auto neighbors = index.neighbors(member, l);
            // Searches read the lists from the tapes themselves (Walk): the same lists.
            const std::uint8_t* list = tapes.list(tapes.tape(member), static_cast<int>(l));
            bool same = list && Tapes::count_of(list, ~std::size_t{0}) == neighbors.size();
            for (std::size_t i = 0; same && i < neighbors.size(); ++i)
                same = Tapes::slot_at(list, i) == (neighbors.begin() + static_cast<std::ptrdiff_t>(i)).slot();
            if (!same) {
                report("HNSW member " + std::to_string(slot) + ": the search walk reads another neighbour list on level " +
                       std::to_string(l) + " than USearch holds");
                break;
            }
            std::size_t most = l == 0 ? base_links : links;
            if (neighbors.size() > most) {
                report("HNSW member " + std::to_string(slot) + " has " + std::to_string(neighbors.size()) +
                       " neighbours on level " + std::to_string(l) + " (at most " + std::to_string(most) + ")");
                break;
            }
            for (auto it = neighbors.begin(); it != neighbors.end(); ++it)
                if (it.slot() >= size) {
                    report("HNSW member " + std::to_string(slot) + " links to slot " + std::to_string(it.slot()) +
                           " beyond the " + std::to_string(size) + " members");
                    break;
                }
        }
    }
    for (std::size_t node = 0; node < count_nodes && problems.size() < limit; ++node)
        if (!held[node] && !(dead && dead[node]))
            report("node " + std::to_string(node) + " is live but not in the HNSW index");
    return problems;
}

bool SeedIndex::search(const QuantizedVector& query, std::size_t wanted, std::size_t expansion,
                       const NodeFilter* filter, const NodeColumns& columns, std::size_t context,
                       std::vector<ScoredNode>& out, std::size_t scan_nodes) const {
    return find(query, wanted, expansion, filter, columns, context, false, out, scan_nodes);
}

void SeedIndex::search_with_usearch(const QuantizedVector& query, std::size_t wanted, std::size_t expansion,
                                    const NodeFilter* filter, const NodeColumns& columns, std::size_t context,
                                    std::vector<ScoredNode>& out) const {
    (void)find(query, wanted, expansion, filter, columns, context, true, out, 0);
}

bool SeedIndex::find(const QuantizedVector& query, std::size_t wanted, std::size_t expansion,
                     const NodeFilter* filter, const NodeColumns& columns, std::size_t context, bool usearch_loop,
                     std::vector<ScoredNode>& out, std::size_t scan_nodes) const {
    out.clear();
    const hnsw_t& index = impl_->index;
    // USearch counts the first member before it is the entry point: until that add returns, a
    // search would start from a slot with no node yet.
    if (wanted == 0 || !has_entry_.load(std::memory_order_acquire) || index.size() == 0) return true;
    // A node indexed more than once (upserts) can come back more than once: ask for enough to
    // drop repeats, and more again while repeats leave fewer than asked.
    const std::size_t asked = wanted;
    const std::size_t reindexed = count_reindexed_.load(std::memory_order_relaxed);
    if (reindexed) wanted += std::min(wanted, reindexed);
    const row_ref_t value{query.codes.data(), query.scale, query.sq_norm};
    const detail::huge_vector<node_id_t>& slots = impl_->slot_to_node;
    const bool filtered = filter && filter->needed(columns);
    auto admits = [&](node_id_t node) { return !filtered || filter->admits(columns, node); };
    // Into `out`: up to `count` nodes (USearch's loop), or the whole beam of `ef` (the walk);
    // false when the walk gave up (see Walk::run).
    auto run = [&](std::size_t count, std::size_t ef) {
        if (!usearch_loop) {
            Walk walk(index, store_, slots, impl_->identity_slots.load(std::memory_order_acquire), value,
                      impl_->walk_scratch[context]);
            if (!walk.run(ef, admits, filtered ? scan_nodes : 0)) return false;
            for (const Candidate& c : impl_->walk_scratch[context].top) out.push_back({walk.node_of(c.slot), -c.distance});
            return true;
        }
        metric_t metric{&store_, &slots, &impl_->identity_slots, simd::active().dot_i8};
        us::index_search_config_t config;
        config.thread = context;
        config.expansion = ef;
        auto collect = [&](auto&& result) {
            if (!result) {
                take_error(result.error);
                return;
            }
            for (std::size_t i = 0; i < result.size(); ++i) {
                auto match = result[i];
                out.push_back({static_cast<node_id_t>(match.member.key), -match.distance});
            }
        };
        if (filtered)
            collect(index.search(value, count, metric, config,
                                 [&](hnsw_t::member_cref_t member) { return admits(slots[member.slot]); }));
        else
            collect(index.search(value, count, metric, config));
        return true;
    };
    while (true) {
        wanted = std::min(wanted, index.size());
        const std::size_t ef = std::min(std::max(expansion ? expansion : params_.expansion_search, wanted), index.size());
        out.clear();
        if (!run(wanted, ef)) return false;  // nothing was added to `out`
        const std::size_t returned = std::min(out.size(), wanted);
        std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(returned), out.end(),
                          [](const ScoredNode& a, const ScoredNode& b) {
                              return a.score != b.score ? a.score > b.score : a.node < b.node;
                          });
        out.resize(returned);
        if (!reindexed) return true;
        // All members of an upserted node score the same (the metric reads the current row), so
        // after the sort its repeats are adjacent.
        out.erase(std::unique(out.begin(), out.end(),
                              [](const ScoredNode& a, const ScoredNode& b) { return a.node == b.node; }),
                  out.end());
        if (out.size() >= asked || returned < wanted || wanted >= index.size()) break;
        wanted *= 4;  // repeats crowded out distinct nodes
    }
    if (out.size() > asked) out.resize(asked);
    return true;
}

}  // namespace vecgraph
