// KeyIndex (the engine's key map) against std::unordered_map under random appends, erases,
// re-adds and lookups, one at a time and in batches; and key views that outlive growth.
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "check.hpp"
#include "vecgraph/detail/key_index.hpp"
#include "vecgraph/types.hpp"

using namespace vecgraph;
using detail::KeyIndex;

namespace {

// Keys of many shapes: encoded int keys (held in their slots) with small, negative and huge
// values, 9-byte keys with another tag byte (the same value bytes: must not match them),
// int-tagged keys of other lengths, empty, long, and ones sharing prefixes.
std::string random_key(std::mt19937& rng, std::size_t universe) {
    const std::size_t n = rng() % universe;
    const std::int64_t value = (n % 3 == 0) ? -static_cast<std::int64_t>(n) : static_cast<std::int64_t>(n) << (n % 40);
    switch (n % 6) {
        case 0: return encode_int_key(value);
        case 1: return std::string(1, '\x01') + std::string(reinterpret_cast<const char*>(&value), sizeof(value));
        case 2: return encode_int_key(value).substr(0, 1 + n % 9) + (n % 2 ? "" : "xx");
        case 3: return "k" + std::to_string(n);
        case 4: return std::string(n % 7 == 0 ? 0 : 40 + n % 90, static_cast<char>('a' + n % 26)) + std::to_string(n);
        default: return std::string("\0\xff", 2) + std::to_string(n * 2654435761u);
    }
}

}  // namespace

TEST_CASE("KeyIndex: append, erase, find and find_many against std::unordered_map") {
    std::mt19937 rng(11);
    KeyIndex index;
    std::unordered_map<std::string, node_id_t> model;
    std::vector<std::string> key_of;  // by id, erased ids too
    for (int step = 0; step < 60000; ++step) {
        const unsigned op = rng() % 10;
        const std::string key = random_key(rng, 5000);
        if (op < 5) {
            if (model.count(key)) continue;
            if (rng() % 50 == 0) index.reserve(index.count_ids() + rng() % 300);
            const node_id_t id = index.append(key);
            CHECK_EQ(id, key_of.size());
            key_of.push_back(key);
            model[key] = id;
        } else if (op < 7) {
            auto it = model.find(key);
            if (it == model.end()) continue;
            index.erase(it->second);
            CHECK_EQ(std::string(index.key(it->second)), key);  // an erased id keeps its key
            model.erase(it);
        } else {
            auto it = model.find(key);
            CHECK_EQ(index.find(key), it == model.end() ? invalid_id : it->second);
        }
        CHECK_EQ(index.size(), model.size());
        CHECK_EQ(index.count_ids(), key_of.size());
    }
    CHECK(model.size() > 1000);
    CHECK(key_of.size() > model.size() + 1000);  // many erased

    // Batches: live, erased and never-seen keys, repeats, a partial last block.
    std::vector<std::string> batch;
    for (int i = 0; i < 1003; ++i) batch.push_back(random_key(rng, 7000));
    batch.push_back(key_of.front());
    batch.push_back(key_of.front());
    std::vector<node_id_t> ids(batch.size(), 12345);
    index.find_many(batch.data(), batch.size(), ids.data());
    std::size_t hits = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        auto it = model.find(batch[i]);
        CHECK_EQ(ids[i], it == model.end() ? invalid_id : it->second);
        hits += it != model.end();
    }
    CHECK(hits > 100);
    CHECK(hits < batch.size());

    // Int keys given as values: the same ids as their encoded strings, for live, erased and
    // never-seen values (negative, huge, and the int64 extremes).
    std::vector<std::int64_t> values;
    for (const std::string& key : batch)
        if (key.size() == 9 && key[0] == key_tag_int) {
            std::int64_t value = 0;
            for (int i = 0; i < 8; ++i) value |= static_cast<std::int64_t>(static_cast<std::uint8_t>(key[1 + i])) << (8 * i);
            values.push_back(value);
        }
    for (std::int64_t extreme : {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                                 std::int64_t{0}, std::int64_t{-1}})
        values.push_back(extreme);
    std::vector<node_id_t> by_value(values.size(), 12345);
    index.find_many_ints(values.data(), values.size(), by_value.data());
    std::size_t int_hits = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
        CHECK_EQ(by_value[i], index.find(encode_int_key(values[i])));
        int_hits += by_value[i] != invalid_id;
    }
    CHECK(values.size() > 150);
    CHECK(int_hits > 20);
    CHECK(int_hits < values.size());

    std::map<node_id_t, std::string> listed;
    index.for_each_live([&](node_id_t id, std::string_view key) { listed.emplace(id, std::string(key)); });
    CHECK_EQ(listed.size(), model.size());
    for (const auto& [key, id] : model) CHECK_EQ(listed[id], key);
    for (std::size_t id = 0; id < key_of.size(); ++id) CHECK_EQ(std::string(index.key(static_cast<node_id_t>(id))), key_of[id]);
}

TEST_CASE("KeyIndex: an empty index finds nothing; key views survive growth") {
    KeyIndex index;
    CHECK_EQ(index.find("a"), invalid_id);
    std::string none = "a";
    node_id_t id = 7;
    index.find_many(&none, 1, &id);
    CHECK_EQ(id, invalid_id);
    const std::int64_t zero = 0;
    id = 7;
    index.find_many_ints(&zero, 1, &id);
    CHECK_EQ(id, invalid_id);
    CHECK_EQ(index.memory_bytes(), 0u);

    CHECK_EQ(index.append(""), 0u);  // the empty key is a key like any other
    CHECK_EQ(index.find(""), 0u);
    const std::string_view first = index.key(0);
    std::vector<std::string_view> views;
    for (int i = 0; i < 200000; ++i) {
        const std::string key = "node-" + std::to_string(i);
        views.push_back(index.key(index.append(key)));
    }
    CHECK_EQ(first.size(), 0u);
    for (int i = 0; i < 200000; i += 997) CHECK_EQ(std::string(views[i]), "node-" + std::to_string(i));
    CHECK_EQ(index.find("node-199999"), 200000u);
    CHECK_EQ(index.find("node-200000"), invalid_id);
    CHECK(index.memory_bytes() > 200000u * 16);
}

TEST_CASE("KeyIndex: erasing and re-adding the same keys keeps the table small") {
    KeyIndex index;
    for (int i = 0; i < 100; ++i) index.append("live-" + std::to_string(i));
    const std::size_t settled = index.memory_bytes();
    for (int round = 0; round < 2000; ++round) {
        const node_id_t id = index.append("churn");
        index.erase(id);
        CHECK_EQ(index.find("churn"), invalid_id);
    }
    CHECK_EQ(index.size(), 100u);
    CHECK_EQ(index.count_ids(), 2100u);
    CHECK_EQ(index.find("live-42"), 42u);
    // Tombstones are cleared by rehashing in place; only the per-id records grow.
    CHECK(index.memory_bytes() < settled + 2000 * (sizeof(void*) + 16) + (1 << 16));
}

TEST_MAIN()

TEST_CASE("KeyIndex: staged batches equal one-at-a-time appends, grown or in place, with erases between") {
    // stage() must change nothing a reader sees: every lookup between stage() and commit()
    // answers as before it. After commit(), the index must hold what appending the keys one by
    // one would: same ids, same lookups, same live count, with tombstones reused in place.
    std::mt19937 rng(23);
    KeyIndex staged, appended;
    std::unordered_map<std::string, node_id_t> model;
    std::vector<std::string> key_of;
    std::vector<std::string_view> views;  // taken as keys are added: must stay valid
    std::size_t grown_tables = 0, in_place = 0;
    for (int round = 0; round < 400; ++round) {
        // Erase a few live keys from both (tombstones the next batch may reuse).
        for (int e = 0; e < static_cast<int>(rng() % 20) && !model.empty(); ++e) {
            auto it = model.begin();
            std::advance(it, rng() % model.size());
            staged.erase(it->second);
            appended.erase(it->second);
            model.erase(it);
        }
        // A batch of new keys (not live, no repeats), sized from 0 to a few thousand.
        const std::size_t want = round % 50 == 0 ? 3000 + rng() % 2000 : rng() % 60;
        std::vector<std::string> batch;
        std::unordered_map<std::string, int> in_batch;
        while (batch.size() < want) {
            std::string key = random_key(rng, 200000);
            if (model.count(key) || in_batch.count(key)) continue;
            in_batch[key] = 1;
            batch.push_back(key);
        }
        std::vector<std::string_view> keys(batch.begin(), batch.end());
        const std::size_t slots_before = staged.memory_bytes();
        KeyIndex::Staged pending = staged.stage(keys.data(), keys.size());
        // Nothing visible yet: sizes and lookups as before (a sample of live and new keys).
        CHECK_EQ(staged.count_ids(), key_of.size());
        CHECK_EQ(staged.size(), model.size());
        CHECK_EQ(staged.memory_bytes(), slots_before);
        for (std::size_t i = 0; i < batch.size(); i += 7) CHECK_EQ(staged.find(batch[i]), invalid_id);
        for (std::size_t i = 0; i < 20 && !key_of.empty(); ++i) {
            const std::string& key = key_of[rng() % key_of.size()];
            auto it = model.find(key);
            CHECK_EQ(staged.find(key), it == model.end() ? invalid_id : it->second);
        }
        (pending.table.slots.empty() ? in_place : grown_tables) += !batch.empty();
        staged.commit(pending);
        for (const std::string& key : batch) {
            const node_id_t id = appended.append(key);
            CHECK_EQ(id, key_of.size());
            model[key] = id;
            key_of.push_back(key);
        }
        for (std::size_t id = views.size(); id < key_of.size(); ++id) views.push_back(staged.key(static_cast<node_id_t>(id)));
        CHECK_EQ(staged.count_ids(), appended.count_ids());
        CHECK_EQ(staged.size(), appended.size());
        CHECK_EQ(staged.size(), model.size());
    }
    std::printf("  %zu batches into a grown table, %zu in place\n", grown_tables, in_place);
    CHECK(grown_tables >= 3);
    CHECK(in_place >= 100);
    for (std::size_t id = 0; id < key_of.size(); ++id) {
        CHECK_EQ(std::string(staged.key(static_cast<node_id_t>(id))), key_of[id]);
        CHECK_EQ(std::string(views[id]), key_of[id]);
    }
    std::vector<std::string> probe;
    for (int i = 0; i < 5000; ++i) probe.push_back(random_key(rng, 200000));
    for (const std::string& key : key_of) probe.push_back(key);
    std::vector<node_id_t> got(probe.size()), want(probe.size());
    staged.find_many(probe.data(), probe.size(), got.data());
    appended.find_many(probe.data(), probe.size(), want.data());
    std::size_t live = 0;
    for (std::size_t i = 0; i < probe.size(); ++i) {
        auto it = model.find(probe[i]);
        CHECK_EQ(got[i], it == model.end() ? invalid_id : it->second);
        CHECK_EQ(got[i], want[i]);
        live += got[i] != invalid_id;
    }
    CHECK(live > 1000);
    CHECK(live < probe.size());
}
