// The subset a limited evaluation reads (--eval-limit): the right size, no item twice, in the
// split's order, fixed by the seed, different for another seed, uniform over the items (or
// stratified by class); and the labels a run prints for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "train/eval_subset.h"
#include "train/run_files.h"

namespace gmlp {
namespace {

TEST(EvalSubset, RightSizeNoDuplicatesAscendingInRange) {
  for (const auto& [total, limit] : std::vector<std::pair<int64_t, int64_t>>{{10000, 2000}, {10, 1}, {10, 9}, {7, 3}}) {
    const std::vector<int64_t> s = eval_subset(total, limit, 42);
    ASSERT_EQ(int64_t(s.size()), limit);
    EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), s.size()) << "a duplicate";
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    EXPECT_GE(s.front(), 0);
    EXPECT_LT(s.back(), total);
  }
}

TEST(EvalSubset, FixedBySeedAndDifferentForAnother) {
  EXPECT_EQ(eval_subset(10000, 500, 7), eval_subset(10000, 500, 7));
  EXPECT_NE(eval_subset(10000, 500, 7), eval_subset(10000, 500, 8));
  EXPECT_NE(eval_subset(10000, 500, 0), eval_subset(10000, 500, 1));
  // Not the first items: a split's head is no sample of it.
  const std::vector<int64_t> s = eval_subset(10000, 500, 0);
  EXPECT_GT(s.back(), 5000);
}

TEST(EvalSubset, NoLimitOrTooLargeALimitMeansAll) {
  for (int64_t limit : {int64_t(0), int64_t(-3), int64_t(10), int64_t(11), int64_t(1000)}) {
    const std::vector<int64_t> s = eval_subset(10, limit, 3);
    ASSERT_EQ(s.size(), 10u) << limit;
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(s[size_t(i)], i);
  }
  EXPECT_TRUE(eval_subset(0, 5, 3).empty());
}

TEST(EvalSubset, ALargerLimitKeepsTheSmallerOnesItems) {
  const std::vector<int64_t> small = eval_subset(5000, 100, 9), large = eval_subset(5000, 1000, 9);
  const std::set<int64_t> in_large(large.begin(), large.end());
  for (int64_t i : small) EXPECT_TRUE(in_large.count(i)) << i;
}

TEST(EvalSubset, EveryItemEquallyLikely) {
  // 3 of 10 items, over 20,000 seeds: each item is drawn 6,000 times on average, sd ~65.
  std::vector<int> hits(10, 0);
  for (uint64_t seed = 0; seed < 20000; ++seed)
    for (int64_t i : eval_subset(10, 3, seed)) ++hits[size_t(i)];
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(hits[size_t(i)], 6000, 350) << "item " << i;
}

TEST(EvalSubset, KeepsTheItemsOfAVectorInOrder) {
  std::vector<std::string> v;
  v.reserve(50);
  for (int i = 0; i < 50; ++i) v.push_back("item " + std::to_string(i));
  std::vector<std::string> kept = v;
  keep_eval_subset(kept, 12, 4);
  ASSERT_EQ(kept.size(), 12u);
  const std::vector<int64_t> at = eval_subset(50, 12, 4);
  for (size_t k = 0; k < kept.size(); ++k) EXPECT_EQ(kept[k], v[size_t(at[k])]);
  std::vector<std::string> all = v;
  keep_eval_subset(all, 0, 4);  // no limit
  EXPECT_EQ(all, v);
}

// Stratified by class: each class's count is its share of the split, rounded so the counts sum
// to the limit (a class of 1 in 10,000 can get none); within a class, a draw fixed by the seed.
TEST(EvalSubset, StratifiedKeepsEachClassShare) {
  std::vector<int> labels;  // classes in blocks of 6,000, 3,000, 999 and 1 items, shuffled
  labels.reserve(10000);
  for (int i = 0; i < 10000; ++i) labels.push_back(i % 10 < 6 ? 0 : i % 10 < 9 ? 1 : 2);
  labels[9999] = 3;
  for (const int64_t limit : {1000, 777, 10}) {
    const std::vector<int64_t> items = eval_subset(labels, limit, 5);
    ASSERT_EQ(int64_t(items.size()), limit);
    EXPECT_TRUE(std::is_sorted(items.begin(), items.end()));
    EXPECT_EQ(std::set<int64_t>(items.begin(), items.end()).size(), items.size());
    int64_t count[4] = {};
    for (int64_t i : items) ++count[labels[size_t(i)]];
    const double share[4] = {0.6, 0.3, 0.0999, 0.0001};
    for (int c = 0; c < 4; ++c) EXPECT_LE(std::abs(double(count[c]) - share[c] * double(limit)), 1.0) << "class " << c;
    EXPECT_EQ(items, eval_subset(labels, limit, 5));
    EXPECT_NE(items, eval_subset(labels, limit, 6));
  }
  EXPECT_EQ(eval_subset(labels, 0, 5).size(), labels.size());  // no limit: all
}

TEST(EvalSubset, Labels) {
  EXPECT_EQ(thousands(0), "0");
  EXPECT_EQ(thousands(999), "999");
  EXPECT_EQ(thousands(1000), "1,000");
  EXPECT_EQ(thousands(10000), "10,000");
  EXPECT_EQ(thousands(1234567), "1,234,567");
  EXPECT_EQ(thousands(-2500), "-2,500");
  EXPECT_EQ(subset_label(2000, 10000), "2,000 of 10,000");
  EXPECT_EQ(subset_label(10000, 10000), "");
  EXPECT_EQ(eval_limit_note(500, 10000, "test images"), "");
  EXPECT_EQ(eval_limit_note(0, 10000, "test images"), "");
  EXPECT_EQ(eval_limit_note(20000, 10000, "test images"),
            "--eval-limit 20000 is at least the split's 10,000 test images: evaluating on all of them");
}

TEST(TrainingSummary, RecordsFiguresNotTimings) {
  // What a checkpoint keeps of its run must not differ between a run and its resumed twin, so
  // no timings; the best accuracy is over every epoch.
  const std::vector<nlohmann::json> rows = {{{"epoch", 1},
                                             {"test_acc", 0.8},
                                             {"train_loss", 1.0},
                                             {"seconds", 12.5},
                                             {"images_per_s", 300.0},
                                             {"test_acc_ema", 0.5}},
                                            {{"epoch", 2},
                                             {"test_acc", 0.7},
                                             {"train_loss", 0.9},
                                             {"seconds", 11.0},
                                             {"test_count", 2000},
                                             {"test_total", 10000},
                                             {"eval_seconds", 1.0},
                                             {"test_acc_ema", 0.6}}};
  const nlohmann::json s = nlohmann::json::parse(training_summary({{"lr", 0.01}}, rows));
  EXPECT_EQ(s["epochs"], 2);
  EXPECT_EQ(s["options"]["lr"], 0.01);
  EXPECT_EQ(
      s["last"],
      (nlohmann::json{
          {"test_acc", 0.7}, {"train_loss", 0.9}, {"test_count", 2000}, {"test_total", 10000}, {"test_acc_ema", 0.6}}));
  EXPECT_EQ(s["best"], (nlohmann::json{{"test_acc", 0.8}, {"test_acc_ema", 0.6}}));
}

}  // namespace
}  // namespace gmlp
