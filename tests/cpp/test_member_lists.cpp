// Member lists (nodes by label or tenant id) against a plain model under random moves and
// deletes: live counts exact, every live node listed, size bounded by 2 * live + slack.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "check.hpp"
#include "vecgraph/detail/member_lists.hpp"

using namespace vecgraph;
using vecgraph::detail::MemberLists;

TEST_CASE("member lists follow random adds, moves and deletes") {
    for (unsigned seed = 1; seed <= 5; ++seed) {
        std::mt19937 rng(seed);
        const std::uint32_t ids = 1 + seed * 2;
        MemberLists lists;
        std::vector<std::uint32_t> column;  // id of each node
        std::vector<std::uint8_t> dead;
        std::size_t max_seen_size = 0;
        for (int step = 0; step < 20000; ++step) {
            const int op = static_cast<int>(rng() % 10);
            if (op < 4 || column.empty()) {  // add
                column.push_back(static_cast<std::uint32_t>(rng() % ids));
                dead.push_back(0);
                lists.add(column.back(), static_cast<node_id_t>(column.size() - 1));
            } else {
                const auto node = static_cast<node_id_t>(rng() % column.size());
                if (dead[node]) continue;
                const std::uint32_t old = column[node];
                if (op < 8) {  // move (an upsert with a new id), often back to an earlier one
                    const auto to = static_cast<std::uint32_t>(rng() % 2);
                    if (to == old) continue;
                    column[node] = to;
                    lists.add(to, node);
                    lists.remove(old, column.data(), dead.data());
                } else {  // delete
                    dead[node] = 1;
                    lists.remove(old, column.data(), dead.data());
                }
            }
            if (step % 997 != 0) continue;
            for (std::uint32_t id = 0; id < ids; ++id) {
                std::set<node_id_t> want, got;
                for (std::size_t n = 0; n < column.size(); ++n)
                    if (!dead[n] && column[n] == id) want.insert(static_cast<node_id_t>(n));
                for (node_id_t n : lists.list(id)) {
                    REQUIRE(n < column.size());
                    if (!dead[n] && column[n] == id) got.insert(n);
                }
                CHECK_EQ(lists.live(id), want.size());
                CHECK(got == want);
                CHECK(lists.list(id).size() <= 2 * want.size() + MemberLists::prune_slack + 1);
                max_seen_size = std::max(max_seen_size, lists.list(id).size());
            }
        }
        CHECK(max_seen_size > 0);
        CHECK_EQ(lists.live(ids + 5), 0u);  // an id never seen
        CHECK(lists.list(ids + 5).empty());
    }
}

TEST_CASE("a list is rewritten once stale entries outnumber live ones") {
    MemberLists lists;
    std::vector<std::uint32_t> column(1000, 7);
    std::vector<std::uint8_t> dead(1000, 0);
    for (node_id_t n = 0; n < 1000; ++n) lists.add(7, n);
    CHECK_EQ(lists.list(7).size(), 1000u);
    for (node_id_t n = 0; n < 900; ++n) {
        dead[n] = 1;
        lists.remove(7, column.data(), dead.data());
    }
    CHECK_EQ(lists.live(7), 100u);
    CHECK(lists.list(7).size() <= 2 * 100 + MemberLists::prune_slack);
    const std::size_t bytes = lists.memory_bytes();
    CHECK(bytes < 1000 * sizeof(node_id_t));  // the rewritten list gave its room back
}

TEST_MAIN()
