// list_files, TFRecordDataset (sequential and parallel reads) and the Example parse stage,
// over real files written by the records layer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "strata/data/sources.h"
#include "strata/record/example.h"
#include "strata/record/record_writer.h"

namespace strata::data {
namespace {

namespace fs = std::filesystem;

class TFRecordTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/strata_tfrecord_" + std::to_string(::getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // File f holds records "f<f>-r<i>" as Examples {id: f*1000+i, name: bytes, x: floats[2]}.
  std::string Write(int f, int records, record::Compression c = record::Compression::kNone) {
    const std::string path = dir_ + "/part-" + std::to_string(f) + ".tfrecord";
    auto w = record::RecordWriter::Open(path, {.compression = c});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    record::ExampleBuilder b;
    for (int i = 0; i < records; ++i) {
      b.Clear();
      const int64_t id = f * 1000 + i;
      const std::string name = "f" + std::to_string(f) + "-r" + std::to_string(i);
      b.AddInt64s("id", std::span(&id, 1));
      b.AddBytes("name", std::string_view(name));
      const float x[2] = {static_cast<float>(f), static_cast<float>(i) * 0.5f};
      b.AddFloats("x", std::span(x, 2));
      EXPECT_TRUE((*w)->WriteRecord(b.Finish()).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());
    return path;
  }

  static MapFn Parser() {
    auto fn = ParseExampleFn({{.key = "id", .type = record::FeatureKind::kInt64},
                              {.key = "name", .type = record::FeatureKind::kBytes},
                              {.key = "x", .type = record::FeatureKind::kFloat, .shape = {2}}});
    EXPECT_TRUE(fn.ok()) << fn.status().ToString();
    return *fn;
  }

  static std::vector<int64_t> Ids(const Dataset& ds, Status* error = nullptr) {
    auto it = ds.make_iterator();
    EXPECT_TRUE(it.ok()) << it.status().ToString();
    std::vector<int64_t> ids;
    while (true) {
      auto e = (*it)->Next();
      if (!e.ok()) {
        if (error) *error = e.status();
        else ADD_FAILURE() << e.status().ToString();
        if (!error) break;
        continue;
      }
      if (!e->has_value()) break;
      ids.push_back(*(*e)->Get("id")->data<int64_t>());
    }
    return ids;
  }

  std::string dir_;
};

TEST_F(TFRecordTest, ListFilesGlobsSortsAndShuffles) {
  for (int f : {2, 0, 1}) Write(f, 1);
  std::ofstream(dir_ + "/other.txt") << "x";
  auto files = list_files(dir_ + "/*.tfrecord");
  ASSERT_TRUE(files.ok());
  auto it = files->make_iterator();
  std::vector<std::string> names;
  while (true) {
    auto e = (*it)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
    names.push_back(fs::path(*TensorToString((**e)[0])).filename());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"part-0.tfrecord", "part-1.tfrecord", "part-2.tfrecord"}));
  auto none = list_files(dir_ + "/*.nothing");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("*.nothing"), std::string::npos);
  auto shuffled = list_files(dir_ + "/*.tfrecord", {.shuffle = true, .seed = 3});
  ASSERT_TRUE(shuffled.ok());
}

TEST_F(TFRecordTest, ReadsAndParsesEveryRecordInOrder) {
  std::vector<std::string> paths;
  for (int f = 0; f < 3; ++f) paths.push_back(Write(f, 5 + f));
  auto ids = Ids(TFRecordDataset(paths).map(Parser()));
  std::vector<int64_t> want;
  for (int f = 0; f < 3; ++f)
    for (int i = 0; i < 5 + f; ++i) want.push_back(f * 1000 + i);
  EXPECT_EQ(ids, want);

  auto it = TFRecordDataset(paths).map(Parser()).make_iterator();
  auto e = (*it)->Next();
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ(*TensorToString(*(*e)->Get("name")), "f0-r0");
  auto x = (*e)->Get("x");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->shape(), Shape{2});
}

TEST_F(TFRecordTest, ParallelReadsInterleaveFilesDeterministically) {
  std::vector<std::string> paths;
  for (int f = 0; f < 4; ++f) paths.push_back(Write(f, 3, f % 2 ? record::Compression::kGzip : record::Compression::kNone));
  auto ids = Ids(TFRecordDataset(paths, {.num_parallel_reads = 2}).map(Parser()));
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1000, 1, 1001, 2, 1002, 2000, 3000, 2001, 3001, 2002, 3002}));
  for (int64_t par : std::vector<int64_t>{2, AUTOTUNE}) {
    auto again = Ids(TFRecordDataset(paths, {.num_parallel_reads = par}).map(Parser(), {.num_parallel_calls = 2}));
    if (par == 2) EXPECT_EQ(again, ids);
    std::multiset<int64_t> a(again.begin(), again.end()), b(ids.begin(), ids.end());
    EXPECT_EQ(a, b);
  }
  auto nd = Ids(TFRecordDataset(paths, {.num_parallel_reads = 3}).map(Parser()).with_options({.deterministic = false}));
  std::multiset<int64_t> a(nd.begin(), nd.end()), b(ids.begin(), ids.end());
  EXPECT_EQ(a, b);
}

TEST_F(TFRecordTest, CorruptRecordNamesFileAndOffsetThenTheNextFileIsRead) {
  const std::string a = Write(0, 4), b = Write(1, 2);
  {
    std::fstream f(a, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-6, std::ios::end);  // inside the last record's data
    f.put('\x7f');
  }
  Status err;
  auto ids = Ids(TFRecordDataset({a, b}).map(Parser()), &err);
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2, 1000, 1001}));
  EXPECT_EQ(err.code(), StatusCode::kCorruption) << err.ToString();
  EXPECT_NE(err.message().find("part-0.tfrecord"), std::string::npos) << err.ToString();
  // ignore_errors drops the bad record and goes on.
  EXPECT_EQ(Ids(TFRecordDataset({a, b}).ignore_errors().map(Parser())), (std::vector<int64_t>{0, 1, 2, 1000, 1001}));
  // A missing file is an error naming it.
  Status missing;
  Ids(TFRecordDataset({dir_ + "/nope.tfrecord"}), &missing);
  EXPECT_NE(missing.message().find("nope.tfrecord"), std::string::npos) << missing.ToString();
}

TEST_F(TFRecordTest, ParseErrorsNameTheFeature) {
  const std::string a = Write(0, 1);
  auto bad = ParseExampleFn({{.key = "label", .type = record::FeatureKind::kInt64}});
  ASSERT_TRUE(bad.ok());
  Status err;
  Ids(TFRecordDataset({a}).map(*bad), &err);
  EXPECT_NE(err.message().find("label"), std::string::npos) << err.ToString();
  EXPECT_FALSE(ParseExampleFn({{.key = "img", .type = record::FeatureKind::kBytes, .shape = {2}}}).ok());
}

TEST_F(TFRecordTest, ResumeMidFileIncludingCompressed) {
  std::vector<std::string> paths;
  for (int f = 0; f < 3; ++f) paths.push_back(Write(f, 6, f == 1 ? record::Compression::kZlib : record::Compression::kNone));
  for (int64_t par : {int64_t{1}, int64_t{2}}) {
    auto ds = TFRecordDataset(paths, {.num_parallel_reads = par}).map(Parser()).shuffle(4, {.seed = 9}).repeat(2);
    const auto all = Ids(ds);
    ASSERT_EQ(all.size(), 36u);
    for (int k : {1, 5, 8, 20, 33}) {
      auto it = ds.make_iterator();
      for (int i = 0; i < k; ++i) ASSERT_TRUE((*it)->Next().ok());
      auto state = (*it)->Save();
      ASSERT_TRUE(state.ok()) << state.status().ToString();
      auto resumed = ds.make_iterator();
      ASSERT_TRUE((*resumed)->Restore(*state).ok());
      std::vector<int64_t> rest;
      while (true) {
        auto e = (*resumed)->Next();
        ASSERT_TRUE(e.ok()) << e.status().ToString();
        if (!e->has_value()) break;
        rest.push_back(*(*e)->Get("id")->data<int64_t>());
      }
      EXPECT_EQ(rest, std::vector<int64_t>(all.begin() + k, all.end())) << "par " << par << " k " << k;
    }
  }
}

}  // namespace
}  // namespace strata::data
