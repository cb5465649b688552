// (3) A seeded pipeline yields the identical sequence for any thread count.
// (4) An interrupted-and-resumed iteration yields exactly the uninterrupted sequence.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "strata/data/dataset.h"
#include "strata/data/iterator_state.h"

namespace strata::data {
namespace {

int64_t I64(const Tensor& t) { return *t.data<int64_t>(); }

// A flat record of the whole sequence: every value of every component of every element.
std::vector<double> Flatten(const Element& e) {
  std::vector<double> v;
  for (const auto& t : e.tensors) {
    Tensor c = t.Contiguous();
    for (int64_t i = 0; i < c.num_elements(); ++i) {
      switch (c.dtype()) {
        case DType::kI64: v.push_back(static_cast<double>(c.data<int64_t>()[i])); break;
        case DType::kF32: v.push_back(c.data<float>()[i]); break;
        case DType::kI32: v.push_back(c.data<int32_t>()[i]); break;
        case DType::kU8: v.push_back(c.data<uint8_t>()[i]); break;
        default: v.push_back(-1);
      }
    }
  }
  return v;
}

std::vector<std::vector<double>> Drain(Iterator* it, int64_t limit = -1) {
  std::vector<std::vector<double>> out;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    auto e = it->Next();
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok() || !e->has_value()) break;
    out.push_back(Flatten(**e));
  }
  return out;
}

std::vector<std::vector<double>> All(const Dataset& ds) {
  auto it = ds.make_iterator();
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  return Drain(it->get());
}

// A map whose cost varies per element and whose output depends on its generator: an
// "augmentation".
MapRngFn Augment() {
  return [](Element e, Rng& rng) -> Result<Element> {
    const int64_t x = I64(e[0]);
    if (x % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    Tensor noise(DType::kF32, Shape{3});
    for (int i = 0; i < 3; ++i) noise.data<float>()[i] = rng.UniformFloat(0, 1);
    return Element({e[0], noise});
  };
}

Dataset SeededPipeline(int64_t threads, bool deterministic = true) {
  return Dataset::range(200)
      .shuffle(32, {.seed = 7})
      .map_with_rng(Augment(), {.num_parallel_calls = threads, .seed = 99})
      .repeat(2)
      .batch(8, {.drop_remainder = true})
      .prefetch(threads > 1 ? threads : 1)
      .with_options({.deterministic = deterministic});
}

TEST(Determinism, SameSequenceForAnyThreadCount) {
  const auto one = All(SeededPipeline(1));
  ASSERT_EQ(one.size(), 50u);
  for (int64_t threads : std::vector<int64_t>{2, 3, 8, AUTOTUNE}) EXPECT_EQ(All(SeededPipeline(threads)), one) << "threads=" << threads;
  EXPECT_EQ(All(SeededPipeline(1)), one);  // and on every run
}

TEST(Determinism, NonDeterministicYieldsTheSameMultiset) {
  auto sorted = [](std::vector<std::vector<double>> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  // Each element carries its id and its generator's numbers: the same set, any order.
  auto elems = [](int64_t threads, bool det) {
    return All(Dataset::range(300)
                   .map_with_rng(Augment(), {.num_parallel_calls = threads, .seed = 5})
                   .with_options({.deterministic = det}));
  };
  auto a = elems(1, true), b = elems(4, false);
  EXPECT_EQ(sorted(a), sorted(b));
}

TEST(Determinism, ParallelInterleaveMatchesSequential) {
  auto files = [](int64_t par, bool det) {
    return Dataset::range(6)
        .interleave([](const Element& e) -> Result<Dataset> {
                      const int64_t f = I64(e[0]);
                      return Dataset::range(f * 100, f * 100 + 5 + f);  // files of different lengths
                    },
                    {.cycle_length = 3, .block_length = 2, .num_parallel_calls = par, .deterministic = det});
  };
  const auto seq = All(files(1, true));
  ASSERT_EQ(seq.size(), static_cast<size_t>(5 + 6 + 7 + 8 + 9 + 10));
  // tf.data's order: 0,1 from file 0, 100,101 from file 1, 200,201 from file 2, 2,3 ...
  EXPECT_EQ(seq[0][0], 0);
  EXPECT_EQ(seq[1][0], 1);
  EXPECT_EQ(seq[2][0], 100);
  EXPECT_EQ(seq[4][0], 200);
  EXPECT_EQ(seq[6][0], 2);
  for (int64_t par : std::vector<int64_t>{2, 3, AUTOTUNE}) EXPECT_EQ(All(files(par, true)), seq) << par;
  auto nd = All(files(3, false));
  std::sort(nd.begin(), nd.end());
  auto s = seq;
  std::sort(s.begin(), s.end());
  EXPECT_EQ(nd, s);
}

// Runs `ds` for k elements, saves, and checks that a fresh iterator restored from the
// state yields exactly what the original yields after k.
void ExpectResumeMatches(const Dataset& ds, int64_t k, const char* what) {
  auto it = ds.make_iterator();
  ASSERT_TRUE(it.ok()) << what;
  auto head = Drain(it->get(), k);
  ASSERT_EQ(static_cast<int64_t>(head.size()), k) << what;
  auto state = (*it)->Save();
  ASSERT_TRUE(state.ok()) << what << ": " << state.status().ToString();
  auto rest = Drain(it->get());
  it->reset();

  auto resumed = ds.make_iterator();
  ASSERT_TRUE(resumed.ok());
  Status s = (*resumed)->Restore(*state);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  auto rest2 = Drain(resumed->get());
  EXPECT_EQ(rest2, rest) << what << " resumed after " << k;
  EXPECT_FALSE(rest.empty()) << what;
  // And the full uninterrupted sequence is head + rest.
  auto whole = All(ds);
  head.insert(head.end(), rest.begin(), rest.end());
  EXPECT_EQ(whole, head) << what;
}

TEST(SaveRestore, InterruptedEqualsUninterrupted) {
  ExpectResumeMatches(Dataset::range(100).skip(3).take(90).enumerate(), 17, "range/skip/take/enumerate");
  ExpectResumeMatches(Dataset::range(100).shuffle(20, {.seed = 3}).repeat(3).shard(2, 1), 55, "shuffle/repeat/shard");
  ExpectResumeMatches(SeededPipeline(1), 13, "seeded pipeline, 1 thread");
  ExpectResumeMatches(SeededPipeline(4), 13, "seeded pipeline, 4 threads");
  ExpectResumeMatches(SeededPipeline(AUTOTUNE), 31, "seeded pipeline, autotune");
  ExpectResumeMatches(Dataset::range(50).map([](Element e) -> Result<Element> { return e; }).cache().repeat(3), 70,
                      "memory cache");
  ExpectResumeMatches(Dataset::zip({Dataset::range(40), Dataset::range(40).shuffle(8, {.seed = 1})})
                          .filter([](const Element& e) -> Result<bool> { return I64(e[0]) % 3 != 0; })
                          .padded_batch(3),
                      4, "zip/filter/padded_batch");
  for (int64_t par : {int64_t{1}, int64_t{3}}) {
    auto ds = Dataset::range(5).interleave(
        [](const Element& e) -> Result<Dataset> {
          const int64_t f = I64(e[0]);
          return Dataset::range(f * 100, f * 100 + 7).map([](Element x) -> Result<Element> { return x; });
        },
        {.cycle_length = 2, .block_length = 3, .num_parallel_calls = par});
    for (int64_t k : {1, 4, 11, 20}) ExpectResumeMatches(ds, k, par == 1 ? "interleave" : "parallel interleave");
  }
}

// A shuffle over an input that replays from its start (range, a cache) saves where its
// buffered elements came in the input's order; over any other input (a map), the elements.
TEST(SaveRestore, ShuffleBufferSavedByPositionOrByContent) {
  auto identity = [](Element e) -> Result<Element> { return e; };
  ExpectResumeMatches(Dataset::range(60).map(identity).shuffle(16, {.seed = 5}).repeat(2), 70, "shuffle by content");
  for (int64_t k : {1, 16, 59, 60, 61, 100, 119})
    ExpectResumeMatches(Dataset::range(60).shuffle(16, {.seed = 5}).repeat(2), k, "shuffle by position");
}

// 1 KiB elements: a cached input's shuffle buffer of 256 costs 8 bytes a slot in the state;
// while a non-deterministic cache is still filling (first epoch), its elements are saved.
TEST(SaveRestore, ShuffleOverACacheSavesPositionsNotElements) {
  auto kib = [](Element e) -> Result<Element> {
    Tensor t(DType::kF32, Shape{256});
    float* p = t.data<float>();
    for (int i = 0; i < 256; ++i) p[i] = static_cast<float>(I64(e[0]) * 1000 + i);
    return Element({std::move(t)});
  };
  for (bool deterministic : {true, false}) {
    auto ds = Dataset::range(300).map(kib).with_options({.deterministic = deterministic}).cache().shuffle(256, {.seed = 9}).repeat(2);
    for (int64_t k : {100, 400}) {
      SCOPED_TRACE(std::string(deterministic ? "deterministic" : "non-deterministic") + ", after " + std::to_string(k));
      auto it = ds.make_iterator();
      ASSERT_TRUE(it.ok());
      Drain(it->get(), k);
      auto state = (*it)->Save();
      ASSERT_TRUE(state.ok()) << state.status().ToString();
      const bool by_position = deterministic || k > 300;  // the second epoch reads the complete cache
      if (by_position) {
        EXPECT_LT(state->size(), 256u * 8 + 4096);
      } else {
        EXPECT_GT(state->size(), 200u * 1024);  // >= 200 buffered elements of 1 KiB
      }
      if (deterministic) ExpectResumeMatches(ds, k, "cache/shuffle");
    }
  }
}

TEST(SaveRestore, ShufflePositionsThatCannotBeReplayedAreAnError) {
  auto it = Dataset::range(100).shuffle(20, {.seed = 4}).make_iterator();
  ASSERT_TRUE(it.ok());
  Drain(it->get(), 50);
  auto state = (*it)->Save();
  ASSERT_TRUE(state.ok());
  // Onto a shorter input: it ends before the 69 elements taken (50 handed out, 19 buffered).
  auto shorter = Dataset::range(30).shuffle(20, {.seed = 4}).make_iterator();
  Status s = (*shorter)->Restore(*state);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("the input ended after 30 elements, but 69 were taken"), std::string::npos) << s.ToString();
  // A repeated position.
  auto parsed = IteratorState::Parse(*state);
  ASSERT_TRUE(parsed.ok());
  auto positions = parsed->GetString("0/positions");
  ASSERT_TRUE(positions.ok());
  ASSERT_EQ(positions->size(), 19u * 8);
  std::memcpy(positions->data() + 8, positions->data(), 8);
  parsed->SetString("0/positions", *positions);
  auto again = Dataset::range(100).shuffle(20, {.seed = 4}).make_iterator();
  Status s2 = (*again)->Restore(parsed->Serialize());
  EXPECT_EQ(s2.code(), StatusCode::kCorruption) << s2.ToString();
  EXPECT_NE(s2.message().find("is repeated or outside"), std::string::npos) << s2.ToString();
}

TEST(SaveRestore, ResumeAtEveryPositionOfASmallPipeline) {
  auto ds = Dataset::range(12).shuffle(5, {.seed = 11}).map(
      [](Element e) -> Result<Element> { return e; }, {.num_parallel_calls = 2}).batch(2).prefetch(2).repeat(2);
  for (int64_t k = 1; k < 12; ++k) ExpectResumeMatches(ds, k, "every position");
}

TEST(SaveRestore, BadStateIsAnError) {
  auto it = Dataset::range(10).make_iterator();
  ASSERT_TRUE(it.ok());
  Status s = (*it)->Restore("garbage");
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  auto other = Dataset::range(10).batch(2).prefetch(1).make_iterator();
  auto st = (*other)->Save();
  ASSERT_TRUE(st.ok());
  auto it2 = Dataset::range(10).shuffle(3, {.seed = 1}).make_iterator();
  Status s2 = (*it2)->Restore(*st);  // a state of a different pipeline
  EXPECT_FALSE(s2.ok());
  EXPECT_EQ(s2.code(), StatusCode::kNotFound) << s2.ToString();
}

}  // namespace
}  // namespace strata::data
