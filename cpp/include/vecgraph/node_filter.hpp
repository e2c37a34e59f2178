// Node filter: label, tenant, timestamp and filterable-property conditions applied to every
// node a search reaches (inside the HNSW seed search and during traversal, not after them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "vecgraph/types.hpp"

namespace vecgraph {

/// One filterable property's column: `present[n]` says node n has a value of the declared
/// type; str values are interned ids, int64 and timestamp values in `ints`, float64 in `reals`.
struct PropColumnView {
    PropType type = PropType::str;
    const std::uint32_t* str_ids = nullptr;
    const std::int64_t* ints = nullptr;
    const double* reals = nullptr;
    const std::uint8_t* present = nullptr;
};

struct NodeColumns {
    const label_id_t* labels = nullptr;
    const tenant_id_t* tenants = nullptr;
    const std::int64_t* ts = nullptr;
    const std::uint8_t* dead = nullptr;  // one flag per node (deleted), or nullptr when no node is deleted
    const PropColumnView* props = nullptr;  // one per declared property
};

/// A condition on one property: membership of a str value (`str_ok` indexed by interned id),
/// or an inclusive range of an int64 / timestamp ([int_min, int_max]) or float64 ([real_min,
/// real_max]) value, and with `in_set`, membership in the sorted `int_in` / `real_in`. A node
/// without a value of the declared type never passes.
struct PropCondition {
    std::uint32_t column = 0;
    std::vector<std::uint8_t> str_ok;
    bool in_set = false;
    std::vector<std::int64_t> int_in;
    std::vector<double> real_in;
    std::int64_t int_min = std::numeric_limits<std::int64_t>::min();
    std::int64_t int_max = std::numeric_limits<std::int64_t>::max();
    double real_min = -std::numeric_limits<double>::infinity();
    double real_max = std::numeric_limits<double>::infinity();
};

class NodeFilter {
  public:
    /// Clears every condition: everything passes.
    void reset() noexcept {
        by_label_ = by_tenant_ = by_ts_ = false;
        props_.clear();
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
    /// Adds a property condition (all conditions must pass); the caller fills it.
    PropCondition& add_prop_condition() { return props_.emplace_back(); }
    bool active() const noexcept { return by_label_ || by_tenant_ || by_ts_ || !props_.empty(); }

    /// True when admits() must be called: a condition is set or some node is deleted.
    bool needed(const NodeColumns& nodes) const noexcept { return active() || nodes.dead; }
    bool admits(const NodeColumns& nodes, node_id_t node) const noexcept {
        if (nodes.dead && nodes.dead[node]) return false;
        if (by_label_ && !label_ok_[nodes.labels[node]]) return false;
        if (by_tenant_ && !tenant_ok_[nodes.tenants[node]]) return false;
        if (by_ts_ && (nodes.ts[node] < ts_min_ || nodes.ts[node] > ts_max_)) return false;
        for (const PropCondition& c : props_) {
            const PropColumnView& column = nodes.props[c.column];
            if (!column.present[node]) return false;
            switch (column.type) {
                case PropType::str:
                    if (column.str_ids[node] >= c.str_ok.size() || !c.str_ok[column.str_ids[node]]) return false;
                    break;
                case PropType::int64:
                case PropType::timestamp:
                    if (column.ints[node] < c.int_min || column.ints[node] > c.int_max) return false;
                    if (c.in_set && !std::binary_search(c.int_in.begin(), c.int_in.end(), column.ints[node])) return false;
                    break;
                case PropType::float64:
                    if (!(column.reals[node] >= c.real_min && column.reals[node] <= c.real_max)) return false;
                    if (c.in_set && !std::binary_search(c.real_in.begin(), c.real_in.end(), column.reals[node])) return false;
                    break;
            }
        }
        return true;
    }

  private:
    bool by_label_ = false, by_tenant_ = false, by_ts_ = false;
    std::vector<std::uint8_t> label_ok_, tenant_ok_;
    std::vector<PropCondition> props_;
    std::int64_t ts_min_ = std::numeric_limits<std::int64_t>::min();
    std::int64_t ts_max_ = std::numeric_limits<std::int64_t>::max();
};

}  // namespace vecgraph
