// String interning for labels, tenants and relation types: a dense id per distinct string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
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

/// The ids of a batch's names, found before the lock under which they are interned: a name the
/// interner holds gets its id; a name new to it gets the id intern() will give it once the new
/// names are interned in `fresh` order (intern_fresh()). Nothing may intern into the interner
/// in between (the engine's writers hold writer_mutex_ from one to the other).
class BatchNames {
  public:
    BatchNames() = default;
    explicit BatchNames(const Interner& interner) : interner_(&interner) {}
    /// The id of `name`, which must outlive this object.
    std::uint32_t id_of(const std::string& name) {
        std::uint32_t id;
        if (interner_->find(name, &id)) return id;
        auto [at, added] = fresh_ids_.emplace(name, static_cast<std::uint32_t>(interner_->size() + fresh_.size()));
        if (added) fresh_.push_back(&name);
        return at->second;
    }
    /// ids[i] = id_of(name_of(i)) for i < count; a run of one name is hashed once.
    template <typename name_of_at>
    void ids_of_rows(std::size_t count, name_of_at&& name_of, std::uint32_t* ids) {
        const std::string* last = nullptr;
        std::uint32_t last_id = 0;
        for (std::size_t i = 0; i < count; ++i) {
            const std::string& name = name_of(i);
            if (!last || name != *last) last_id = id_of(*(last = &name));
            ids[i] = last_id;
        }
    }
    /// Interns the new names, in the order of the ids id_of() gave them.
    void intern_fresh(Interner& interner) const {
        for (const std::string* name : fresh_) interner.intern(*name);
    }

  private:
    const Interner* interner_ = nullptr;
    std::unordered_map<std::string_view, std::uint32_t> fresh_ids_;
    std::vector<const std::string*> fresh_;
};

}  // namespace vecgraph::detail
