// Durability and checks (engine.hpp): the WAL a graph writes to, replay of a WAL, the state a
// snapshot exports, and verify().
#include "vecgraph/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <utility>

#include "engine_internal.hpp"
#include "vecgraph/wal_records.hpp"

namespace vecgraph {

// ---------------------------------------------------------------------------------------------
// WAL.

Status Engine::attach_wal(const std::string& dir, const wal::Uuid& uuid, std::uint64_t next_lsn,
                          const wal::WriterOptions& options) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    if (wal_) return Status::invalid_argument("a WAL is already attached");
    auto opened = wal::Writer::open(dir, uuid, next_lsn, options);
    if (!opened.ok()) return opened.status();
    wal_ = std::move(opened).value();
    sync_policy_ = options.sync;
    last_lsn_.store(next_lsn - 1);
    read_only_.clear();
    refused_storage_ = false;
    return Status::OK();
}

Status Engine::sync() {
    std::unique_lock<std::mutex> writer(writer_mutex_);
    if (!wal_) return Status::OK();
    std::shared_ptr<wal::Writer> wal = wal_;
    writer.unlock();
    return wal->sync();
}

Status Engine::drop_wal_before(std::uint64_t lsn) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    if (!wal_) return Status::OK();
    return wal_->drop_segments_before(lsn);
}

Status Engine::close_wal() {
    wait_for_compaction();
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();  // their writes sync after the inserts
    if (!wal_) return Status::OK();
    Status status = wal_->sync();
    wal_.reset();
    read_only_ = "the graph is closed; open it again with vecgraph.Graph.open to write";
    return status;
}

void Engine::refuse_writes(std::string why, bool storage) {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    read_only_ = std::move(why);
    refused_storage_ = storage;
}

std::uint64_t Engine::last_lsn() const { return last_lsn_.load(); }

// ---------------------------------------------------------------------------------------------
// Replay.

Result<wal::RecoveryReport> Engine::replay_wal(const std::string& dir, const wal::Uuid& uuid, std::uint64_t from_lsn,
                                               bool truncate_tail, const std::string& tail_marker_path) {
    bool was_deferring = defer_index_;
    begin_deferral();
    replaying_ = true;
    auto report = wal::recover(
        dir, uuid, from_lsn,
        [this](std::uint8_t type, std::uint8_t /*flags*/, std::uint64_t lsn, std::string_view payload) {
            return replay_record(type, lsn, payload);
        },
        truncate_tail, tail_marker_path);
    replaying_ = false;
    // Index the replayed nodes in one parallel pass (deleted ones are left out: never returned),
    // unless the caller keeps deferring.
    if (!was_deferring) VG_RETURN_IF_ERROR(flush_deferred());
    // The state is at from_lsn - 1 (the snapshot's LSN) when no record follows it; a graph that
    // attaches no WAL afterwards (opened read-only) reports it as its last LSN.
    if (report.ok()) last_lsn_.store(std::max<std::uint64_t>(report.value().last_lsn, from_lsn ? from_lsn - 1 : 0));
    return report;
}

Status Engine::replay_record(std::uint8_t type, std::uint64_t lsn, std::string_view payload) {
    auto bad = [&](const std::string& why) {
        return Status::corruption("WAL record " + std::to_string(lsn) + " (type " + std::to_string(type) + "): " + why);
    };
    auto check = [&](Status status) {
        return status.ok() ? status : bad("it does not apply to the graph: " + status.message());
    };
    wal::PayloadReader in(payload);
    std::unique_lock<std::mutex> writer(writer_mutex_);
    switch (type) {
        case record::add_nodes:
        case record::upsert_nodes:
        case record::update_nodes: {
            std::uint32_t count = in.u32(), dim = in.u32(), stride = in.u32();
            if (in.failed() || dim != config_.dim || stride != node_vectors_.row_bytes())
                return bad("its vectors have dim " + std::to_string(dim) + ", the graph has dim " + std::to_string(config_.dim));
            if (count > in.remaining() / stride) return bad("its node count exceeds its size");
            std::vector<std::string> keys(count), labels(count), tenants(count), texts(count), props(count);
            std::vector<std::int64_t> ts(count);
            std::vector<std::int8_t> rows(static_cast<std::size_t>(count) * stride);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                keys[i] = in.str();
                labels[i] = in.str();
                tenants[i] = in.str();
                ts[i] = in.i64();
                texts[i] = in.str();
                props[i] = in.str();
                const char* row = in.bytes(stride);
                if (row) std::memcpy(rows.data() + static_cast<std::size_t>(i) * stride, row, stride);
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            NodeBatch batch;
            batch.count = count;
            batch.keys = keys.data();
            batch.rows = rows.data();
            batch.labels = labels.data();
            batch.tenants = tenants.data();
            batch.ts = ts.data();
            batch.texts = texts.data();
            batch.props = props.data();
            auto prepared = prepare_nodes(batch, type != record::add_nodes);
            if (!prepared.ok()) return check(prepared.status());
            prepared.value().reindex_replaced = type != record::update_nodes;
            VG_RETURN_IF_ERROR(check(apply_nodes(batch, prepared.value())));
            break;
        }
        case record::add_edges: {
            std::uint32_t count = in.u32(), dim = in.u32(), stride = in.u32();
            std::uint8_t has_vectors = in.u8();
            if (in.failed() || dim != config_.dim || stride != edge_vectors_.row_bytes())
                return bad("its vectors have dim " + std::to_string(dim) + ", the graph has dim " + std::to_string(config_.dim));
            if (count > in.remaining() / 30) return bad("its edge count exceeds its size");
            std::vector<std::string> src(count), dst(count), rels(count), texts(count), props(count);
            std::vector<float> weights(count);
            std::vector<std::int64_t> ts(count);
            std::vector<std::uint8_t> has(count, 0);
            std::vector<std::int8_t> rows(has_vectors ? static_cast<std::size_t>(count) * stride : 0);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                src[i] = in.str();
                dst[i] = in.str();
                rels[i] = in.str();
                weights[i] = in.f32();
                ts[i] = in.i64();
                texts[i] = in.str();
                props[i] = in.str();
                has[i] = in.u8();
                if (has[i]) {
                    if (!has_vectors) return bad("an edge has a vector in a batch without vectors");
                    const char* row = in.bytes(stride);
                    if (row) std::memcpy(rows.data() + static_cast<std::size_t>(i) * stride, row, stride);
                }
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            EdgeBatch batch;
            batch.count = count;
            batch.src = src.data();
            batch.dst = dst.data();
            batch.rels = rels.data();
            batch.weights = weights.data();
            batch.ts = ts.data();
            batch.texts = texts.data();
            batch.props = props.data();
            if (has_vectors) {
                batch.rows = rows.data();
                batch.has_vector = has.data();
            }
            auto prepared = prepare_edges(batch);
            if (!prepared.ok()) return check(prepared.status());
            VG_RETURN_IF_ERROR(check(apply_edges(batch, prepared.value())));
            if (config_.auto_compact_edges && count >= config_.auto_compact_edges) rebuild_base();
            break;
        }
        case record::delete_nodes: {
            std::uint32_t count = in.u32();
            if (in.failed() || count > in.remaining() / 4) return bad("its key count exceeds its size");
            std::vector<std::string> keys(count);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) keys[i] = in.str();
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            auto nodes = select_nodes(keys.data(), count, false);
            if (!nodes.ok()) return check(nodes.status());
            apply_node_deletes(nodes.value());
            break;
        }
        case record::delete_edges: {
            std::uint32_t count = in.u32();
            std::uint8_t has_rels = in.u8();
            if (in.failed() || count > in.remaining() / 8) return bad("its edge count exceeds its size");
            std::vector<std::string> src(count), dst(count), rels(has_rels ? count : 0);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                src[i] = in.str();
                dst[i] = in.str();
                if (has_rels) rels[i] = in.str();
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            EdgeSelection selection{count, src.data(), dst.data(), has_rels ? rels.data() : nullptr};
            auto edges = select_edges(selection, true);
            if (!edges.ok()) return check(edges.status());
            apply_edge_deletes(edges.value());
            break;
        }
        case record::delete_tenant: {
            std::string tenant = in.str();
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            apply_node_deletes(tenant_nodes(tenant));
            break;
        }
        case record::set_aliases: {
            std::uint32_t count = in.u32();
            if (in.failed() || count > in.remaining() / 8) return bad("its key count exceeds its size");
            std::vector<std::string> keys(count), aliases(count);
            for (std::uint32_t i = 0; i < count && !in.failed(); ++i) {
                keys[i] = in.str();
                aliases[i] = in.str();
            }
            if (in.failed() || !in.done()) return bad("its payload is malformed");
            auto nodes = alias_targets(keys.data(), count);
            if (!nodes.ok()) return check(nodes.status());
            apply_aliases(nodes.value(), aliases.data());
            break;
        }
        case static_cast<std::uint8_t>(wal::RecordType::checkpoint):
            break;  // a marker: nothing to apply
        default:
            return bad("the record type is unknown to this version");
    }
    if (text_changed_) {
        last_text_lsn_.store(lsn);
        text_changed_ = false;
    }
    last_lsn_.store(lsn);
    return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Snapshots: the state at one LSN.

void Engine::pause_writes(const std::function<void()>& fn) const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();  // a snapshot's seed index holds every node it holds
    fn();
}

Result<ExportedState> Engine::export_state(bool roll_wal) {
    // Called inside pause_writes: no append can run. Start a new WAL segment at the next LSN,
    // so that once the snapshot is committed every older segment can be dropped.
    if (wal_ && roll_wal) {
        Status rolled = wal_->roll_segment();
        if (!rolled.ok()) {
            if (read_only_.empty())
                read_only_ = "the WAL could not start a new segment (" + rolled.message() +
                             "); the graph is read-only, reopen it to recover";
            return rolled;
        }
    }
    auto lock = read_lock();
    ExportedState state;
    state.lsn = last_lsn_.load();
    std::vector<std::uint32_t> position(keys_.count_ids(), invalid_id);
    for (std::size_t n = 0; n < keys_.count_ids(); ++n)
        if (!node_dead_[n]) {
            position[n] = static_cast<std::uint32_t>(state.nodes.size());
            state.nodes.push_back(static_cast<node_id_t>(n));
        }
    for (std::size_t e = 0; e < edge_src_.size(); ++e)
        if (!edge_dead_[e]) {
            state.edges.push_back(static_cast<edge_id_t>(e));
            state.edge_src.push_back(position[edge_src_[e]]);
            state.edge_dst.push_back(position[edge_dst_[e]]);
        }
    return state;
}

// ---------------------------------------------------------------------------------------------
// Checks.

std::vector<std::string> Engine::verify(std::size_t limit) const {
    std::lock_guard<std::mutex> writer(writer_mutex_);
    wait_for_inserts_in_flight();
    auto lock = read_lock();
    std::vector<std::string> problems;
    auto report = [&](std::string line) {
        if (problems.size() < limit) problems.push_back(std::move(line));
    };
    const std::size_t n = keys_.count_ids(), m = edge_src_.size();
    auto text = [](std::size_t v) { return std::to_string(v); };

    // Column lengths.
    for (auto [name, size] : {std::pair<const char*, std::size_t>{"labels", node_labels_.size()},
                              {"tenants", node_tenants_.size()}, {"ts", node_ts_.size()},
                              {"texts", node_texts_.size()}, {"props", node_props_.size()},
                              {"vectors", node_vectors_.size()}, {"tombstones", node_dead_.size()},
                              {"delta slots", delta_.slot.size()}})
        if (size != n) report(std::string("node column ") + name + " holds " + text(size) + " rows, not " + text(n));
    for (auto [name, size] : {std::pair<const char*, std::size_t>{"dst", edge_dst_.size()},
                              {"rels", edge_rels_.size()}, {"weights", edge_weights_.size()},
                              {"ts", edge_ts_.size()}, {"texts", edge_texts_.size()}, {"props", edge_props_.size()},
                              {"tombstones", edge_dead_.size()}})
        if (size != m) report(std::string("edge column ") + name + " holds " + text(size) + " rows, not " + text(m));
    if (!problems.empty()) return problems;  // the checks below index these columns

    // Nodes: key map, tombstones, interned ids, vector rows.
    std::size_t dead_nodes = 0;
    for (std::size_t v = 0; v < n; ++v) {
        dead_nodes += node_dead_[v] != 0;
        if (node_labels_[v] >= labels_.size()) report("node " + text(v) + " has label id " + text(node_labels_[v]) + " beyond the labels");
        if (node_tenants_[v] >= tenants_.size()) report("node " + text(v) + " has tenant id " + text(node_tenants_[v]) + " beyond the tenants");
        if (!std::isfinite(node_vectors_.scale(v)) || !std::isfinite(node_vectors_.sq_norm(v)))
            report("node " + text(v) + " has a non-finite vector scale or norm");
    }
    if (dead_nodes != count_dead_nodes_)
        report(text(dead_nodes) + " nodes are flagged deleted but the count says " + text(count_dead_nodes_));
    // Member lists: every live node in its label's and tenant's list; live counts exact.
    auto check_members = [&](const char* name, const detail::MemberLists& members,
                             const std::vector<std::uint32_t>& column, std::size_t ids) {
        std::vector<std::size_t> live(ids, 0);
        for (std::size_t v = 0; v < n; ++v)
            if (!node_dead_[v] && column[v] < ids) ++live[column[v]];
        std::vector<node_id_t> listed;
        for (std::uint32_t id = 0; id < ids; ++id) {
            if (members.live(id) != live[id])
                report(std::string(name) + " " + text(id) + " counts " + text(members.live(id)) + " live members, not " +
                       text(live[id]));
            listed.clear();
            for (node_id_t v : members.list(id)) {
                if (v >= n) report(std::string(name) + " " + text(id) + " lists node " + text(v) + " beyond the nodes");
                else if (!node_dead_[v] && column[v] == id) listed.push_back(v);
            }
            std::sort(listed.begin(), listed.end());
            listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
            if (listed.size() != live[id])
                report(std::string(name) + " " + text(id) + " lists " + text(listed.size()) + " of its " + text(live[id]) +
                       " live nodes");
        }
    };
    check_members("label", label_members_, node_labels_, labels_.size());
    check_members("tenant", tenant_members_, node_tenants_, tenants_.size());
    if (keys_.size() != n - dead_nodes)
        report("the key map holds " + text(keys_.size()) + " keys for " + text(n - dead_nodes) + " live nodes");
    keys_.for_each_live([&](node_id_t node, std::string_view key) {
        if (node >= n) return report("key " + display_key(key) + " maps to node " + text(node) + " beyond the nodes");
        if (node_dead_[node]) report("key " + display_key(key) + " maps to deleted node " + text(node));
        if (keys_.find(key) != node) report("key " + display_key(key) + " of node " + text(node) + " is not found by lookup");
    });

    // Edges: endpoints, rels, tombstones.
    std::size_t dead_edges = 0;
    for (std::size_t e = 0; e < m; ++e) {
        dead_edges += edge_dead_[e] != 0;
        if (edge_src_[e] >= n || edge_dst_[e] >= n) { report("edge " + text(e) + " names a node beyond the nodes"); continue; }
        if (edge_rels_[e] >= rels_.size()) report("edge " + text(e) + " has rel id " + text(edge_rels_[e]) + " beyond the rels");
        if (!edge_dead_[e] && (node_dead_[edge_src_[e]] || node_dead_[edge_dst_[e]]))
            report("edge " + text(e) + " is live but an endpoint is deleted");
        if (!edge_vector_rows_.empty() && edge_vector_rows_[e] != invalid_id && edge_vector_rows_[e] >= edge_vectors_.size())
            report("edge " + text(e) + " names vector row " + text(edge_vector_rows_[e]) + " beyond the edge vectors");
    }
    if (dead_edges != count_dead_edges_)
        report(text(dead_edges) + " edges are flagged deleted but the count says " + text(count_dead_edges_));
    if (!problems.empty()) return problems;

    // Adjacency: base CSR plus delta hold every live edge once per direction, in traversal order,
    // with the endpoints, weight and rel of the edge columns.
    std::vector<std::uint8_t> seen_out(m, 0), seen_in(m, 0);
    auto check_list = [&](const char* where, node_id_t u, const AdjEntry* begin, const AdjEntry* end, bool out,
                          std::vector<std::uint8_t>& seen) {
        for (const AdjEntry* a = begin; a != end; ++a) {
            if (a->edge >= m) { report(std::string(where) + " entry at node " + text(u) + " names edge " + text(a->edge) + " beyond the edges"); return; }
            node_id_t from = out ? edge_src_[a->edge] : edge_dst_[a->edge], to = out ? edge_dst_[a->edge] : edge_src_[a->edge];
            if (from != u || to != a->neighbor || edge_weights_[a->edge] != a->weight || edge_rels_[a->edge] != a->rel)
                report(std::string(where) + " entry at node " + text(u) + " disagrees with edge " + text(a->edge));
            if (a != begin && !comes_before(a[-1], *a))
                report(std::string(where) + " entries at node " + text(u) + " are not in (weight desc, edge id asc) order");
            if (seen[a->edge]++) report("edge " + text(a->edge) + " appears twice in the " + where + " adjacency");
        }
    };
    for (int direction = 0; direction < 2; ++direction) {
        bool out = direction == 0;
        const Adjacency& adj = out ? csr_.out() : csr_.in();
        const char* where = out ? "CSR out" : "CSR in";
        std::vector<std::uint8_t>& seen = out ? seen_out : seen_in;
        if (csr_.count_nodes() > n) report(std::string(where) + " covers " + text(csr_.count_nodes()) + " nodes, the graph has " + text(n));
        if (adj.offsets.empty() && adj.entries.empty() && csr_.count_nodes() == 0) {
            // no base CSR yet
        } else if (adj.offsets.size() != csr_.count_nodes() + 1) {
            report(std::string(where) + " offsets have the wrong length");
        } else if (adj.offsets.front() != 0 || adj.offsets.back() != adj.entries.size()) {
            report(std::string(where) + " offsets do not span the entries");
        } else if (!std::is_sorted(adj.offsets.begin(), adj.offsets.end())) {
            report(std::string(where) + " offsets decrease");
        } else {
            for (std::size_t u = 0; u < csr_.count_nodes(); ++u)
                check_list(where, static_cast<node_id_t>(u), adj.entries.data() + adj.offsets[u],
                           adj.entries.data() + adj.offsets[u + 1], out, seen);
        }
        std::size_t delta_entries = 0;
        for (std::size_t i = 0; i < delta_.lists.size(); ++i) {
            const DeltaAdjacency::Lists& lists = delta_.lists[i];
            const node_id_t u = lists.node;
            const std::vector<AdjEntry>& list = out ? lists.out : lists.in;
            delta_entries += list.size();
            if (u >= n) { report(std::string("delta entry at node ") + text(u) + " beyond the nodes"); continue; }
            if (out && delta_.slot[u] != i + 1)
                report("node " + text(u) + " has delta edges but its delta slot is " + text(delta_.slot[u]));
            check_list(out ? "delta out" : "delta in", u, list.data(), list.data() + list.size(), out, seen);
        }
        if (delta_entries != delta_.count_edges)
            report(std::string(out ? "delta out" : "delta in") + " holds " + text(delta_entries) + " entries, the count says " + text(delta_.count_edges));
        if (out) {
            const std::size_t slots_set = delta_.slot.size() - static_cast<std::size_t>(std::count(delta_.slot.begin(), delta_.slot.end(), 0u));
            if (slots_set != delta_.lists.size())
                report(text(slots_set) + " nodes have a delta slot, but the delta holds " + text(delta_.lists.size()) + " nodes' lists");
        }
    }
    for (std::size_t e = 0; e < m; ++e)
        if (!edge_dead_[e] && (!seen_out[e] || !seen_in[e]))
            report("live edge " + text(e) + " is missing from the " + (seen_out[e] ? "in" : "out") + " adjacency");

    // Seed index against the store: every live node that is not waiting is a member.
    std::vector<std::uint8_t> skip(node_dead_);
    for (node_id_t v : deferred_hnsw_) skip[v] = 1;
    if (background_.running.load(std::memory_order_acquire))
        for (std::size_t i = background_.done.load(std::memory_order_acquire); i < background_.nodes.size(); ++i)
            skip[background_.nodes[i]] = 1;
    std::unique_lock<std::shared_mutex> still(hnsw_walk_mutex_);  // no add in flight (a pass may run)
    for (auto& line : seed_index_->verify(n, skip.data(), limit > problems.size() ? limit - problems.size() : 0))
        report(std::move(line));
    return problems;
}

}  // namespace vecgraph
