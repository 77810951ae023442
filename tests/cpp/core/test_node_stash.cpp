// NodeStash (core/NodeStash.h), the node recycler behind the caching
// allocator's bookkeeping (Note [Allocator bookkeeping is recycled]): the
// containers it serves keep exactly the contents and order they would have
// without it, nodes are reused, and it keeps no more than its bound.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/NodeStash.h"

namespace {

using c10_npu::NodeStash;
using IntSet = std::set<int>;

#if defined(NPU_NODE_STASH_BYPASS)
constexpr bool kRecycles = false;  // AddressSanitizer: nothing is kept
#else
constexpr bool kRecycles = true;
#endif

TEST(NodeStashTest, SetKeepsContentsAndOrderOfPlainInsertAndErase) {
  IntSet withStash;
  IntSet plain;
  NodeStash<IntSet, 4> stash;
  std::mt19937 random(7);
  for (int step = 0; step < 5000; ++step) {
    const int value = static_cast<int>(random() % 64);
    if (random() % 2 == 0) {
      EXPECT_EQ(stash.insertInto(withStash, value), plain.insert(value).second) << "step " << step;
    } else {
      EXPECT_EQ(stash.eraseFrom(withStash, value), plain.erase(value) == 1) << "step " << step;
    }
    ASSERT_EQ(std::vector<int>(withStash.begin(), withStash.end()),
              std::vector<int>(plain.begin(), plain.end()))
        << "step " << step;
  }
}

TEST(NodeStashTest, AnInsertAfterAnEraseReusesTheErasedNode) {
  if (!kRecycles) GTEST_SKIP() << "AddressSanitizer build: the stash keeps nothing";
  IntSet set{1, 2, 3};
  NodeStash<IntSet, 4> stash;
  const int* erased = &*set.find(2);
  ASSERT_TRUE(stash.eraseFrom(set, 2));
  ASSERT_TRUE(stash.insertInto(set, 10));
  EXPECT_EQ(&*set.find(10), erased);  // the same node, with the new value
  EXPECT_EQ(std::vector<int>(set.begin(), set.end()), (std::vector<int>{1, 3, 10}));
}

TEST(NodeStashTest, ADuplicateInsertLeavesTheSetAndKeepsTheNode) {
  IntSet set{5, 7};
  NodeStash<IntSet, 4> stash;
  ASSERT_TRUE(stash.eraseFrom(set, 7));    // one node kept
  EXPECT_FALSE(stash.insertInto(set, 5));  // already there
  EXPECT_EQ(std::vector<int>(set.begin(), set.end()), (std::vector<int>{5}));
  EXPECT_EQ(stash.take().empty(), !kRecycles);  // the node was kept again
  EXPECT_FALSE(stash.eraseFrom(set, 42));       // absent: nothing erased
  EXPECT_EQ(set.size(), 1u);
}

TEST(NodeStashTest, KeepsNoMoreThanItsBound) {
  IntSet set;
  for (int i = 0; i < 10; ++i) set.insert(i);
  NodeStash<IntSet, 3> stash;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(stash.eraseFrom(set, i));
  int kept = 0;
  while (!stash.take().empty()) ++kept;
  EXPECT_EQ(kept, kRecycles ? 3 : 0);
}

TEST(NodeStashTest, MapNodesTakeNewKeysAndValues) {
  using Map = std::unordered_map<void*, int>;
  Map map;
  NodeStash<Map, 2> stash;
  int a = 0;
  int b = 0;
  map.emplace(&a, 1);
  const int* erased = &map.begin()->second;
  ASSERT_TRUE(stash.eraseFrom(map, static_cast<void*>(&a)));
  EXPECT_TRUE(map.empty());
  EXPECT_TRUE(stash.insertInto(map, &b, 2));
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map.at(&b), 2);
  EXPECT_EQ(map.count(&a), 0u);
  if (kRecycles) {
    EXPECT_EQ(&map.at(&b), erased);  // the erased entry's node
  }
  EXPECT_FALSE(stash.insertInto(map, &b, 3));  // the key is there: unchanged
  EXPECT_EQ(map.at(&b), 2);
}

}  // namespace
