// The Dataset stages: semantics as tf.data defines them, errors as values.
#include "strata/data/dataset.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include "common/temp_path.h"

namespace strata::data {
namespace {

int64_t I64(const Tensor& t) { return *t.data<int64_t>(); }

// Every element's first component as an i64 scalar.
std::vector<int64_t> Collect(const Dataset& ds, int64_t limit = -1) {
  auto it = ds.make_iterator();
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  std::vector<int64_t> out;
  Element e;
  bool end = false;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    Status s = (*it)->GetNext(&e, &end);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok() || end) break;
    out.push_back(I64(e[0]));
  }
  return out;
}

std::vector<int64_t> Iota(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i < b; ++i) v.push_back(i);
  return v;
}

Tensor I64Vector(std::vector<int64_t> v) {
  Tensor t(DType::kI64, Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

MapFn AddConst(int64_t k) {
  return [k](Element e) -> Result<Element> { return Element({Scalar<int64_t>(I64(e[0]) + k)}); };
}

TEST(Range, CountsUpAndDown) {
  EXPECT_EQ(Collect(Dataset::range(5)), Iota(0, 5));
  EXPECT_EQ(Collect(Dataset::range(10, 0, -3)), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_TRUE(Collect(Dataset::range(3, 3)).empty());
}

TEST(Range, ZeroStepIsAnErrorAtMakeIterator) {
  auto it = Dataset::range(0, 5, 0).map(AddConst(1)).make_iterator();
  ASSERT_FALSE(it.ok());
  EXPECT_NE(it.status().message().find("step must not be 0"), std::string::npos);
}

TEST(FromTensorSlices, SlicesEveryComponentAlongDimZero) {
  Tensor img(DType::kF32, Shape{3, 2, 2});
  for (int i = 0; i < 12; ++i) img.data<float>()[i] = static_cast<float>(i);
  auto ds = Dataset::from_tensor_slices(Element({"image", "label"}, {img, I64Vector({7, 8, 9})}));
  auto it = ds.make_iterator();
  ASSERT_TRUE(it.ok());
  for (int i = 0; i < 3; ++i) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok() && e->has_value());
    auto image = (*e)->Get("image");
    ASSERT_TRUE(image.ok());
    EXPECT_EQ(image->shape(), (Shape{2, 2}));
    EXPECT_EQ(image->data<float>()[3], 4.0f * i + 3);
    EXPECT_EQ(I64(*(*e)->Get("label")), 7 + i);
    EXPECT_FALSE((*e)->Get("nope").ok());
  }
  auto e = (*it)->Next();
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->has_value());
}

TEST(FromTensorSlices, MismatchedRowsNameTheComponent) {
  auto it = Dataset::from_tensor_slices(Element({I64Vector({1, 2}), I64Vector({1, 2, 3})})).make_iterator();
  ASSERT_FALSE(it.ok());
  EXPECT_NE(it.status().message().find("component 1 has 3 rows"), std::string::npos) << it.status().ToString();
}

TEST(Map, AppliesAndNamesFailingElement) {
  EXPECT_EQ(Collect(Dataset::range(4).map(AddConst(10))), Iota(10, 14));
  auto ds = Dataset::range(5).map([](Element e) -> Result<Element> {
    if (I64(e[0]) == 3) return InvalidArgument("three is bad");
    return e;
  });
  auto it = ds.make_iterator();
  ASSERT_TRUE(it.ok());
  std::vector<int64_t> got;
  Status last;
  for (int i = 0; i < 6; ++i) {
    auto e = (*it)->Next();
    if (!e.ok()) {
      last = e.status();
      continue;
    }
    if (!e->has_value()) break;
    got.push_back(I64((**e)[0]));
  }
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 4}));  // the failed element is skipped after the error
  EXPECT_NE(last.message().find("element 3"), std::string::npos) << last.ToString();
  EXPECT_NE(last.message().find("three is bad"), std::string::npos);
  EXPECT_NE(last.message().find("map (stage 0)"), std::string::npos) << last.ToString();
}

TEST(Filter, KeepsMatching) {
  EXPECT_EQ(Collect(Dataset::range(10).filter([](const Element& e) -> Result<bool> { return I64(e[0]) % 3 == 0; })),
            (std::vector<int64_t>{0, 3, 6, 9}));
}

TEST(Batch, StacksAndKeepsOrDropsTheRemainder) {
  auto it = Dataset::range(7).batch(3).make_iterator();
  ASSERT_TRUE(it.ok());
  std::vector<Shape> shapes;
  std::vector<int64_t> values;
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
    const Tensor& t = (**e)[0];
    shapes.push_back(t.shape());
    for (int64_t i = 0; i < t.shape().dim(0); ++i) values.push_back(t.data<int64_t>()[i]);
  }
  EXPECT_EQ(shapes, (std::vector<Shape>{Shape{3}, Shape{3}, Shape{1}}));
  EXPECT_EQ(values, Iota(0, 7));
  auto it2 = Dataset::range(7).batch(3, {.drop_remainder = true}).make_iterator();
  int n = 0;
  while (true) {
    auto e = (*it2)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
    EXPECT_EQ((**e)[0].shape(), Shape{3});
    ++n;
  }
  EXPECT_EQ(n, 2);
}

// A batch the consumer has dropped is refilled in place; one it still holds (or a view of
// it) is never overwritten.
TEST(Batch, RecyclesOnlyBatchesTheConsumerDropped) {
  auto it = Dataset::range(1000).batch(4).make_iterator();
  ASSERT_TRUE(it.ok());
  Element held;
  bool end = false;
  ASSERT_TRUE((*it)->GetNext(&held, &end).ok());
  const void* held_buffer = held[0].raw_data();
  auto view = held[0].Slice(0, 1, 2);
  ASSERT_TRUE(view.ok());
  std::set<const void*> seen{held_buffer};
  Element e;
  for (int b = 1; b < 40; ++b) {
    ASSERT_TRUE((*it)->GetNext(&e, &end).ok());
    ASSERT_FALSE(end);
    EXPECT_NE(e[0].raw_data(), held_buffer) << "batch " << b << " reused a buffer the consumer holds";
    for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(e[0].data<int64_t>()[i], 4 * b + i) << "batch " << b;
    seen.insert(e[0].raw_data());
  }
  EXPECT_EQ(held[0].data<int64_t>()[3], 3) << "a held batch was overwritten";
  EXPECT_EQ(view->data<int64_t>()[0], 1);
  // `e` is overwritten each time, so after the first few batches they cycle through a
  // handful of buffers instead of a fresh allocation per batch.
  EXPECT_LE(seen.size(), 6u);
}

TEST(Batch, ShapeMismatchSuggestsPaddedBatch) {
  auto ds = Dataset::range(4).map([](Element e) -> Result<Element> {
    return Element({Tensor(DType::kF32, Shape{I64(e[0]) + 1})});
  });
  auto it = ds.batch(2).make_iterator();
  ASSERT_TRUE(it.ok());
  auto e = (*it)->Next();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("padded_batch"), std::string::npos) << e.status().ToString();
  EXPECT_NE(e.status().message().find("f32[1]"), std::string::npos) << e.status().ToString();
}

TEST(Batch, ZeroBatchSizeIsAnError) {
  auto it = Dataset::range(4).batch(0).make_iterator();
  ASSERT_FALSE(it.ok());
  EXPECT_EQ(it.status().code(), StatusCode::kInvalidArgument);
}

TEST(PaddedBatch, PadsToTheLongestOrTheGivenShape) {
  auto ds = Dataset::range(1, 4).map([](Element e) -> Result<Element> {
    const int64_t n = I64(e[0]);
    Tensor t(DType::kI32, Shape{n});
    for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(n);
    return Element({t});
  });
  auto it = ds.padded_batch(3, {.padding_value = -1}).make_iterator();
  ASSERT_TRUE(it.ok());
  auto e = (*it)->Next();
  ASSERT_TRUE(e.ok() && e->has_value());
  const Tensor& t = (**e)[0];
  ASSERT_EQ(t.shape(), (Shape{3, 3}));
  std::vector<int32_t> v(t.data<int32_t>(), t.data<int32_t>() + 9);
  EXPECT_EQ(v, (std::vector<int32_t>{1, -1, -1, 2, 2, -1, 3, 3, 3}));

  auto it2 = ds.padded_batch(2, {.padded_shapes = {{5}}}).make_iterator();
  auto e2 = (*it2)->Next();
  ASSERT_TRUE(e2.ok() && e2->has_value());
  EXPECT_EQ((**e2)[0].shape(), (Shape{2, 5}));
  auto it3 = ds.padded_batch(3, {.padded_shapes = {{2}}}).make_iterator();
  auto e3 = (*it3)->Next();
  ASSERT_FALSE(e3.ok());
  EXPECT_NE(e3.status().message().find("longer than its padded size 2"), std::string::npos) << e3.status().ToString();
}

TEST(Shuffle, SeededIsAPermutationAndRepeatable) {
  auto ds = Dataset::range(100).shuffle(16, {.seed = 42});
  auto a = Collect(ds), b = Collect(ds);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, Iota(0, 100));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(0, 100));
  EXPECT_NE(Collect(Dataset::range(100).shuffle(16, {.seed = 43})), a);
}

TEST(Shuffle, ReshufflesEachEpochUnlessToldNot) {
  auto two = Collect(Dataset::range(50).shuffle(50, {.seed = 1}).repeat(2));
  ASSERT_EQ(two.size(), 100u);
  EXPECT_NE(std::vector<int64_t>(two.begin(), two.begin() + 50), std::vector<int64_t>(two.begin() + 50, two.end()));
  auto same = Collect(Dataset::range(50).shuffle(50, {.seed = 1, .reshuffle_each_iteration = false}).repeat(2));
  EXPECT_EQ(std::vector<int64_t>(same.begin(), same.begin() + 50), std::vector<int64_t>(same.begin() + 50, same.end()));
}

TEST(Shuffle, UnseededDiffersBetweenDatasets) {
  EXPECT_NE(Collect(Dataset::range(200).shuffle(200)), Collect(Dataset::range(200).shuffle(200)));
}

TEST(Prefetch, PassesEverythingThroughInOrder) {
  EXPECT_EQ(Collect(Dataset::range(1000).prefetch(4)), Iota(0, 1000));
  EXPECT_EQ(Collect(Dataset::range(1000).prefetch(AUTOTUNE)), Iota(0, 1000));
  auto it = Dataset::range(3).prefetch(-5).make_iterator();
  EXPECT_FALSE(it.ok());
}

TEST(Prefetch, DeliversErrorsInPlace) {
  auto ds = Dataset::range(5).map([](Element e) -> Result<Element> {
    if (I64(e[0]) == 2) return Corruption("bad record");
    return e;
  }).prefetch(2);
  auto it = ds.make_iterator();
  std::vector<std::string> seq;
  while (true) {
    auto e = (*it)->Next();
    if (!e.ok()) {
      seq.push_back("E");
      continue;
    }
    if (!e->has_value()) break;
    seq.push_back(std::to_string(I64((**e)[0])));
  }
  EXPECT_EQ(seq, (std::vector<std::string>{"0", "1", "E", "3", "4"}));
}

TEST(RepeatTakeSkip, Compose) {
  EXPECT_EQ(Collect(Dataset::range(3).repeat(3)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(Collect(Dataset::range(3).repeat().take(7)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(Collect(Dataset::range(10).skip(7)), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_TRUE(Collect(Dataset::range(10).skip(-1)).empty());
  EXPECT_EQ(Collect(Dataset::range(10).take(-1)), Iota(0, 10));
  EXPECT_TRUE(Collect(Dataset::range(0).repeat()).empty());  // an empty input ends a forever-repeat
}

TEST(Shard, TakesEveryNth) {
  EXPECT_EQ(Collect(Dataset::range(10).shard(3, 1)), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_FALSE(Dataset::range(10).shard(3, 3).make_iterator().ok());
}

TEST(Enumerate, PrependsTheIndex) {
  auto it = Dataset::range(10, 13).enumerate(5).make_iterator();
  for (int i = 0; i < 3; ++i) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok() && e->has_value());
    EXPECT_EQ(I64((**e)[0]), 5 + i);
    EXPECT_EQ(I64((**e)[1]), 10 + i);
  }
}

TEST(Zip, PairsUpAndEndsWithTheShortest) {
  auto it = Dataset::zip({Dataset::range(5), Dataset::range(100, 103)}).make_iterator();
  int n = 0;
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
    EXPECT_EQ((*e)->size(), 2u);
    EXPECT_EQ(I64((**e)[1]), 100 + I64((**e)[0]));
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(IgnoreErrors, DropsAndCounts) {
  auto ds = Dataset::range(10)
                .map([](Element e) -> Result<Element> {
                  if (I64(e[0]) % 4 == 1) return Corruption("corrupt");
                  return e;
                })
                .ignore_errors();
  auto it = ds.make_iterator();
  std::vector<int64_t> got;
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
    got.push_back(I64((**e)[0]));
  }
  EXPECT_EQ(got, (std::vector<int64_t>{0, 2, 3, 4, 6, 7, 8}));
  int64_t ignored = 0;
  for (const auto& s : (*it)->Stats())
    if (s.name == "ignore_errors") ignored = s.errors_ignored;
  EXPECT_EQ(ignored, 3);
}

TEST(Cache, MemoryCacheRunsTheInputOnce) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto ds = Dataset::range(5)
                .map([calls](Element e) -> Result<Element> {
                  ++*calls;
                  return e;
                })
                .cache()
                .repeat(3);
  auto v = Collect(ds);
  EXPECT_EQ(v.size(), 15u);
  EXPECT_EQ(std::vector<int64_t>(v.begin() + 10, v.end()), Iota(0, 5));
  EXPECT_EQ(calls->load(), 5);
}

TEST(Cache, FileCacheIsReadByALaterIterator) {
  const std::string path = strata::test::TempPath("strata_cache_test.bin");
  std::filesystem::remove(path);
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto ds = Dataset::range(20)
                .map([calls](Element e) -> Result<Element> {
                  ++*calls;
                  return Element({"x", "sq"}, {e[0], Scalar<float>(static_cast<float>(I64(e[0]) * I64(e[0])))});
                })
                .cache(path);
  EXPECT_EQ(Collect(ds), Iota(0, 20));
  EXPECT_EQ(calls->load(), 20);
  ASSERT_TRUE(std::filesystem::exists(path));
  auto it = ds.make_iterator();
  for (int i = 0; i < 20; ++i) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok() && e->has_value()) << e.status().ToString();
    EXPECT_EQ(*(*e)->Get("sq")->data<float>(), static_cast<float>(i * i));
  }
  EXPECT_EQ(calls->load(), 20);  // read back from the file

  // A flipped byte in a payload is reported with the file and offset.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    char c;
    f.read(&c, 1);
    f.seekp(40);
    c ^= 0x5a;
    f.write(&c, 1);
  }
  auto bad = ds.make_iterator();
  ASSERT_TRUE(bad.ok());
  auto e = (*bad)->Next();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(path), std::string::npos) << e.status().ToString();
  EXPECT_NE(e.status().message().find("at byte 8"), std::string::npos) << e.status().ToString();
  std::filesystem::remove(path);
}

TEST(Cache, NotAFileCacheIsReported) {
  const std::string path = strata::test::TempPath("strata_not_cache.bin");
  std::ofstream(path) << "hello world, not a cache";
  auto it = Dataset::range(3).cache(path).make_iterator();
  ASSERT_FALSE(it.ok());
  EXPECT_NE(it.status().message().find("bad magic"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Options, WithOptionsAppliesPipelineWide) {
  // A deterministic=false parallel map may reorder; with_options placed before or after it
  // governs it either way. Check that the flag reaches the stage: element 0 is slow.
  auto slow_first = [](Element e) -> Result<Element> {
    if (I64(e[0]) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return e;
  };
  auto nondet = Dataset::range(8).with_options({.deterministic = false}).map(slow_first, {.num_parallel_calls = 3});
  auto v = Collect(nondet);
  ASSERT_EQ(v.size(), 8u);
  EXPECT_NE(v[0], 0);  // handed out as soon as ready
  auto det = Dataset::range(8).map(slow_first, {.num_parallel_calls = 3});
  EXPECT_EQ(Collect(det), Iota(0, 8));
  // The stage's own setting overrides the pipeline's.
  auto over = Dataset::range(8)
                  .map(slow_first, {.num_parallel_calls = 3, .deterministic = true})
                  .with_options({.deterministic = false});
  EXPECT_EQ(Collect(over), Iota(0, 8));
}

TEST(Stats, CountElementsPerStage) {
  auto ds = Dataset::range(100).map(AddConst(1), {.num_parallel_calls = 2}).batch(10).prefetch(2);
  auto it = ds.make_iterator();
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
  }
  auto stats = (*it)->Stats();
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(stats[0].name, "range");
  EXPECT_EQ(stats[0].elements, 100);
  EXPECT_EQ(stats[1].name, "parallel_map");
  EXPECT_EQ(stats[1].elements, 100);
  EXPECT_EQ(stats[1].parallelism, 2);
  EXPECT_EQ(stats[2].name, "batch");
  EXPECT_EQ(stats[2].elements, 10);
  EXPECT_EQ(stats[2].inputs, 100);
  EXPECT_EQ(stats[2].bytes, 800);
  EXPECT_EQ(stats[3].name, "prefetch");
  EXPECT_EQ(stats[3].buffer_capacity, 2);
  EXPECT_NE((*it)->StatsTable().find("parallel_map"), std::string::npos);
}

}  // namespace
}  // namespace strata::data
