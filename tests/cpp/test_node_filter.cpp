// IdMask and NodeFilter reused from search to search (as a search context reuses them) against
// a filter built fresh for each search: the same nodes admitted, whatever the earlier searches set.
#include <random>
#include <set>
#include <string>
#include <vector>

#include "check.hpp"
#include "vecgraph/detail/interner.hpp"
#include "vecgraph/node_filter.hpp"

using namespace vecgraph;

TEST_CASE("IdMask: allow, clear and fit against a set") {
    std::mt19937 rng(7);
    IdMask mask;
    std::set<std::uint32_t> model;
    std::size_t room = 0;
    for (int step = 0; step < 20000; ++step) {
        const unsigned op = rng() % 20;
        if (op == 0) {
            mask.clear();
            model.clear();
        } else if (op == 1) {
            room += rng() % 50;
            mask.fit(room);
        } else if (room > 0) {
            const auto id = static_cast<std::uint32_t>(rng() % room);
            mask.allow(id);
            model.insert(id);
        }
        CHECK_EQ(mask.count_set(), model.size());
        const auto probe = static_cast<std::uint32_t>(rng() % (room + 10));
        CHECK_EQ(mask.admits(probe), model.count(probe) == 1);
    }
    CHECK(room > 1000);
    std::set<std::uint32_t> listed(mask.ids().begin(), mask.ids().end());
    CHECK(listed == model);
    CHECK_EQ(mask.ids().size(), model.size());  // each id once
    CHECK(!mask.admits(~std::uint32_t{0}));     // far beyond fit(): unset, no read past the flags
}

TEST_CASE("a NodeFilter reset and refilled admits what a fresh one admits") {
    std::mt19937 rng(11);
    const std::size_t count_nodes = 300;
    detail::Interner labels, tenants, values;
    for (int i = 0; i < 40; ++i) labels.intern("label-" + std::to_string(i));
    for (int i = 0; i < 500; ++i) tenants.intern("user-" + std::to_string(i));
    for (int i = 0; i < 60; ++i) values.intern("value-" + std::to_string(i));
    std::vector<label_id_t> label_column(count_nodes);
    std::vector<tenant_id_t> tenant_column(count_nodes);
    std::vector<std::uint32_t> value_column(count_nodes);
    std::vector<std::uint8_t> present(count_nodes);
    std::vector<std::int64_t> ts(count_nodes);
    for (std::size_t n = 0; n < count_nodes; ++n) {
        label_column[n] = static_cast<label_id_t>(rng() % labels.size());
        tenant_column[n] = static_cast<tenant_id_t>(rng() % tenants.size());
        value_column[n] = static_cast<std::uint32_t>(rng() % values.size());
        present[n] = rng() % 4 != 0;
        ts[n] = static_cast<std::int64_t>(rng() % 100);
    }
    PropColumnView column;
    column.type = PropType::str;
    column.str_ids = value_column.data();
    column.present = present.data();
    NodeColumns columns;
    columns.labels = label_column.data();
    columns.tenants = tenant_column.data();
    columns.ts = ts.data();
    columns.props = &column;

    auto names = [&](const char* prefix, std::size_t among, std::size_t most) {
        std::vector<std::string> out;
        const std::size_t count = rng() % (most + 1);
        for (std::size_t i = 0; i < count; ++i) out.push_back(prefix + std::to_string(rng() % among));
        if (rng() % 5 == 0) out.push_back(std::string(prefix) + "never-seen");
        return out;
    };
    auto fill = [&](NodeFilter& filter, const std::vector<std::string>& l, const std::vector<std::string>& t,
                    const std::vector<std::string>& v, bool by_label, bool by_tenant, bool by_value, bool by_ts) {
        filter.reset();
        if (by_label) labels.mask_of(l, filter.allow_labels());
        if (by_tenant) tenants.mask_of(t, filter.allow_tenants());
        if (by_ts) filter.set_ts_range(20, 70);
        if (by_value) {
            PropCondition& c = filter.add_prop_condition();
            values.mask_of(v, c.str_ok);
        }
    };
    NodeFilter reused;
    std::size_t admitted_total = 0, compared = 0;
    for (int search = 0; search < 3000; ++search) {
        const auto l = names("label-", labels.size(), 4);
        const auto t = names("user-", tenants.size(), 40);
        const auto v = names("value-", values.size(), 6);
        const bool by_label = rng() % 2, by_tenant = rng() % 2, by_value = rng() % 2, by_ts = rng() % 3 == 0;
        fill(reused, l, t, v, by_label, by_tenant, by_value, by_ts);
        NodeFilter fresh;
        fill(fresh, l, t, v, by_label, by_tenant, by_value, by_ts);
        CHECK_EQ(reused.active(), by_label || by_tenant || by_value || by_ts);
        const std::set<std::string> ls(l.begin(), l.end()), tset(t.begin(), t.end()), vs(v.begin(), v.end());
        for (node_id_t n = 0; n < count_nodes; ++n) {
            // The rule written out from the names, not from any mask.
            bool want = (!by_label || ls.count(labels.name(label_column[n]))) &&
                        (!by_tenant || tset.count(tenants.name(tenant_column[n]))) &&
                        (!by_ts || (ts[n] >= 20 && ts[n] <= 70)) &&
                        (!by_value || (present[n] && vs.count(values.name(value_column[n]))));
            CHECK_EQ(reused.admits(columns, n), want);
            CHECK_EQ(fresh.admits(columns, n), want);
            admitted_total += want;
            ++compared;
        }
        // The masks list each named, interned id once.
        std::set<std::uint32_t> tenant_ids;
        std::uint32_t id;
        for (const std::string& name : t)
            if (tenants.find(name, &id)) tenant_ids.insert(id);
        CHECK_EQ(reused.tenant_mask().count_set(), by_tenant ? tenant_ids.size() : 0u);
    }
    CHECK(admitted_total > compared / 50);  // the draws admit some nodes, not none
    CHECK(admitted_total < compared / 2);   // and reject many
}

TEST_MAIN()
