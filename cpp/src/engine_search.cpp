// Graph-guided search (engine.hpp; the rules: traversal.hpp): request checks, filters, seeds
// (HNSW, exact and member-list scans), expansion and scoring.
#include "vecgraph/engine.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "engine_internal.hpp"
#include "vecgraph/detail/ranges.hpp"
#include "vecgraph/simd/kernels.hpp"

namespace vecgraph {

namespace {

// A double as a user wrote it (0.5, -1, 1e-300), for error messages.
std::string format_real(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.15g", value);
    if (std::strtod(text, nullptr) != value) std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

// Seeds rank by score, then by node id (a total order). A function object, so that the heap
// algorithms inline it.
struct RanksBefore {
    bool operator()(const ScoredNode& a, const ScoredNode& b) const {
        return a.score != b.score ? a.score > b.score : a.node < b.node;
    }
};
constexpr RanksBefore ranks_before{};

// Keeps the best `wanted` candidates offered in a heap whose front is the worst kept.
void offer_best(std::vector<ScoredNode>& heap, std::size_t wanted, const ScoredNode& candidate) {
    if (heap.size() < wanted) {
        heap.push_back(candidate);
        std::push_heap(heap.begin(), heap.end(), ranks_before);
    } else if (ranks_before(candidate, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), ranks_before);
        heap.back() = candidate;
        std::push_heap(heap.begin(), heap.end(), ranks_before);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Search.

Status Engine::validate(const SearchRequest& r) const {
    auto positive = [](const char* name, std::int64_t value) {
        return value >= 1 ? Status::OK()
                          : Status::invalid_argument(std::string(name) + " must be >= 1, got " + std::to_string(value));
    };
    VG_RETURN_IF_ERROR(positive("k", r.k));
    if (!(r.seeds == 0 && !r.extra_seeds.empty()))  // seeds 0: only the extra (named) seeds
        VG_RETURN_IF_ERROR(positive("seeds", r.seeds));
    VG_RETURN_IF_ERROR(positive("max_visited", r.max_visited));
    VG_RETURN_IF_ERROR(positive("max_fanout", r.max_fanout));
    if (r.hops < 0) return Status::invalid_argument("hops must be >= 0, got " + std::to_string(r.hops));
    if (r.min_hop < 0) return Status::invalid_argument("min_hop must be >= 0, got " + std::to_string(r.min_hop));
    if (!r.seed_weights.empty()) {
        if (r.seeds != 0 || r.seed_weights.size() != r.extra_seeds.size())
            return Status::invalid_argument("seed_weights needs seeds=0 and one weight per extra seed: got " +
                                            std::to_string(r.seed_weights.size()) + " weights, " +
                                            std::to_string(r.extra_seeds.size()) + " extra seeds, seeds=" +
                                            std::to_string(r.seeds));
        for (float w : r.seed_weights)
            if (!std::isfinite(w) || w < 0.f)
                return Status::invalid_argument("seed_weights must be finite and >= 0, got " + format_real(w));
    }
    if (r.ef < 0) return Status::invalid_argument("ef must be >= 0 (0: the graph's default), got " + std::to_string(r.ef));
    if (!std::isfinite(r.hop_decay) || r.hop_decay <= 0.0)
        return Status::invalid_argument("hop_decay must be a finite number > 0, got " + format_real(r.hop_decay));
    if (r.ts_min > r.ts_max)
        return Status::invalid_argument("ts_min (" + std::to_string(r.ts_min) + ") is after ts_max (" +
                                        std::to_string(r.ts_max) + ")");
    for (const auto& q : r.where) {
        std::size_t p = prop_index(q.name);
        if (p == SIZE_MAX) return Status::invalid_argument("where: " + declared_props_text(q.name));
        bool is_str = config_.filterable[p].type == PropType::str;
        bool has_range = q.int_min != INT64_MIN || q.int_max != INT64_MAX || q.real_min != -HUGE_VAL || q.real_max != HUGE_VAL;
        if (is_str && has_range)
            return Status::invalid_argument("where: '" + q.name + "' is a str property; it takes values, not a range");
        if (is_str && q.in_set)
            return Status::invalid_argument("where: '" + q.name + "' is a str property; it takes strings, not numbers");
        if (!is_str && !q.strings.empty())
            return Status::invalid_argument("where: '" + q.name + "' is a " + prop_type_name(config_.filterable[p].type) +
                                            " property; it takes numbers, not strings");
    }
    return Status::OK();
}

std::size_t Engine::prop_index(const std::string& name) const {
    for (std::size_t p = 0; p < config_.filterable.size(); ++p)
        if (config_.filterable[p].name == name) return p;
    return SIZE_MAX;
}

std::string Engine::declared_props_text(const std::string& name) const {
    std::string text = "'" + name + "' is not a filterable property; ";
    if (config_.filterable.empty()) return text + "none was declared when the graph was created";
    text += "declared: ";
    for (std::size_t p = 0; p < config_.filterable.size(); ++p)
        text += (p ? ", " : "") + config_.filterable[p].name + " (" + prop_type_name(config_.filterable[p].type) + ")";
    return text;
}

Status Engine::validate_queries(const float* queries, std::size_t count, std::size_t dim) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("queries have dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    for (std::size_t i = 0; i < count; ++i)
        VG_RETURN_IF_ERROR(validate_vector(queries + i * dim, dim, config_.metric, "queries", i));
    return Status::OK();
}

Result<SearchResult> Engine::search(const float* query, std::size_t dim, const SearchRequest& request) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("query has dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    VG_RETURN_IF_ERROR(validate(request));
    VG_RETURN_IF_ERROR(validate_vector(query, dim, config_.metric, "query", 0));
    auto lock = read_lock();
    detail::ContextPool::Lease lease(contexts_);
    SearchResult result;
    VG_RETURN_IF_ERROR(search_locked(query, request, lease.slot(), result));
    return result;
}

Result<std::vector<std::uint8_t>> Engine::admits(const std::string* keys, std::size_t count,
                                                  const SearchRequest& request) const {
    VG_RETURN_IF_ERROR(validate(request));
    auto lock = read_lock();
    // A search context's filter: its masks are reused, so a call costs O(names listed) rather
    // than O(names interned) (hybrid search checks each BM25 candidate with one call).
    detail::ContextPool::Lease lease(contexts_);
    NodeFilter& filter = scratch_[lease.slot()].filter;
    build_filter(request, filter);
    const NodeColumns columns = node_columns();
    std::vector<std::uint8_t> out(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
        const node_id_t node = keys_.find(keys[i]);
        if (node == invalid_id || node_dead_[node]) continue;
        out[i] = filter.admits(columns, node) ? 1 : 0;
    }
    return out;
}

Result<bool> Engine::admitted_keys(const SearchRequest& request, std::size_t limit,
                                   std::vector<std::string>& keys) const {
    keys.clear();
    VG_RETURN_IF_ERROR(validate(request));
    auto lock = read_lock();
    detail::ContextPool::Lease lease(contexts_);
    TraversalScratch& scratch = scratch_[lease.slot()];
    NodeFilter& filter = scratch.filter;
    build_filter(request, filter);
    const NodeColumns columns = node_columns();
    const std::size_t rows = keys_.count_ids();
    std::vector<node_id_t> nodes;
    if ((request.filter_labels || request.filter_tenants) && filter_lists(request, limit, scratch) <= limit) {
        scratch.begin(rows);
        admitted_in_lists(scratch.member_lists, filter, columns, scratch, nodes);
        if (nodes.size() > limit) return false;
        std::sort(nodes.begin(), nodes.end());  // the lists are per label or tenant: back to node id order
    } else {
        for (std::size_t row = 0; row < rows; ++row) {
            const auto node = static_cast<node_id_t>(row);
            if (!filter.admits(columns, node)) continue;
            if (nodes.size() == limit) return false;  // stops early on a broad filter
            nodes.push_back(node);
        }
    }
    keys.reserve(nodes.size());
    for (node_id_t node : nodes) keys.emplace_back(keys_.key(node));
    return true;
}

Result<std::vector<float>> Engine::score_edges(const float* query, std::size_t dim, const edge_id_t* edges,
                                               std::size_t count) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("query has dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    VG_RETURN_IF_ERROR(validate_vector(query, dim, config_.metric, "query", 0));
    QuantizedVector q;
    node_vectors_.quantize_into(query, q);
    auto lock = read_lock();
    const simd::dot_i8_fn dot = simd::active().dot_i8;
    std::vector<float> out(count, std::numeric_limits<float>::quiet_NaN());
    for (std::size_t i = 0; i < count; ++i) {
        if (edges[i] >= edge_src_.size()) return Status::invalid_argument("edge id " + std::to_string(edges[i]) + " out of range");
        std::uint32_t row = edge_vector_rows_.empty() ? invalid_id : edge_vector_rows_[edges[i]];
        if (row == invalid_id) continue;
        std::int32_t product = dot(q.codes.data(), edge_vectors_.codes(row), config_.dim);
        out[i] = score_from_dot(config_.metric, product, q.scale, q.sq_norm, edge_vectors_.scale(row),
                                edge_vectors_.sq_norm(row));
    }
    return out;
}

Result<std::vector<SearchResult>> Engine::search_batch(const float* queries, std::size_t count, std::size_t dim,
                                                       const SearchRequest& request, std::size_t threads) const {
    if (dim != config_.dim)
        return Status::dimension_mismatch("queries have dim " + std::to_string(dim) + ", graph has dim " +
                                          std::to_string(config_.dim));
    VG_RETURN_IF_ERROR(validate(request));
    VG_RETURN_IF_ERROR(validate_queries(queries, count, dim));
    auto lock = read_lock();
    std::vector<SearchResult> results(count);
    threads = std::max<std::size_t>(1, std::min({default_threads(threads), count, count_context_slots}));
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        detail::ContextPool::Lease lease(contexts_);
        for (std::size_t i; (i = next.fetch_add(1)) < count;)
            (void)search_locked(queries + i * dim, request, lease.slot(), results[i]);  // validated above
    };
    detail::run_on_threads(threads, worker);  // out of memory on any thread: std::bad_alloc here
    return results;
}

Status Engine::search_locked(const float* query, const SearchRequest& request, std::size_t slot,
                             SearchResult& result) const {
    TraversalScratch& scratch = scratch_[slot];
    std::size_t count = keys_.count_ids();
    scratch.begin(count);
    result = SearchResult{};
    result.path_offsets.push_back(0);
    if (count == count_dead_nodes_) return Status::OK();

    NodeFilter& filter = scratch.filter;
    build_filter(request, filter);
    const NodeColumns columns = node_columns();
    const NodeFilter* active_filter = filter.needed(columns) ? &filter : nullptr;

    // Seeds.
    node_vectors_.quantize_into(query, scratch.query);
    auto wanted_seeds = static_cast<std::size_t>(request.seeds);
    scratch.seeds.clear();
    if (wanted_seeds == 0) {
        // Only the extra seeds below.
    } else if (request.exact || count <= full_scan_max_nodes()) {
        count_seed_full_scans_.fetch_add(1, std::memory_order_relaxed);
        exact_seeds(scratch.query, wanted_seeds, active_filter, columns, scratch);
    } else if (const std::size_t most = filter_scan_limit(filter_scan_max_nodes(), count);
               most > 0 && filter_lists(request, most, scratch) <= most) {
        // A label or tenant filter that admits few nodes: HNSW would walk past many rejected
        // nodes for each admitted one; a scan of those few nodes is faster, and exact.
        count_seed_list_scans_.fetch_add(1, std::memory_order_relaxed);
        listed_seeds(scratch.query, wanted_seeds, scratch.member_lists, filter, columns, scratch);
    } else {
        count_seed_hnsw_searches_.fetch_add(1, std::memory_order_relaxed);
        // Any filter (where=, ts, a label or tenant with too many nodes for its lists) that the
        // walk finds to admit very few nodes: the walk gives up and the seeds come from an exact
        // scan, as with exact=True (off with filter_scan_max_nodes 0: HNSW always).
        const std::size_t scan_nodes = filter.active() && most > 0 ? count : 0;
        if (seed_index_->search(scratch.query, wanted_seeds, static_cast<std::size_t>(request.ef), active_filter,
                                columns, slot, scratch.seeds, scan_nodes)) {
            if (background_.running.load(std::memory_order_acquire))
                unindexed_seeds(scratch.query, wanted_seeds, active_filter, columns, scratch);
        } else {
            count_seed_scan_fallbacks_.fetch_add(1, std::memory_order_relaxed);
            exact_seeds(scratch.query, wanted_seeds, active_filter, columns, scratch);
        }
    }
    if (!request.extra_seeds.empty()) {
        // Named seeds first (in the order given), scored like any node; then the similarity seeds.
        std::vector<ScoredNode> named;
        const bool weighted = !request.seed_weights.empty();
        if (weighted) scratch.seed_weights.clear();
        const simd::dot_i8_fn dot = simd::active().dot_i8;
        for (std::size_t e = 0; e < request.extra_seeds.size(); ++e) {
            const std::string& key = request.extra_seeds[e];
            const node_id_t node = keys_.find(key);
            if (node == invalid_id) continue;
            if ((active_filter && !active_filter->admits(columns, node)) || (!active_filter && node_dead_[node])) continue;
            bool seen = false;
            for (const ScoredNode& s : named) seen = seen || s.node == node;
            if (seen) continue;
            std::int32_t product = dot(scratch.query.codes.data(), node_vectors_.codes(node), config_.dim);
            named.push_back({node, score_from_dot(config_.metric, product, scratch.query.scale, scratch.query.sq_norm,
                                                  node_vectors_.scale(node), node_vectors_.sq_norm(node))});
            if (weighted) scratch.seed_weights.push_back(request.seed_weights[e]);
        }
        for (const ScoredNode& s : scratch.seeds) {
            bool seen = false;
            for (const ScoredNode& n : named) seen = seen || n.node == s.node;
            if (!seen) named.push_back(s);
        }
        scratch.seeds.swap(named);
    }
    result.count_seeds = scratch.seeds.size();
    return expand_and_score(request, scratch, columns, active_filter, result);
}

std::size_t Engine::filter_scan_limit(std::size_t setting, std::size_t rows) noexcept {
    if (setting != filter_scan_auto) return setting;
    // floor(sqrt(x)) for x up to 2^64 / 1000: the double estimate, corrected by one either way.
    const std::uint64_t x = static_cast<std::uint64_t>(filter_scan_auto_factor) * rows;
    auto root = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(x)));
    while (root > 0 && root * root > x) --root;
    while ((root + 1) * (root + 1) <= x) ++root;
    return std::max<std::size_t>(filter_scan_auto_floor, static_cast<std::size_t>(root));
}

std::size_t Engine::filter_scan_limit() const {
    auto lock = read_lock();
    return filter_scan_limit(filter_scan_max_nodes(), keys_.count_ids());
}

void Engine::build_filter(const SearchRequest& request, NodeFilter& filter) const {
    // Names the graph has never seen match nothing.
    filter.reset();
    if (request.filter_labels) labels_.mask_of(request.labels, filter.allow_labels());
    if (request.filter_tenants) tenants_.mask_of(request.tenants, filter.allow_tenants());
    if (request.ts_min != INT64_MIN || request.ts_max != INT64_MAX) filter.set_ts_range(request.ts_min, request.ts_max);
    if (!request.exclude.empty()) {
        IdMask& excluded = filter.exclude_nodes();
        excluded.fit(keys_.count_ids());
        for (const std::string& key : request.exclude) {
            const node_id_t node = keys_.find(key);
            if (node != invalid_id) excluded.allow(node);
        }
    }
    for (const auto& q : request.where) {
        PropCondition& condition = filter.add_prop_condition();
        condition.column = static_cast<std::uint32_t>(prop_index(q.name));  // checked by validate()
        if (config_.filterable[condition.column].type == PropType::str)
            prop_columns_[condition.column].strings.mask_of(q.strings, condition.str_ok);
        condition.int_min = q.int_min;
        condition.int_max = q.int_max;
        condition.real_min = q.real_min;
        condition.real_max = q.real_max;
        condition.in_set = q.in_set;
        condition.int_in = q.int_values;
        condition.real_in = q.real_values;
        std::sort(condition.int_in.begin(), condition.int_in.end());
        std::sort(condition.real_in.begin(), condition.real_in.end());
    }
}

Status Engine::expand_and_score(const SearchRequest& request, TraversalScratch& scratch, const NodeColumns& columns,
                                const NodeFilter* active_filter, SearchResult& result) const {
    TraversalParams params;
    params.k = static_cast<std::size_t>(request.k);
    params.hops = static_cast<std::size_t>(request.hops);
    params.max_visited = static_cast<std::size_t>(request.max_visited);
    params.max_fanout = static_cast<std::size_t>(request.max_fanout);
    params.direction = request.direction;
    params.hop_decay = request.hop_decay;
    params.min_hop = static_cast<std::size_t>(request.min_hop);
    if (!request.seed_weights.empty()) params.seed_weights = &scratch.seed_weights;
    if (request.filter_rels) {
        rels_.mask_of(request.rels, scratch.rel_ok);
        params.rel_ok = &scratch.rel_ok;
    }
    traverse_and_score(graph_view(), node_vectors_, columns, active_filter, params, scratch, result.hits);
    result.count_visited = scratch.visited.size();
    std::vector<edge_id_t>& path = scratch.path;
    for (const Hit& hit : result.hits) {
        path_to(scratch, hit.position, path);
        result.path_edges.insert(result.path_edges.end(), path.begin(), path.end());
        result.path_offsets.push_back(static_cast<std::uint32_t>(result.path_edges.size()));
    }
    return Status::OK();
}

namespace {
// Rows scored per kernel call by the exact seed scans. Gathered rows (member lists, a filter's
// admitted rows): few enough that a block's rows are still in L1/L2 when their scales are read
// right after (measured when a row's scale and squared norm shared its first cache line; they
// now sit in an array of their own, asked for with the row); with 4,096-row blocks each row was
// fetched from memory twice, and list scans of 10,000-30,000 rows of a 1,000,000-node
// graph took 1.18-1.23x as long. Consecutive rows: the hardware streams them, and 256-row blocks
// were 2-5% slower than 4,096.
constexpr std::size_t gather_block_rows = 64;
constexpr std::size_t scan_block_rows = 4096;
}  // namespace

void Engine::offer_rows(const QuantizedVector& query, const node_id_t* rows, std::size_t count, std::size_t wanted,
                        TraversalScratch& scratch) const {
    scratch.dots.resize(std::max(gather_block_rows, scan_block_rows));
    const std::size_t stride = node_vectors_.code_stride();
    for (std::size_t begin = 0; begin < count; begin += gather_block_rows) {
        const std::size_t end = std::min(count, begin + gather_block_rows);
        simd::active().dot_rows_i8(query.codes.data(), node_vectors_.codes_data(), stride, rows + begin, end - begin,
                                   config_.dim, scratch.dots.data());
        // The kernel asks for rows ahead only within a call: the next block's first rows are
        // asked for here, so that their misses overlap this block's scales.
        for (std::size_t j = end; j < std::min(count, end + 8); ++j)
            node_vectors_.prefetch_row_l2(rows[j]);
        for (std::size_t i = begin; i < end; ++i)
            offer_best(scratch.seeds, wanted,
                       {rows[i], score_from_dot(config_.metric, scratch.dots[i - begin], query.scale, query.sq_norm,
                                                node_vectors_.scale(rows[i]), node_vectors_.sq_norm(rows[i]))});
    }
}

void Engine::exact_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                         const NodeColumns& columns, TraversalScratch& scratch) const {
    // Brute force in blocks: the scan kernel over consecutive rows (or the gather kernel over the
    // admitted rows of a block), keeping the best `wanted` in a heap whose top is the worst kept.
    const std::size_t count = keys_.count_ids();
    std::vector<ScoredNode>& heap = scratch.seeds;
    heap.clear();
    scratch.dots.resize(std::max(gather_block_rows, scan_block_rows));
    for (std::size_t begin = 0; begin < count; begin += scan_block_rows) {
        const std::size_t end = std::min(count, begin + scan_block_rows);
        if (filter) {
            std::vector<node_id_t>& admitted = scratch.visited;  // borrowed; begin() resets it per query
            admitted.clear();
            for (std::size_t node = begin; node < end; ++node)
                if (filter->admits(columns, static_cast<node_id_t>(node))) admitted.push_back(static_cast<node_id_t>(node));
            offer_rows(query, admitted.data(), admitted.size(), wanted, scratch);
            continue;
        }
        simd::active().scan_i8(query.codes.data(), node_vectors_.codes(begin), node_vectors_.code_stride(), end - begin,
                               config_.dim, scratch.dots.data());
        for (std::size_t i = 0; i < end - begin; ++i) {
            const auto node = static_cast<node_id_t>(begin + i);
            offer_best(heap, wanted, {node, score_from_dot(config_.metric, scratch.dots[i], query.scale, query.sq_norm,
                                                           node_vectors_.scale(node), node_vectors_.sq_norm(node))});
        }
    }
    std::sort_heap(heap.begin(), heap.end(), ranks_before);  // best first
    scratch.visited.clear();
}

std::size_t Engine::filter_lists(const SearchRequest& request, std::size_t limit, TraversalScratch& scratch) const {
    // The lists of the ids the filter's masks admit (build_filter() set them, each id once), and
    // the live nodes they hold; past `limit` the count stops growing (and the lists are not used).
    std::vector<const std::vector<node_id_t>*>& lists = scratch.member_lists;
    auto gather = [&](const detail::MemberLists& members, const IdMask& mask,
                      std::vector<const std::vector<node_id_t>*>& out) {
        out.clear();
        std::size_t live = 0;
        for (std::uint32_t each : mask.ids()) {
            live += members.live(each);
            if (live > limit) break;
            out.push_back(&members.list(each));
        }
        return live;
    };
    constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    std::size_t by_tenant = none, by_label = none;
    if (request.filter_tenants) by_tenant = gather(tenant_members_, scratch.filter.tenant_mask(), lists);
    if (request.filter_labels && by_tenant > 0) {
        by_label = gather(label_members_, scratch.filter.label_mask(), scratch.member_lists_other);
        if (by_label < by_tenant) lists.swap(scratch.member_lists_other);
    }
    if (by_tenant == none && by_label == none) lists.clear();
    return std::min(by_tenant, by_label);
}

void Engine::admitted_in_lists(const std::vector<const std::vector<node_id_t>*>& lists, const NodeFilter& filter,
                               const NodeColumns& columns, TraversalScratch& scratch,
                               std::vector<node_id_t>& out) const {
    // The visited set marks the nodes while they are gathered, and is cleared again.
    out.clear();
    for (const std::vector<node_id_t>* list : lists)
        for (node_id_t node : *list)
            if (scratch.visit(node)) out.push_back(node);
    std::size_t admitted = 0;
    for (node_id_t node : out) {
        *scratch.seen_word(node) &= ~TraversalScratch::seen_bit(node);
        if (filter.admits(columns, node)) out[admitted++] = node;
    }
    out.resize(admitted);
}

void Engine::listed_seeds(const QuantizedVector& query, std::size_t wanted,
                          const std::vector<const std::vector<node_id_t>*>& lists, const NodeFilter& filter,
                          const NodeColumns& columns, TraversalScratch& scratch) const {
    // The admitted nodes of the lists, scored like exact_seeds' admitted rows.
    std::vector<node_id_t>& rows = scratch.visited;  // borrowed; begin() reset it for this query
    admitted_in_lists(lists, filter, columns, scratch, rows);
    scratch.seeds.clear();
    offer_rows(query, rows.data(), rows.size(), wanted, scratch);
    std::sort_heap(scratch.seeds.begin(), scratch.seeds.end(), ranks_before);  // best first
    rows.clear();
}

void Engine::unindexed_seeds(const QuantizedVector& query, std::size_t wanted, const NodeFilter* filter,
                             const NodeColumns& columns, TraversalScratch& scratch) const {
    // The nodes a background pass has not indexed yet, scored exactly (gather kernel) and merged
    // into the HNSW seeds in a heap of the best `wanted` by (score desc, id asc), each node once
    // (nodes of the chunk in flight may be among the HNSW seeds too).
    constexpr std::size_t block_rows = 4096;
    const std::size_t done = background_.done.load(std::memory_order_acquire);
    const node_id_t* pending = background_.nodes.data() + done;
    const std::size_t count = background_.nodes.size() - std::min(done, background_.nodes.size());
    if (count == 0 || wanted == 0) return;
    std::vector<ScoredNode>& heap = scratch.seeds;
    std::make_heap(heap.begin(), heap.end(), ranks_before);
    std::vector<node_id_t>& rows = scratch.visited;  // borrowed; begin() resets it per query
    scratch.dots.resize(block_rows);
    for (std::size_t begin = 0; begin < count; begin += block_rows) {
        const std::size_t end = std::min(count, begin + block_rows);
        rows.clear();
        for (std::size_t i = begin; i < end; ++i) {
            node_id_t node = pending[i];
            if (filter ? filter->admits(columns, node) : !node_dead_[node]) rows.push_back(node);
        }
        simd::active().dot_rows_i8(query.codes.data(), node_vectors_.codes_data(), node_vectors_.code_stride(),
                                   rows.data(), rows.size(), config_.dim, scratch.dots.data());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            ScoredNode candidate{rows[i], score_from_dot(config_.metric, scratch.dots[i], query.scale, query.sq_norm,
                                                         node_vectors_.scale(rows[i]), node_vectors_.sq_norm(rows[i]))};
            if (heap.size() >= wanted && !ranks_before(candidate, heap.front())) continue;
            // Already kept from HNSW (it scores the same there: no better copy can have been dropped).
            bool kept = false;
            for (const ScoredNode& s : heap) kept = kept || s.node == candidate.node;
            if (!kept) offer_best(heap, wanted, candidate);
        }
    }
    std::sort_heap(heap.begin(), heap.end(), ranks_before);  // best first
    rows.clear();
}

}  // namespace vecgraph
