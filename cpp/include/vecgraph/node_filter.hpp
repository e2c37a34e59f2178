// Node filter: label, tenant and timestamp conditions applied to every node a search
// reaches (inside the HNSW seed search and during traversal, not after them).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "vecgraph/types.hpp"

namespace vecgraph {

struct NodeColumns {
    const label_id_t* labels = nullptr;
    const tenant_id_t* tenants = nullptr;
    const std::int64_t* ts = nullptr;
    const std::uint8_t* dead = nullptr;  // one flag per node (deleted), or nullptr when no node is deleted
};

class NodeFilter {
  public:
    /// Clears every condition: everything passes.
    void reset() noexcept {
        by_label_ = by_tenant_ = by_ts_ = false;
        ts_min_ = std::numeric_limits<std::int64_t>::min();
        ts_max_ = std::numeric_limits<std::int64_t>::max();
    }
    /// Admits only labels whose flag is set in the returned mask (indexed by label id; the
    /// caller fills it, e.g. with Interner::mask_of). An all-zero mask admits nothing.
    std::vector<std::uint8_t>& allow_labels() noexcept {
        by_label_ = true;
        return label_ok_;
    }
    /// Likewise for tenants.
    std::vector<std::uint8_t>& allow_tenants() noexcept {
        by_tenant_ = true;
        return tenant_ok_;
    }
    /// Admits ts in [ts_min, ts_max], both inclusive.
    void set_ts_range(std::int64_t ts_min, std::int64_t ts_max) noexcept {
        by_ts_ = true;
        ts_min_ = ts_min;
        ts_max_ = ts_max;
    }
    bool active() const noexcept { return by_label_ || by_tenant_ || by_ts_; }

    /// True when admits() must be called: a condition is set or some node is deleted.
    bool needed(const NodeColumns& nodes) const noexcept { return active() || nodes.dead; }
    bool admits(const NodeColumns& nodes, node_id_t node) const noexcept {
        if (nodes.dead && nodes.dead[node]) return false;
        if (by_label_ && !label_ok_[nodes.labels[node]]) return false;
        if (by_tenant_ && !tenant_ok_[nodes.tenants[node]]) return false;
        if (by_ts_ && (nodes.ts[node] < ts_min_ || nodes.ts[node] > ts_max_)) return false;
        return true;
    }

  private:
    bool by_label_ = false, by_tenant_ = false, by_ts_ = false;
    std::vector<std::uint8_t> label_ok_, tenant_ok_;
    std::int64_t ts_min_ = std::numeric_limits<std::int64_t>::min();
    std::int64_t ts_max_ = std::numeric_limits<std::int64_t>::max();
};

}  // namespace vecgraph
