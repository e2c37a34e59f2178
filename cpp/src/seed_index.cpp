// HNSW seed index over the int8 store (see seed_index.hpp).
#include "vecgraph/seed_index.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <usearch/index.hpp>

#include "vecgraph/detail/huge_pages.hpp"
#include "vecgraph/detail/prefetch.hpp"
#include "vecgraph/simd/kernels.hpp"


namespace vecgraph {

namespace us = unum::usearch;
// Node tape and the slot table on huge pages (detail/huge_pages.hpp): a search reads both at random.
using hnsw_t = us::index_gt<float, std::uint64_t, std::uint32_t, detail::HugePageAllocator<us::byte_t>,
                            detail::HugePageArena>;

namespace {

struct row_ref_t {
    const std::int8_t* codes;
    float scale;
    float sq_norm;
};

// Distance = -score, so that smaller is closer for every metric.
struct metric_t {
    const VectorStore* store;
    const detail::huge_vector<node_id_t>* slot_to_node;
    simd::dot_i8_fn dot;

    row_ref_t ref(const row_ref_t& row) const noexcept { return row; }
    template <typename entry_at>
    row_ref_t ref(const entry_at& entry) const noexcept {
        node_id_t node = (*slot_to_node)[static_cast<std::size_t>(get_slot(entry))];
        return {store->codes(node), store->scale(node), store->sq_norm(node)};
    }
    template <typename a_at, typename b_at>
    float operator()(const a_at& a, const b_at& b) const noexcept {
        row_ref_t x = ref(a), y = ref(b);
        std::int32_t product = dot(x.codes, y.codes, store->dim());
        return -score_from_dot(store->metric(), product, x.scale, x.sq_norm, y.scale, y.sq_norm);
    }
};

// Called by USearch with the neighbours a search is about to measure: their rows (header and
// codes) are requested from memory together, so the misses overlap instead of queueing one
// distance at a time.
struct prefetch_rows_t {
    const VectorStore* store;
    const detail::huge_vector<node_id_t>* slot_to_node;

    template <typename member_iterator_at>
    void operator()(member_iterator_at begin, member_iterator_at end) const noexcept {
        const std::size_t stride = store->stride_bytes();
        for (; begin != end; ++begin) {
            node_id_t node = (*slot_to_node)[static_cast<std::size_t>(get_slot(begin))];
            if (node == invalid_id) continue;  // a slot another thread is still adding
            detail::prefetch_bytes_l2(store->row_data(node), stride);
        }
    }
};

// Held while members are added or updated. Searches that use USearch's prefetch hook must not
// overlap those (see SeedIndex::search): new searches see `inserting` and go without it; the
// ones already using it are waited for.
class InsertScope {
  public:
    InsertScope(std::atomic<std::size_t>& inserting, const std::atomic<std::size_t>& prefetching_searches)
        : inserting_(inserting) {
        inserting_.fetch_add(1);
        while (prefetching_searches.load() > 0) std::this_thread::yield();
    }
    ~InsertScope() { inserting_.fetch_sub(1); }
    InsertScope(const InsertScope&) = delete;
    InsertScope& operator=(const InsertScope&) = delete;

  private:
    std::atomic<std::size_t>& inserting_;
};

std::string take_error(us::error_t& error) {
    const char* message = error.release();
    return message ? message : "unknown error";
}

}  // namespace

struct SeedIndex::Impl {
    hnsw_t index;
    detail::huge_vector<node_id_t> slot_to_node;
    std::size_t count_contexts;
};

SeedIndex::SeedIndex(const VectorStore& store, HnswParams params, std::size_t count_contexts)
    : store_(store), params_(params), impl_(new Impl{hnsw_t(us::index_config_t(params.connectivity)), {}, count_contexts}) {}

SeedIndex::~SeedIndex() = default;

std::size_t SeedIndex::size() const noexcept { return impl_->index.size(); }

std::size_t SeedIndex::memory_bytes() const noexcept {
    return impl_->index.memory_usage() + impl_->slot_to_node.capacity() * sizeof(node_id_t);
}

Status SeedIndex::reserve_more(std::size_t count) {
    hnsw_t& index = impl_->index;
    std::size_t needed = index.size() + reserved_.load() + count;
    if (needed <= index.capacity()) {
        reserved_ += count;
        return Status::OK();
    }
    std::size_t capacity = std::max(needed, index.capacity() + index.capacity() / 2);
    if (!index.try_reserve(us::index_limits_t(capacity, impl_->count_contexts)))
        return Status::internal("HNSW index could not reserve " + std::to_string(capacity) + " members");
    impl_->slot_to_node.resize(capacity, invalid_id);
    reserved_ += count;
    return Status::OK();
}

bool SeedIndex::reserve_in_place(std::size_t count) {
    // Adds running beside this raise size() before they release their reservation, so the sum
    // can only overstate what is taken: a false "does not fit" at worst.
    hnsw_t& index = impl_->index;
    if (index.size() + reserved_.load() + count > index.capacity()) return false;
    reserved_ += count;
    return true;
}

Status SeedIndex::add_nodes(const node_id_t* nodes, std::size_t count, std::size_t threads,
                            detail::ContextPool& contexts) {
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
    InsertScope inserting(inserting_, prefetching_searches_);
    metric_t metric{&store_, &impl_->slot_to_node, simd::active().dot_i8};
    prefetch_rows_t prefetch{&store_, &impl_->slot_to_node};
    threads = std::max<std::size_t>(1, std::min({threads, impl_->count_contexts, count / 256 + 1}));
    // Inserts that run side by side can leave a member unreachable (see relink_unreachable):
    // the members of such calls are kept as suspects for the next check.
    constexpr std::uint32_t no_slot = ~std::uint32_t{0};  // an insert that failed or never ran
    std::vector<std::uint32_t> slots(count, no_slot);
    {
        std::lock_guard<std::mutex> guard(adds_mutex_);
        if (active_adds_++ > 0 || threads > 1) adds_overlapped_ = true;
    }
    struct Registered {
        SeedIndex& self;
        const std::vector<std::uint32_t>& slots;
        ~Registered() {
            std::lock_guard<std::mutex> guard(self.adds_mutex_);
            if (self.adds_overlapped_) {
                for (std::uint32_t slot : slots)
                    if (slot != no_slot) self.suspect_slots_.push_back(slot);
                if (!self.suspect_slots_.empty()) self.needs_relink_.store(true, std::memory_order_release);
            }
            if (--self.active_adds_ == 0) self.adds_overlapped_ = false;
        }
    } registered{*this, slots};
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::string failure;
    std::mutex failure_mutex;
    auto worker = [&] {
        detail::ContextPool::Lease lease(contexts);
        us::index_update_config_t config;
        config.expansion = params_.expansion_add;
        config.thread = lease.slot();
        for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < count;) {
            node_id_t node = nodes[i];
            row_ref_t value{store_.codes(node), store_.scale(node), store_.sq_norm(node)};
            auto result = index.add(
                node, value, metric, config,
                [&](hnsw_t::member_ref_t member) {
                    impl_->slot_to_node[member.slot] = node;
                    slots[i] = static_cast<std::uint32_t>(member.slot);
                },
                prefetch);
            if (result && !has_entry_.load(std::memory_order_relaxed)) has_entry_.store(true, std::memory_order_release);
            if (!result) {
                std::lock_guard<std::mutex> lock(failure_mutex);
                failure = take_error(result.error);
                failed = true;
            }
        }
    };
    if (threads == 1) {
        worker();
    } else {
        std::vector<std::thread> pool;
        for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
        worker();
        for (auto& thread : pool) thread.join();
    }
    if (failed) return Status::internal("HNSW insert failed: " + failure);
    return Status::OK();
}

std::size_t SeedIndex::relink_unreachable(detail::ContextPool& contexts) {
    std::vector<std::uint32_t> suspects;
    {
        std::lock_guard<std::mutex> guard(adds_mutex_);
        suspects.swap(suspect_slots_);
        needs_relink_.store(false, std::memory_order_release);
    }
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
        // Breadth-first from the top level down, as searches descend: on each level the walk
        // starts from every member reached on the levels above (and, on the top level, from
        // every member there) and follows that level's links.
        std::vector<std::uint8_t> reached(size, 0);
        std::vector<std::uint32_t> queue;
        const std::size_t top = index.max_level();
        for (std::size_t slot = 0; slot < size; ++slot)
            if (index.level_of(static_cast<std::uint32_t>(slot)) == top) {
                reached[slot] = 1;
                queue.push_back(static_cast<std::uint32_t>(slot));
            }
        for (std::size_t level = top + 1; level-- > 0;)
            for (std::size_t head = 0; head < queue.size(); ++head) {
                auto neighbors = index.neighbors(queue[head], level);
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
    if (unreachable.empty()) return 0;
    InsertScope inserting(inserting_, prefetching_searches_);  // update() rewrites lists as an insert does
    metric_t metric{&store_, &impl_->slot_to_node, simd::active().dot_i8};
    detail::ContextPool::Lease lease(contexts);
    us::index_update_config_t config;
    config.expansion = params_.expansion_add;
    config.thread = lease.slot();
    us::index_search_config_t search_config;
    search_config.thread = lease.slot();
    search_config.expansion = std::min(params_.expansion_search, size);
    const std::size_t probe = std::min<std::size_t>(10, size);
    // Found by a search for its own row (the first `probe` results hold its slot).
    auto found = [&](std::uint32_t slot, const row_ref_t& value) {
        auto result = index.search(value, probe, metric, search_config);
        if (!result) {
            take_error(result.error);
            return true;  // out of memory: nothing more to do here
        }
        for (std::size_t i = 0; i < result.size(); ++i)
            if (result[i].member.slot == slot) return true;
        return false;
    };
    std::size_t relinked = 0;
    for (std::uint32_t slot : unreachable) {
        node_id_t node = impl_->slot_to_node[slot];
        if (node == invalid_id) continue;
        row_ref_t value{store_.codes(node), store_.scale(node), store_.sq_norm(node)};
        // Linked again until a search finds it: a neighbour's list can drop it again when that
        // list is full (its pruning keeps the more diverse links), so later tries search wider
        // for neighbours to link with.
        config.expansion = params_.expansion_add;
        for (int attempt = 0; attempt < 4; ++attempt) {
            auto result = index.update(index.iterator_at(slot), index.at(slot).key, value, metric, config);
            if (!result) {
                take_error(result.error);  // out of memory: the member stays as it was
                break;
            }
            if (attempt == 0) ++relinked;
            if (found(slot, value)) break;
            config.expansion = std::min(config.expansion * 2, size);
        }
    }
    count_relinked_.fetch_add(relinked, std::memory_order_relaxed);
    return relinked;
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
    if (!result) return Status::io_error("cannot write the HNSW index to " + path + ": " + take_error(result.error));
    if (!ok) return Status::io_error("cannot write the HNSW index to " + path + ": " + std::strerror(write_errno));
    return Status::OK();
}

Status SeedIndex::load(const std::string& path, std::size_t count_nodes) {
    hnsw_t& index = impl_->index;
    if (index.size() != 0) return Status::internal("HNSW load: the index is not empty");
    auto fail = [&](const std::string& why) {
        index.reset();
        std::fill(impl_->slot_to_node.begin(), impl_->slot_to_node.end(), invalid_id);
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
    const std::size_t slot_bytes = sizeof(std::uint32_t), count_bytes = sizeof(std::uint32_t);
    const std::size_t head_bytes = sizeof(std::uint64_t) + sizeof(level_t);
    std::size_t expected = sizeof(header) + n * sizeof(level_t);
    for (std::size_t i = 0; i < n; ++i) {
        level_t level;
        std::memcpy(&level, bytes.data() + sizeof(header) + i * sizeof(level_t), sizeof(level));
        if (level < 0 || static_cast<std::uint64_t>(level) > header.max_level)
            return fail("member " + std::to_string(i) + " has level " + std::to_string(level));
        expected += head_bytes + base_links * slot_bytes + count_bytes + static_cast<std::size_t>(level) * (links * slot_bytes + count_bytes);
    }
    if (expected != bytes.size())
        return fail(std::to_string(bytes.size()) + " bytes where the header and levels make " + std::to_string(expected));
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
    if (!index.try_reserve(us::index_limits_t(index.size(), impl_->count_contexts))) {
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

void SeedIndex::search(const QuantizedVector& query, std::size_t wanted, std::size_t expansion,
                       const NodeFilter* filter, const NodeColumns& columns, std::size_t context,
                       std::vector<ScoredNode>& out) const {
    out.clear();
    const hnsw_t& index = impl_->index;
    // USearch counts the first member before it is the entry point: until that add returns, a
    // search would start from a slot with no node yet.
    if (wanted == 0 || !has_entry_.load(std::memory_order_acquire) || index.size() == 0) return;
    // USearch sizes its buffers by these: never more than the index holds.
    // A node indexed more than once (upserts) can come back more than once: ask for enough to
    // drop repeats, and more again while repeats leave fewer than asked.
    const std::size_t asked = wanted;
    const std::size_t reindexed = count_reindexed_.load(std::memory_order_relaxed);
    if (reindexed) wanted += std::min(wanted, reindexed);
    metric_t metric{&store_, &impl_->slot_to_node, simd::active().dot_i8};
    row_ref_t value{query.codes.data(), query.scale, query.sq_norm};
    prefetch_rows_t prefetch{&store_, &impl_->slot_to_node};
    us::index_search_config_t config;
    config.thread = context;
    // USearch's prefetch hook walks a neighbour list with an iterator that re-reads the list's
    // length at every step and stops only on equality: an insert that rewrites the list at the
    // same time can leave the length below the iterator, which then reads past the list. The
    // hook is used only while no insert runs (a Dekker handshake on two seq_cst counters with
    // add_nodes(), which waits for the searches already using it).
    prefetching_searches_.fetch_add(1);
    const bool use_prefetch = inserting_.load() == 0;
    if (!use_prefetch) prefetching_searches_.fetch_sub(1);
    struct Leave {
        std::atomic<std::size_t>* count;
        ~Leave() {
            if (count) count->fetch_sub(1);
        }
    } leave{use_prefetch ? &prefetching_searches_ : nullptr};
    auto run = [&](auto&& predicate) {
        return use_prefetch ? index.search(value, wanted, metric, config, predicate, prefetch)
                            : index.search(value, wanted, metric, config, predicate);
    };
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
    while (true) {
        wanted = std::min(wanted, index.size());
        config.expansion = std::min(std::max(expansion ? expansion : params_.expansion_search, wanted), index.size());
        out.clear();
        if (filter && filter->needed(columns)) {
            const detail::huge_vector<node_id_t>& slots = impl_->slot_to_node;
            auto predicate = [&](hnsw_t::member_cref_t member) {
                return filter->admits(columns, slots[member.slot]);
            };
            collect(run(predicate));
        } else {
            collect(run(us::dummy_predicate_t{}));
        }
        const std::size_t returned = out.size();
        std::sort(out.begin(), out.end(), [](const ScoredNode& a, const ScoredNode& b) {
            return a.score != b.score ? a.score > b.score : a.node < b.node;
        });
        if (!reindexed) return;
        // All members of an upserted node score the same (the metric reads the current row), so
        // after the sort its repeats are adjacent.
        out.erase(std::unique(out.begin(), out.end(),
                              [](const ScoredNode& a, const ScoredNode& b) { return a.node == b.node; }),
                  out.end());
        if (out.size() >= asked || returned < wanted || wanted >= index.size()) break;
        wanted *= 4;  // repeats crowded out distinct nodes
    }
    if (out.size() > asked) out.resize(asked);
}

}  // namespace vecgraph
