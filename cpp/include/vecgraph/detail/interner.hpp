// String interning for labels, tenants and relation types: a dense id per distinct string.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "vecgraph/node_filter.hpp"

namespace vecgraph::detail {

class Interner {
  public:
    /// The id of `name`, adding it if new.
    std::uint32_t intern(const std::string& name) {
        auto it = ids_.find(name);
        if (it != ids_.end()) return it->second;
        auto id = static_cast<std::uint32_t>(names_.size());
        names_.emplace_back(name);
        ids_.emplace(names_.back(), id);
        return id;
    }
    /// The id of `name`, or false if it was never interned.
    bool find(const std::string& name, std::uint32_t* id) const {
        auto it = ids_.find(name);
        if (it == ids_.end()) return false;
        *id = it->second;
        return true;
    }
    /// Sets `ok` to size() flags, 1 for each listed name (names never interned match nothing).
    void mask_of(const std::vector<std::string>& listed, std::vector<std::uint8_t>& ok) const {
        ok.assign(names_.size(), 0);
        std::uint32_t id;
        for (const auto& name : listed)
            if (find(name, &id)) ok[id] = 1;
    }
    /// Sets the flag of each listed name in `ok`, which must be clear (names never interned
    /// match nothing): O(listed names), whatever size() is.
    void mask_of(const std::vector<std::string>& listed, IdMask& ok) const {
        ok.fit(names_.size());
        std::uint32_t id;
        for (const auto& name : listed)
            if (find(name, &id)) ok.allow(id);
    }
    const std::string& name(std::uint32_t id) const { return names_[id]; }
    std::size_t size() const noexcept { return names_.size(); }

  private:
    std::unordered_map<std::string, std::uint32_t> ids_;
    std::vector<std::string> names_;
};

}  // namespace vecgraph::detail
