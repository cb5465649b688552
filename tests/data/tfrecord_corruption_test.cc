// Damaged records inside a running pipeline: TFRecordDataset files read through interleave
// (sequential and parallel), without ignore_errors (the error names the file and the byte
// offset of the damaged record, the stream goes on after it), with ignore_errors() (dropped,
// counted, every other record exactly once), with skip_corrupt_records (counted in the
// tfrecord stage) and saved/restored between the errors of one read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "strata/data/sources.h"
#include "strata/record/example.h"
#include "strata/record/record_writer.h"

namespace strata::data {
namespace {

namespace fs = std::filesystem;

// Four files of 12 records each, ids f*100+i; damaged: a data byte of 1:4 (bad data CRC), the
// length field of 2:7 (bad length CRC: the reader resynchronises on 2:8), and two records in
// a row, 3:5 and 3:6 (data CRC), so one read passes over two bad records.
class DamagedFiles : public testing::Test {
 protected:
  static constexpr int kFiles = 4, kRecords = 12;

  void SetUp() override {
    dir_ = testing::TempDir() + "/strata_tfrecord_damage_" + std::to_string(::getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (int f = 0; f < kFiles; ++f) {
      const std::string path = dir_ + "/part-" + std::to_string(f) + ".tfrecord";
      paths_.push_back(path);
      auto w = record::RecordWriter::Open(path);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      uint64_t offset = 0;
      record::ExampleBuilder b;
      for (int i = 0; i < kRecords; ++i) {
        b.Clear();
        const int64_t id = f * 100 + i;
        b.AddInt64s("id", std::span(&id, 1));
        b.AddBytes("pad", std::string(static_cast<size_t>(20 + 7 * i), 'a' + static_cast<char>(i)));
        const std::string rec(b.Finish());
        offsets_[id] = offset;
        offset += 12 + rec.size() + 4;  // length, its CRC, data, data CRC
        ASSERT_TRUE((*w)->WriteRecord(rec).ok());
      }
      ASSERT_TRUE((*w)->Close().ok());
    }
    Flip(1, 4, 12 + 3);  // a data byte
    Flip(2, 7, 2);       // a length byte
    Flip(3, 5, 12 + 5);
    Flip(3, 6, 12 + 5);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Flip(int file, int record, uint64_t at) {
    const int64_t id = file * 100 + record;
    damaged_.insert(id);
    std::fstream f(paths_[static_cast<size_t>(file)], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offsets_[id] + at));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(offsets_[id] + at));
    f.put(static_cast<char>(c ^ 0x40));
  }

  std::multiset<int64_t> Intact() const {
    std::multiset<int64_t> want;
    for (int f = 0; f < kFiles; ++f)
      for (int i = 0; i < kRecords; ++i)
        if (!damaged_.count(f * 100 + i)) want.insert(f * 100 + i);
    return want;
  }
  // "part-F.tfrecord at byte N" for each damaged record, the words its error must hold.
  std::set<std::string> DamageSites() const {
    std::set<std::string> sites;
    for (int64_t id : damaged_)
      sites.insert("part-" + std::to_string(id / 100) + ".tfrecord at byte " + std::to_string(offsets_.at(id)));
    return sites;
  }

  static MapFn Parser() {
    auto fn = ParseExampleFn({{.key = "id", .type = record::FeatureKind::kInt64}});
    EXPECT_TRUE(fn.ok());
    return *fn;
  }

  struct Run {
    std::vector<int64_t> ids;         // in arrival order
    std::vector<Status> errors;
    std::vector<std::string> events;  // ids and "error" in arrival order
  };
  // Reads `it` to the end, going on after errors unless stop_at_error.
  static Run Drain(Iterator* it, bool stop_at_error = false) {
    Run r;
    while (true) {
      auto e = it->Next();
      if (!e.ok()) {
        r.errors.push_back(e.status());
        r.events.push_back("error: " + e.status().message());
        if (stop_at_error) break;
        continue;
      }
      if (!e->has_value()) break;
      const int64_t id = *(*e)->Get("id")->data<int64_t>();
      r.ids.push_back(id);
      r.events.push_back(std::to_string(id));
    }
    return r;
  }

  // The pipelines under test: TFRecordDataset's own interleave (parallel reads) and an
  // explicit interleave of one-file TFRecordDatasets, sequential and with threads.
  std::vector<std::pair<std::string, Dataset>> Pipelines(TFRecordOptions o = {}) const {
    std::vector<std::pair<std::string, Dataset>> out;
    TFRecordOptions par = o;
    par.num_parallel_reads = 3;
    out.emplace_back("TFRecordDataset(num_parallel_reads=3)", TFRecordDataset(paths_, par));
    for (int64_t threads : {int64_t{1}, int64_t{2}}) {
      InterleaveFn open = [o](const Element& e) -> Result<Dataset> {
        STRATA_ASSIGN_OR_RETURN(std::string path, TensorToString(e[0]));
        return TFRecordDataset(std::vector<std::string>{path}, o);
      };
      out.emplace_back("interleave(num_parallel_calls=" + std::to_string(threads) + ")",
                       from_strings(paths_).interleave(open, {.cycle_length = kFiles, .num_parallel_calls = threads}));
    }
    return out;
  }

  std::string dir_;
  std::vector<std::string> paths_;
  std::map<int64_t, uint64_t> offsets_;
  std::set<int64_t> damaged_;
};

TEST_F(DamagedFiles, WithoutIgnoreErrorsTheErrorNamesFileAndOffsetAndTheStreamGoesOn) {
  for (auto& [name, ds] : Pipelines()) {
    SCOPED_TRACE(name);
    // A consumer that stops at the first error: it names a damaged record's file and offset.
    auto it = ds.map(Parser()).make_iterator();
    ASSERT_TRUE(it.ok());
    Run first = Drain(it->get(), /*stop_at_error=*/true);
    ASSERT_EQ(first.errors.size(), 1u);
    EXPECT_EQ(first.errors[0].code(), StatusCode::kCorruption) << first.errors[0].ToString();
    bool names_a_site = false;
    for (const auto& site : DamageSites()) names_a_site |= first.errors[0].message().find(site) != std::string::npos;
    EXPECT_TRUE(names_a_site) << first.errors[0].ToString();

    // Going on after each error: one error per damaged record, each naming its own file and
    // offset, and every intact record once.
    auto again = ds.map(Parser()).make_iterator();
    Run all = Drain(again->get());
    EXPECT_EQ(std::multiset<int64_t>(all.ids.begin(), all.ids.end()), Intact());
    std::set<std::string> named;
    for (const auto& e : all.errors)
      for (const auto& site : DamageSites())
        if (e.message().find(site) != std::string::npos) named.insert(site);
    EXPECT_EQ(all.errors.size(), damaged_.size());
    EXPECT_EQ(named, DamageSites());
  }
}

TEST_F(DamagedFiles, IgnoreErrorsSkipsAndCountsEachDamagedRecordAndDeliversEveryOtherOnce) {
  for (auto& [name, ds] : Pipelines()) {
    SCOPED_TRACE(name);
    auto it = ds.ignore_errors().map(Parser()).make_iterator();
    ASSERT_TRUE(it.ok());
    Run r = Drain(it->get());
    EXPECT_TRUE(r.errors.empty());
    EXPECT_EQ(std::multiset<int64_t>(r.ids.begin(), r.ids.end()), Intact());
    int64_t ignored = -1;
    for (const auto& s : (*it)->Stats())
      if (s.name == "ignore_errors") ignored = s.errors_ignored;
    EXPECT_EQ(ignored, static_cast<int64_t>(damaged_.size()));
  }
}

TEST_F(DamagedFiles, SkipCorruptRecordsCountsThemInTheTFRecordStage) {
  for (auto& [name, ds] : Pipelines({.skip_corrupt_records = true})) {
    SCOPED_TRACE(name);
    auto it = ds.map(Parser()).make_iterator();
    ASSERT_TRUE(it.ok());
    Run r = Drain(it->get());
    EXPECT_TRUE(r.errors.empty());
    EXPECT_EQ(std::multiset<int64_t>(r.ids.begin(), r.ids.end()), Intact());
    int64_t skipped = 0;
    for (const auto& s : (*it)->Stats())
      if (s.name == "tfrecord") skipped += s.errors_ignored;
    EXPECT_EQ(skipped, static_cast<int64_t>(damaged_.size()));
  }
}

TEST_F(DamagedFiles, SaveAndRestoreBetweenErrorsNeitherRepeatsNorLosesOne) {
  // Sequential reads of part-3 alone: record 4, then the two bad records 5 and 6 come from one
  // read, then 7. A save after each element must resume with exactly what follows it.
  const Dataset ds = TFRecordDataset(std::vector<std::string>{paths_[3]}).map(Parser());
  auto it = ds.make_iterator();
  const std::vector<std::string> all = Drain(it->get()).events;
  ASSERT_EQ(all.size(), static_cast<size_t>(kRecords));  // 10 records and 2 errors
  for (size_t k = 0; k <= all.size(); ++k) {
    auto first = ds.make_iterator();
    for (size_t i = 0; i < k; ++i) (void)(*first)->Next();
    auto state = (*first)->Save();
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    auto resumed = ds.make_iterator();
    ASSERT_TRUE((*resumed)->Restore(*state).ok());
    EXPECT_EQ(Drain(resumed->get()).events, std::vector<std::string>(all.begin() + static_cast<std::ptrdiff_t>(k), all.end()))
        << "saved after " << k << " elements";
  }
}

}  // namespace
}  // namespace strata::data
