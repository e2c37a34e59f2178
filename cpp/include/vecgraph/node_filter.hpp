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
};

class NodeFilter {
  public:
    /// Clears every condition: everything passes.
    void reset() noexcept {
        by_label_ = by_tenant_ = by_ts_ = false;
        ts_min_ = std::numeric_limits<std::int64_t>::min();
        ts_max_ = std::numeric_limits<std::int64_t>::max();
    }
    /// Admits only the given label ids (an empty list admits nothing). `count_labels` bounds the ids.
    void set_labels(const std::vector<label_id_t>& allowed, std::size_t count_labels) {
        by_label_ = true;
        label_ok_.assign(count_labels, 0);
        for (label_id_t id : allowed)
            if (id < count_labels) label_ok_[id] = 1;
    }
    void set_tenants(const std::vector<tenant_id_t>& allowed, std::size_t count_tenants) {
        by_tenant_ = true;
        tenant_ok_.assign(count_tenants, 0);
        for (tenant_id_t id : allowed)
            if (id < count_tenants) tenant_ok_[id] = 1;
    }
    /// Admits ts in [ts_min, ts_max], both inclusive.
    void set_ts_range(std::int64_t ts_min, std::int64_t ts_max) noexcept {
        by_ts_ = true;
        ts_min_ = ts_min;
        ts_max_ = ts_max;
    }
    bool active() const noexcept { return by_label_ || by_tenant_ || by_ts_; }

    bool admits(const NodeColumns& nodes, node_id_t node) const noexcept {
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
