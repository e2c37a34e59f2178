// What more than one of the engine's source files needs (engine.cpp, engine_write.cpp,
// engine_search.cpp, engine_recovery.cpp, engine_index.cpp, engine_compaction.cpp,
// engine_update.cpp): private to them, not installed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "vecgraph/engine.hpp"
#include "vecgraph/wal_format.hpp"

namespace vecgraph {

// Context slots (contexts_, scratch_): searches and HNSW inserts that may run at once.
inline constexpr std::size_t count_context_slots = 16;

// WAL record types written by the engine (wal_format.hpp; payloads: wal_records.hpp).
namespace record {
inline constexpr auto add_nodes = static_cast<std::uint8_t>(wal::RecordType::add_nodes);
inline constexpr auto add_edges = static_cast<std::uint8_t>(wal::RecordType::add_edges);
inline constexpr auto upsert_nodes = static_cast<std::uint8_t>(wal::RecordType::upsert_nodes);
inline constexpr auto delete_nodes = static_cast<std::uint8_t>(wal::RecordType::delete_nodes);
inline constexpr auto delete_edges = static_cast<std::uint8_t>(wal::RecordType::delete_edges);
inline constexpr auto delete_tenant = static_cast<std::uint8_t>(wal::RecordType::delete_tenant);
inline constexpr auto set_aliases = static_cast<std::uint8_t>(wal::RecordType::set_aliases);
inline constexpr auto update_nodes = static_cast<std::uint8_t>(wal::RecordType::update_nodes);
}

// Threads for bulk work: `threads`, or every core when 0.
inline std::size_t default_threads(std::size_t threads) {
    if (threads) return threads;
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
}

// A batch checked before it is logged (prepare_nodes, prepare_edges) and applied after
// (apply_nodes, apply_edges): by the write path, by replay, and by the HNSW inserts after a write.
struct Engine::PreparedNodes {
    std::vector<std::int8_t> rows;         // count x stride, quantized
    std::vector<node_id_t> existing;       // per row: the node an upsert replaces, or invalid_id
    std::size_t count_new = 0;
    // Per row, found before the exclusive lock; names new to the graph are interned by apply_nodes.
    std::vector<label_id_t> labels;
    std::vector<tenant_id_t> tenants;
    detail::BatchNames label_names, tenant_names;
    // Filterable property values, row-major (count x declared properties).
    struct PropValue {
        bool present = false;
        std::string text;
        std::int64_t integer = 0;
        double real = 0;
    };
    std::vector<PropValue> props;
    // Filled by apply_nodes when HNSW inserts are due (not deferred); finish_write runs them.
    std::vector<node_id_t> to_index;  // new nodes, then upserted ones (indexed again)
    std::size_t count_reindexed = 0;  // upserted nodes among them
    bool reindex_replaced = true;     // false: an update that kept the vectors (no HNSW insert)
};

// Columns an upsert or update keeps, read from the graph (Engine::keep_columns), and the
// nodes of the batch's keys when it looked them up (prepare_nodes then does not again).
struct Engine::KeptColumns {
    std::vector<node_id_t> nodes;
    std::vector<std::string> labels, tenants, texts, props;
    std::vector<std::int64_t> ts;
    std::vector<std::int8_t> rows;
};

struct Engine::PreparedEdges {
    std::vector<node_id_t> src, dst;
    std::vector<rel_id_t> rels;  // per edge (a name new to the graph: the id apply_edges interns it under)
    detail::BatchNames rel_names;  // the names new to the graph, interned by apply_edges
    std::vector<std::int8_t> rows;         // edge vector rows, when the batch has vectors
    std::vector<std::uint8_t> has_vector;  // per edge, when the batch has vectors
};

}  // namespace vecgraph
