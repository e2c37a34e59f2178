// Updates and the tenant an upsert keeps (engine.hpp, "Writes"): the columns a write leaves as
// they are, read from the graph before the write is checked and logged (writer lock held).
#include <algorithm>

#include "engine_internal.hpp"

namespace vecgraph {

Result<NodeBatch> Engine::keep_columns(const NodeBatch& batch, NodeWrite mode, KeptColumns& kept) const {
    const bool update = mode == NodeWrite::update;
    if (mode == NodeWrite::add || (!update && batch.tenants)) return batch;
    if (!batch.keys) return Status::invalid_argument("update_nodes needs keys");
    std::vector<node_id_t>& nodes = kept.nodes;
    nodes.assign(batch.count, invalid_id);
    keys_.find_many(batch.keys, batch.count, nodes.data());
    if (update) {
        for (std::size_t i = 0; i < batch.count; ++i)
            if (nodes[i] == invalid_id)
                return Status::not_found("key " + display_key(batch.keys[i]) + " (row " + std::to_string(i) +
                                         ") is not in the graph; update_nodes changes existing nodes (upsert_nodes adds)");
    } else if (std::none_of(nodes.begin(), nodes.end(), [](node_id_t node) { return node != invalid_id; })) {
        return batch;  // an upsert of new keys only: every tenant is ""
    }
    // A key repeated in the batch is refused by prepare_nodes, after this.
    NodeBatch out = batch;
    auto keep_strings = [&](std::vector<std::string>& column, auto value_of) {
        column.reserve(batch.count);
        for (node_id_t node : nodes) column.emplace_back(node == invalid_id ? std::string() : std::string(value_of(node)));
        return column.data();
    };
    if (!batch.tenants)
        out.tenants = keep_strings(kept.tenants, [&](node_id_t node) { return tenants_.name(node_tenants_[node]); });
    if (!update) return out;
    if (!batch.labels)
        out.labels = keep_strings(kept.labels, [&](node_id_t node) { return labels_.name(node_labels_[node]); });
    if (!batch.texts) out.texts = keep_strings(kept.texts, [&](node_id_t node) { return node_texts_[node]; });
    if (!batch.props) out.props = keep_strings(kept.props, [&](node_id_t node) { return node_props_[node]; });
    if (!batch.ts) {
        kept.ts.reserve(batch.count);
        for (node_id_t node : nodes) kept.ts.push_back(node_ts_[node]);
        out.ts = kept.ts.data();
    }
    if (!batch.vectors && !batch.rows) {
        const std::size_t stride = node_vectors_.row_bytes();
        kept.rows.resize(batch.count * stride);
        for (std::size_t i = 0; i < batch.count; ++i) node_vectors_.copy_row(nodes[i], kept.rows.data() + i * stride);
        out.rows = kept.rows.data();
    }
    return out;
}

}  // namespace vecgraph
