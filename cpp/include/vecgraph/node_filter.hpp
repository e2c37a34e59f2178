// Node filter: label, tenant, timestamp and filterable-property conditions applied to every
// node a search reaches (inside the HNSW seed search and during traversal, not after them).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
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

/// Flags indexed by interned id (of a label, a tenant or a str property value): set for the
/// names one search lists. clear() unsets only the flags set since the last clear, so that a
/// search costs O(names it lists) rather than O(names the graph has interned) (a fresh mask per
/// search was a 1 MB memset with a million tenants). Flags beyond fit()'s count read as unset.
class IdMask {
  public:
    /// Unsets every flag (O(flags set)).
    void clear() noexcept {
        for (std::uint32_t id : set_) flags_[id] = 0;
        set_.clear();
    }
    /// Makes room for ids below `count`; the new flags are unset. Amortised: a mask reused by
    /// one search after another grows only when new names were interned.
    void fit(std::size_t count) {
        if (flags_.size() < count) flags_.resize(count, 0);
    }
    /// Sets the flag of `id` (below fit()'s count).
    void allow(std::uint32_t id) {
        if (flags_[id]) return;
        flags_[id] = 1;
        set_.push_back(id);
    }
    /// The flag of `id`; unset for an id at or beyond fit()'s count.
    bool admits(std::uint32_t id) const noexcept { return id < flags_.size() && flags_[id] != 0; }
    /// How many distinct ids are set.
    std::size_t count_set() const noexcept { return set_.size(); }
    /// The ids set, in the order they were first allowed.
    const std::vector<std::uint32_t>& ids() const noexcept { return set_; }

  private:
    std::vector<std::uint8_t> flags_;
    std::vector<std::uint32_t> set_;
};

/// A condition on one property: membership of a str value (`str_ok` indexed by interned id),
/// or an inclusive range of an int64 / timestamp ([int_min, int_max]) or float64 ([real_min,
/// real_max]) value, and with `in_set`, membership in the sorted `int_in` / `real_in`. A node
/// without a value of the declared type never passes.
struct PropCondition {
    std::uint32_t column = 0;
    IdMask str_ok;
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
    /// Clears every condition: everything passes. Keeps the masks' memory for the next
    /// search (a NodeFilter lives in a search context and is reset by each search).
    void reset() noexcept {
        by_label_ = by_tenant_ = by_ts_ = by_exclusion_ = false;
        label_ok_.clear();
        excluded_.clear();
        tenant_ok_.clear();
        for (std::size_t i = 0; i < count_props_; ++i) props_[i].str_ok.clear();
        count_props_ = 0;
        ts_min_ = std::numeric_limits<std::int64_t>::min();
        ts_max_ = std::numeric_limits<std::int64_t>::max();
    }
    /// Admits only labels whose flag is set in the returned mask (indexed by label id; the
    /// caller fits it to the label count and fills it, e.g. with Interner::mask_of). A mask
    /// with no flag set admits nothing.
    IdMask& allow_labels() noexcept {
        by_label_ = true;
        return label_ok_;
    }
    /// Likewise for tenants.
    IdMask& allow_tenants() noexcept {
        by_tenant_ = true;
        return tenant_ok_;
    }
    /// Rejects the nodes whose flag is set in the returned mask (indexed by node id; the caller
    /// fits it to the node count and sets the excluded nodes): keys a search must never return
    /// nor walk through (leave-one-out evaluation, "more like this").
    IdMask& exclude_nodes() noexcept {
        by_exclusion_ = true;
        return excluded_;
    }
    /// The label and tenant masks as set for this search (clear when not filtering by them).
    const IdMask& label_mask() const noexcept { return label_ok_; }
    const IdMask& tenant_mask() const noexcept { return tenant_ok_; }
    /// Admits ts in [ts_min, ts_max], both inclusive.
    void set_ts_range(std::int64_t ts_min, std::int64_t ts_max) noexcept {
        by_ts_ = true;
        ts_min_ = ts_min;
        ts_max_ = ts_max;
    }
    /// Adds a property condition (all conditions must pass), with every field at its default
    /// and `str_ok` clear; the caller fills it.
    PropCondition& add_prop_condition() {
        if (count_props_ == props_.size()) props_.emplace_back();
        PropCondition& c = props_[count_props_++];
        IdMask str_ok = std::move(c.str_ok);  // cleared by reset(); its memory is reused
        c = PropCondition{};
        c.str_ok = std::move(str_ok);
        return c;
    }
    bool active() const noexcept { return by_label_ || by_tenant_ || by_ts_ || by_exclusion_ || count_props_ > 0; }

    /// True when admits() must be called: a condition is set or some node is deleted.
    bool needed(const NodeColumns& nodes) const noexcept { return active() || nodes.dead; }
    bool admits(const NodeColumns& nodes, node_id_t node) const noexcept {
        if (nodes.dead && nodes.dead[node]) return false;
        if (by_exclusion_ && excluded_.admits(node)) return false;
        if (by_label_ && !label_ok_.admits(nodes.labels[node])) return false;
        if (by_tenant_ && !tenant_ok_.admits(nodes.tenants[node])) return false;
        if (by_ts_ && (nodes.ts[node] < ts_min_ || nodes.ts[node] > ts_max_)) return false;
        for (std::size_t i = 0; i < count_props_; ++i) {
            const PropCondition& c = props_[i];
            const PropColumnView& column = nodes.props[c.column];
            if (!column.present[node]) return false;
            switch (column.type) {
                case PropType::str:
                    if (!c.str_ok.admits(column.str_ids[node])) return false;
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
    bool by_label_ = false, by_tenant_ = false, by_ts_ = false, by_exclusion_ = false;
    IdMask label_ok_, tenant_ok_, excluded_;
    std::vector<PropCondition> props_;  // the first count_props_ are this search's; the rest keep memory
    std::size_t count_props_ = 0;
    std::int64_t ts_min_ = std::numeric_limits<std::int64_t>::min();
    std::int64_t ts_max_ = std::numeric_limits<std::int64_t>::max();
};

}  // namespace vecgraph
