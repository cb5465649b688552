// map_into and its fusion with batch (map_and_batch_dataset.cc): the fused path yields the
// unfused path's batches element for element, for any thread count; elements are written
// in place into their batch rows; state saved with batches in flight resumes exactly;
// errors fail their batch and name the element; batch buffers are recycled.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "strata/data/dataset.h"

namespace strata::data {
namespace {

int64_t I64(const Tensor& t) { return *t.data<int64_t>(); }

std::vector<double> Flatten(const Element& e) {
  std::vector<double> v;
  for (const auto& t : e.tensors) {
    Tensor c = t.Contiguous();
    for (int64_t i = 0; i < c.num_elements(); ++i) {
      if (c.dtype() == DType::kI64) v.push_back(static_cast<double>(c.data<int64_t>()[i]));
      else if (c.dtype() == DType::kF32) v.push_back(c.data<float>()[i]);
      else v.push_back(-1);
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
  if (!it.ok()) return {};
  return Drain(it->get());
}

// (x i64[] -> (noise f32[2, 3], x * 10 i64[]); every 7th element is slower, so with several
// threads elements finish out of order.
const ElementSpec kSpec{.dtypes = {DType::kF32, DType::kI64}, .shapes = {Shape{2, 3}, Shape{}}};

Status NoiseInto(Element in, Rng& rng, Element& out) {
  const int64_t x = I64(in[0]);
  if (x % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  for (int i = 0; i < 6; ++i) out[0].data<float>()[i] = rng.UniformFloat(0, 1) + static_cast<float>(x);
  *out[1].data<int64_t>() = x * 10;
  return Status::OK();
}

// The same function as map_with_rng (allocating its output): the reference.
Result<Element> NoiseAlloc(Element in, Rng& rng) {
  Element out({Tensor(DType::kF32, Shape{2, 3}), Tensor(DType::kI64, Shape{})});
  STRATA_RETURN_IF_ERROR(NoiseInto(std::move(in), rng, out));
  return out;
}

Dataset Pipeline(int64_t threads, bool fused, bool drop_remainder, bool deterministic = true, int64_t n = 37) {
  return Dataset::range(n)
      .shuffle(16, {.seed = 3})
      .repeat(2)
      .map_into(kSpec, NoiseInto, {.num_parallel_calls = threads, .seed = 42})
      .batch(5, {.drop_remainder = drop_remainder})
      .prefetch(2)
      .with_options({.deterministic = deterministic, .map_and_batch_fusion = fused});
}

Dataset Reference(bool drop_remainder, int64_t n = 37) {
  return Dataset::range(n)
      .shuffle(16, {.seed = 3})
      .repeat(2)
      .map_with_rng(NoiseAlloc, {.seed = 42})
      .batch(5, {.drop_remainder = drop_remainder});
}

TEST(MapAndBatch, FusedEqualsUnfusedForAnyThreadCount) {
  for (bool drop : {false, true}) {
    const auto want = All(Reference(drop));
    ASSERT_EQ(want.size(), drop ? 14u : 15u);  // 74 elements in batches of 5
    EXPECT_EQ(want.back().size(), drop ? 5u * 7 : 4u * 7);
    for (int64_t threads : std::vector<int64_t>{1, 2, 4, AUTOTUNE}) {
      EXPECT_EQ(All(Pipeline(threads, true, drop)), want) << "fused, threads=" << threads << " drop=" << drop;
      EXPECT_EQ(All(Pipeline(threads, false, drop)), want) << "unfused, threads=" << threads << " drop=" << drop;
    }
  }
}

TEST(MapAndBatch, NonDeterministicYieldsTheSameRows) {
  // Non-deterministic order may hand out a later batch first; the rows are the same.
  auto rows = [](const std::vector<std::vector<double>>& batches) {
    std::multiset<std::vector<double>> r;
    for (const auto& b : batches) {
      const size_t n = b.size() / 7;
      for (size_t i = 0; i < n; ++i) {
        std::vector<double> row(b.begin() + i * 6, b.begin() + (i + 1) * 6);
        row.push_back(b[n * 6 + i]);
        r.insert(row);
      }
    }
    return r;
  };
  const auto want = rows(All(Reference(false)));
  for (int64_t threads : {int64_t{2}, int64_t{4}}) EXPECT_EQ(rows(All(Pipeline(threads, true, false, false))), want);
}

TEST(MapAndBatch, ElementsAreWrittenInPlaceIntoTheirBatchRow) {
  std::mutex mu;
  std::map<int64_t, const void*> where;  // element value -> the address its image was given
  auto fn = [&](Element in, Rng& rng, Element& out) -> Status {
    {
      std::lock_guard<std::mutex> l(mu);
      where[I64(in[0])] = out[0].raw_data();
    }
    return NoiseInto(std::move(in), rng, out);
  };
  for (int64_t threads : {int64_t{1}, int64_t{3}}) {
    where.clear();
    auto it = Dataset::range(20).map_into(kSpec, fn, {.num_parallel_calls = threads}).batch(4).make_iterator();
    ASSERT_TRUE(it.ok());
    std::vector<Element> held;  // held, so no buffer is reused
    while (true) {
      auto e = (*it)->Next();
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      if (!e->has_value()) break;
      held.push_back(**e);
    }
    ASSERT_EQ(held.size(), 5u);
    for (const Element& b : held)
      for (int r = 0; r < 4; ++r) {
        const int64_t x = b[1].data<int64_t>()[r] / 10;
        EXPECT_EQ(where[x], static_cast<const char*>(b[0].raw_data()) + r * 6 * sizeof(float)) << "element " << x;
      }
  }
}

// Runs `ds` for k batches, saves, and checks that a fresh iterator restored from the state
// yields exactly what the original yields after k, and head + rest is the whole sequence.
void ExpectResumeMatches(const Dataset& ds, int64_t k, const std::string& what) {
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
  EXPECT_EQ(Drain(resumed->get()), rest) << what << " resumed after " << k;
  head.insert(head.end(), rest.begin(), rest.end());
  EXPECT_EQ(head, All(ds)) << what;
}

TEST(MapAndBatch, SaveWithBatchesInFlightResumesExactly) {
  // With workers ahead of the consumer, Save catches partly written batches (rows claimed,
  // some of the next batch done): they are saved with their rows and completed after Restore.
  for (int64_t threads : std::vector<int64_t>{1, 2, 4}) {
    for (int64_t k : {0, 1, 3, 7, 13}) {
      ExpectResumeMatches(Pipeline(threads, true, false), k, "threads=" + std::to_string(threads));
    }
  }
  // Directly at the root, no prefetch between the consumer and the fused stage.
  auto bare = Dataset::range(23).map_into(kSpec, NoiseInto, {.num_parallel_calls = 3, .seed = 1}).batch(4);
  for (int64_t k = 0; k < 6; ++k) ExpectResumeMatches(bare, k, "bare");
}

TEST(MapAndBatch, AFailingElementFailsItsBatchAndNamesIt) {
  auto fn = [](Element in, Rng& rng, Element& out) -> Status {
    if (I64(in[0]) == 13) return InvalidArgument("cannot decode record 13");
    return NoiseInto(std::move(in), rng, out);
  };
  for (int64_t threads : std::vector<int64_t>{1, 2, 4}) {
    auto it = Dataset::range(30).map_into(kSpec, fn, {.num_parallel_calls = threads}).batch(5).make_iterator();
    ASSERT_TRUE(it.ok());
    std::vector<int64_t> firsts;
    int errors = 0;
    while (true) {
      auto e = (*it)->Next();
      if (!e.ok()) {
        ++errors;
        const std::string m = e.status().ToString();
        EXPECT_NE(m.find("cannot decode record 13"), std::string::npos) << m;
        EXPECT_NE(m.find("element 13"), std::string::npos) << m;
        EXPECT_NE(m.find("row 3"), std::string::npos) << m;
        EXPECT_NE(m.find("map_into"), std::string::npos) << m;
        continue;  // the failed batch is skipped
      }
      if (!e->has_value()) break;
      firsts.push_back((**e)[1].data<int64_t>()[0] / 10);
    }
    EXPECT_EQ(errors, 1) << "threads=" << threads;
    EXPECT_EQ(firsts, (std::vector<int64_t>{0, 5, 15, 20, 25})) << "threads=" << threads;
  }
}

TEST(MapAndBatch, ABadSpecOrAReplacedComponentIsAnError) {
  auto bad = Dataset::range(4).map_into({.dtypes = {DType::kF32}, .shapes = {}}, NoiseInto).batch(2);
  auto it = bad.make_iterator();
  ASSERT_FALSE(it.ok());
  EXPECT_NE(it.status().ToString().find("map_into"), std::string::npos) << it.status().ToString();

  auto replaces = [](Element in, Rng&, Element& out) -> Status {
    out[1] = in[0];  // a new tensor instead of writing into the row
    out[0] = Tensor(DType::kF32, Shape{2, 3});
    return Status::OK();
  };
  for (bool fused : {true, false}) {
    auto r = Dataset::range(4).map_into(kSpec, replaces).batch(2).with_options({.map_and_batch_fusion = fused});
    auto it2 = r.make_iterator();
    ASSERT_TRUE(it2.ok());
    auto e = (*it2)->Next();
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().ToString().find("replaced component 0"), std::string::npos) << e.status().ToString();
  }
}

TEST(MapAndBatch, BatchBuffersAreRecycledOnlyOnceDropped) {
  // Dropping each batch: a handful of buffers serve 100 batches. Holding them: every one
  // stays intact (equal to the reference).
  auto ds = [] {
    return Dataset::range(400).map_into(kSpec, NoiseInto, {.num_parallel_calls = 2, .seed = 5}).batch(4);
  };
  std::set<const void*> buffers;
  {
    auto it = ds().make_iterator();
    ASSERT_TRUE(it.ok());
    while (true) {
      auto e = (*it)->Next();
      ASSERT_TRUE(e.ok());
      if (!e->has_value()) break;
      buffers.insert((**e)[0].raw_data());
    }
  }
  EXPECT_LE(buffers.size(), 6u);
  auto it = ds().make_iterator();
  std::vector<Element> held;
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
    held.push_back(**e);
  }
  auto ref = All(Dataset::range(400).map_with_rng(NoiseAlloc, {.seed = 5}).batch(4));
  ASSERT_EQ(held.size(), ref.size());
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(Flatten(held[i]), ref[i]) << "batch " << i;
}

TEST(MapAndBatch, StatisticsKeepTheMapAndBatchRows) {
  auto it = Dataset::range(40).map_into(kSpec, NoiseInto, {.num_parallel_calls = 2}).batch(8).make_iterator();
  ASSERT_TRUE(it.ok());
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
  }
  std::map<std::string, StageStatsSnapshot> by_name;
  for (const auto& s : (*it)->Stats()) by_name[s.name] = s;
  ASSERT_TRUE(by_name.count("parallel_map"));
  ASSERT_TRUE(by_name.count("batch"));
  EXPECT_EQ(by_name["parallel_map"].path, "0.0");
  EXPECT_EQ(by_name["parallel_map"].elements, 40);
  EXPECT_EQ(by_name["parallel_map"].inputs, 40);
  EXPECT_GT(by_name["parallel_map"].busy_ns, 0);
  EXPECT_EQ(by_name["parallel_map"].parallelism, 2);
  EXPECT_EQ(by_name["batch"].elements, 5);
  EXPECT_EQ(by_name["batch"].inputs, 40);
  EXPECT_EQ(by_name["batch"].bytes, 40 * (6 * 4 + 8));
}

}  // namespace
}  // namespace strata::data
