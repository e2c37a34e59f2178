// Seed index: USearch's HNSW graph (`index_gt`) over node vectors.
//
// USearch stores only the graph and the keys; distances are computed by our own metric over
// the int8 VectorStore, so vectors are held once. Keys are node ids. USearch builds and links
// the graph; searches walk it with a loop of our own (seed_index_walk.hpp): USearch's
// search algorithm with two candidates expanded per step (DiskANN's beam width), the next two
// candidates' neighbour lists requested ahead, and the new neighbours of both measured with one
// gathered kernel call; its recall matches USearch's search, its result lists need not be
// identical. The node filter is
// applied as USearch applies its predicate: filtered-out nodes are still used for navigation
// but never returned (Malkov & Yashunin, "Efficient and robust approximate nearest neighbor
// search using Hierarchical Navigable Small World graphs", TPAMI 2018).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vecgraph/detail/context_pool.hpp"
#include "vecgraph/node_filter.hpp"
#include "vecgraph/status.hpp"
#include "vecgraph/types.hpp"
#include "vecgraph/vector_store.hpp"

namespace vecgraph {

struct HnswParams {
    std::size_t connectivity = 24;      // M: links per node on upper levels (2M on the base level)
    std::size_t expansion_add = 128;    // efConstruction
    std::size_t expansion_search = 64;  // ef at query time (raised to the number of seeds wanted)
};

struct ScoredNode {
    node_id_t node;
    float score;
};

class SeedIndex {
  public:
    /// `count_contexts`: how many threads may search or add at once (context slots 0..n-1).
    SeedIndex(const VectorStore& store, HnswParams params, std::size_t count_contexts);
    ~SeedIndex();
    SeedIndex(const SeedIndex&) = delete;
    SeedIndex& operator=(const SeedIndex&) = delete;

    const HnswParams& params() const noexcept { return params_; }
    std::size_t size() const noexcept;
    std::size_t memory_bytes() const noexcept;

    /// Makes room for `count` more members, beyond those reserved and not yet added (so two
    /// reservations followed by their adds running at once both fit). Not safe concurrently
    /// with search or add (the caller excludes readers).
    Status reserve_more(std::size_t count);
    /// Reserves `count` more members as reserve_more does when they fit in the current capacity
    /// (nothing moves: safe beside adds and searches, not beside another reservation); returns
    /// false and reserves nothing when the index would have to grow.
    bool reserve_in_place(std::size_t count);
    /// Indexes the given store rows as nodes of the same ids, on up to `threads` threads, each
    /// leasing a context slot from `contexts`. Safe concurrently with searches and other adds
    /// (USearch locks the members it links), after reserve_more or reserve_in_place(count). A
    /// node indexed again (an upsert) gets a second member; searches return each node once.
    /// `added`, when given, receives how many of them became members, also when the call fails
    /// or throws (std::bad_alloc).
    Status add_nodes(const node_id_t* nodes, std::size_t count, std::size_t threads, detail::ContextPool& contexts,
                     std::size_t* added = nullptr);

    /// True when members were added by inserts that ran beside each other (a call on more than
    /// one thread, or calls that overlapped) and relink_unreachable() has not checked them yet.
    bool needs_relink() const noexcept { return needs_relink_.load(std::memory_order_acquire); }
    /// Finds the members that concurrent inserts left unreachable or derailed and re-links them
    /// with USearch's update (a fresh search and new links both ways). The derail check (one
    /// thread per 1,024 suspects) and the re-links (one per 64) run on up to `threads` threads,
    /// each leasing a context from `contexts`: the caller must hold no lease. Returns how many
    /// it re-linked.
    ///
    /// Why: USearch clears a new member's neighbour list on each level just before filling it,
    /// after its upper levels are already linked. An insert running beside it can descend
    /// through the new member, find its lists still empty, link to it alone and add itself to
    /// the list that is then cleared: that node has no in-link and no search reaches it.
    /// Serial inserts never do this. Checked: with many suspects (at least 1/8 of the index) by
    /// a breadth-first walk from the top level down, and a reached suspect must also be listed
    /// back on the base level by one of its own neighbours (a beam search comes near a member
    /// through them); otherwise each suspect must be listed back by one of its own neighbours
    /// that is not a suspect or is one already found reached (so a clump of suspects linked
    /// only to each other is caught).
    ///
    /// Derailed: USearch reads neighbour lists without locks while inserts beside it rewrite
    /// them, so the search an insert makes for its own row can end among far members and link
    /// it there: reachable, but no search for its row comes near it (seen in about 2 of 100
    /// two-thread builds of 450 nodes with exact duplicates; never with one thread). So under
    /// cos and l2 (not ip: there a sound graph need not lead a node's own row to it) every
    /// suspect is also searched for with its own row, at ef derail_check_expansion (or the
    /// search ef when smaller), and re-linked when that search reaches neither its node nor 10
    /// others that score at least as well as the node itself (among more than 10 equal rows
    /// ties go by node id). Re-linking can cost other
    /// members an in-link (update() prunes its new neighbours' lists); they are not checked
    /// again. Measured on 20,000 clustered nodes: about 150 nodes their own search missed
    /// before, about 12 after.
    ///
    /// A re-linked member is then searched for with its own row and linked again, searching
    /// wider, until the search reaches it as above (at most 4 tries): a full neighbour list can
    /// drop it again when it is pruned. The check runs while the caller holds the walk lock:
    /// writes wait for it.
    ///
    /// Not safe concurrently with add (the caller excludes adds); safe beside searches.
    std::size_t relink_unreachable(detail::ContextPool& contexts, std::size_t threads = 1);
    /// The beam of the derail check's self-searches (or expansion_search when smaller).
    static constexpr std::size_t derail_check_expansion = 32;
    /// True while an add_nodes() or relink_unreachable() call is inserting.
    bool adds_running() const noexcept { return inserting_.load() > 0; }
    /// Members re-linked by relink_unreachable() since this index was made.
    std::size_t count_relinked() const noexcept { return count_relinked_.load(std::memory_order_relaxed); }

    /// How many members, from slot 0 up, sit in the slot of their node's id (searches map those
    /// slots to nodes without reading the slot table). All of them after batch inserts and after
    /// load(); an upsert's second member, or inserts of separate calls that take their slots out
    /// of node order, end the run.
    std::size_t slots_in_node_order() const noexcept;

    /// Records that `count` nodes were indexed again (so searches ask for extra results).
    void count_reindexed(std::size_t count) noexcept;

    /// Members that repeat a node (upserts indexed again).
    std::size_t count_reindexed() const noexcept { return count_reindexed_.load(std::memory_order_relaxed); }

    /// Writes the HNSW graph (USearch's stream format: header, levels, node tapes; keys are
    /// node ids) to `path`, fsynced. Not safe concurrently with add (the caller holds writes).
    Status save(const std::string& path) const;
    /// Replaces this (empty) index with one written by save() for a store of `count_nodes`
    /// rows, then checks it with verify(): a file that does not fit gives Status::corruption
    /// and leaves the index empty.
    Status load(const std::string& path, std::size_t count_nodes);
    /// Structural problems, if any: member keys beyond `count_nodes`, neighbour slots beyond the
    /// index, neighbour lists longer than the connectivity, levels above the top level, and the
    /// nodes in [0, count_nodes) with `dead[n] == 0` that no member holds. At most `limit` lines.
    std::vector<std::string> verify(std::size_t count_nodes, const std::uint8_t* dead, std::size_t limit) const;

    /// Up to `wanted` nodes admitted by `filter` (nullptr: all), best first by (score desc, id asc).
    /// `context` is a slot leased from a pool of `count_contexts`; `expansion` 0 means the default.
    /// With `scan_nodes` > 0 and a filter, gives up (returns false, `out` empty) once the filter
    /// admits so few of the members walked that an exact scan of `scan_nodes` rows is predicted
    /// to be cheaper than filling the beam; the caller then scans.
    bool search(const QuantizedVector& query, std::size_t wanted, std::size_t expansion, const NodeFilter* filter,
                const NodeColumns& columns, std::size_t context, std::vector<ScoredNode>& out,
                std::size_t scan_nodes = 0) const;
    /// The same search with USearch's own search loop (index_gt::search, one candidate expanded
    /// per step) over the same graph, for tests and benchmarks of the walk that search() runs.
    void search_with_usearch(const QuantizedVector& query, std::size_t wanted, std::size_t expansion,
                             const NodeFilter* filter, const NodeColumns& columns, std::size_t context,
                             std::vector<ScoredNode>& out) const;

  private:
    bool find(const QuantizedVector& query, std::size_t wanted, std::size_t expansion, const NodeFilter* filter,
              const NodeColumns& columns, std::size_t context, bool usearch_loop, std::vector<ScoredNode>& out,
              std::size_t scan_nodes) const;

    struct Impl;
    const VectorStore& store_;
    HnswParams params_;
    std::atomic<std::size_t> count_reindexed_{0};  // members that repeat a node (upserts)
    std::atomic<std::size_t> reserved_{0};         // reserved by reserve_more, not yet added
    std::atomic<std::size_t> inserting_{0};             // add_nodes() calls running
    std::atomic<bool> has_entry_{false};           // the first member's add has returned (it is the entry point)
    std::atomic<bool> needs_relink_{false};        // suspect_slots_ is not empty
    std::atomic<std::size_t> count_relinked_{0};
    std::mutex adds_mutex_;                        // guards the four below
    std::size_t active_adds_ = 0;                  // add_nodes() calls in their insert loop
    bool adds_overlapped_ = false;                 // since active_adds_ was last 0, inserts ran side by side
    std::vector<std::uint32_t> suspect_slots_;     // members added side by side, not yet checked
    std::size_t suspects_promised_ = 0;            // room kept in suspect_slots_ for the adds running
    std::atomic<bool> insert_buffers_pending_{false};  // the index grew but its insert buffers did not (reserve_more)
    std::unique_ptr<Impl> impl_;
};

}  // namespace vecgraph
