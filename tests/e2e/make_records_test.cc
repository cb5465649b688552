// `strata make-records`, run as a user runs it: an image folder in the flowers schema
// (deterministic for a seed and any thread count, balanced shards, bad files named or
// skipped) and Debian's Fashion-MNIST in TFDS's layout.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>

#include "cli_support.h"
#include "strata/datasets/make_records.h"
#include "strata/image/decode.h"
#include "strata/image/jpeg.h"
#include "strata/image/png.h"
#include "strata/record/example.h"
#include "strata/record/record_reader.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteImage(const fs::path& p, int h, int w, int seed, bool png) {
  image::Image img;
  uint8_t* d = img.Reset(h, w, 3);
  for (int i = 0; i < h * w * 3; ++i) d[i] = static_cast<uint8_t>((i * (seed + 3) + i / (w * 3) * 7) % 251);
  std::string bytes;
  ASSERT_TRUE((png ? image::EncodePng(img.view(), {}, &bytes) : image::EncodeJpeg(img.view(), {}, &bytes)).ok());
  std::ofstream(p, std::ios::binary) << bytes;
}

std::vector<record::Example> ReadExamples(const std::string& path) {
  std::vector<record::Example> out;
  auto reader = record::RecordReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  std::string_view rec;
  Status st;
  while ((st = (*reader)->ReadRecord(&rec)).ok()) {
    auto ex = record::DecodeExample(rec);
    EXPECT_TRUE(ex.ok());
    out.push_back(*ex);
  }
  EXPECT_TRUE(st.IsOutOfRange()) << st.ToString();
  return out;
}

std::vector<fs::path> Shards(const fs::path& dir) {
  std::vector<fs::path> v;
  for (auto& e : fs::directory_iterator(dir)) v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

class MakeRecordsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("make-records-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    from_ = root_ / "flowers";
    const char* classes[] = {"daisy", "roses", "tulips"};
    int seed = 0;
    for (int c = 0; c < 3; ++c) {
      fs::create_directories(from_ / classes[c]);
      for (int i = 0; i < 4 + c; ++i, ++seed)  // 4, 5, 6 images: 15 in all
        WriteImage(from_ / classes[c] / ("img" + std::to_string(i) + (i % 3 == 2 ? ".png" : ".jpg")),
                   40 + i * 7, 64 - i * 5, seed, i % 3 == 2);
    }
    std::ofstream(from_ / "roses" / "notes.txt") << "not an image: ignored";
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_, from_;
};

TEST_F(MakeRecordsCli, FlowersSchemaBalancedShardsAndDeterministicForAnyThreadCount) {
  const std::string common = " make-records --from " + from_.string() + " --shards 4 --image-size 32 --seed 7";
  auto one = RunCommand(Strata() + common + " --threads 1 --out " + (root_ / "a").string(), true);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = RunCommand(Strata() + common + " --threads 2 --out " + (root_ / "b").string(), true);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(one.output.find("wrote 15 examples in 4 files"), std::string::npos) << one.output;

  EXPECT_EQ(Slurp(root_ / "a" / "classes.txt"), "daisy\nroses\ntulips\n");
  const auto a = Shards(root_ / "a" / "train"), b = Shards(root_ / "b" / "train");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  const std::regex name(R"((\d\d)-32x32-(\d+)\.tfrec)");
  std::set<std::string> ids;
  std::map<int64_t, int> per_class;
  int total = 0;
  for (size_t s = 0; s < a.size(); ++s) {
    EXPECT_EQ(a[s].filename(), b[s].filename());
    EXPECT_EQ(Slurp(a[s]), Slurp(b[s])) << "shard " << s << " differs between 1 and 2 threads";
    std::smatch m;
    const std::string fname = a[s].filename().string();
    ASSERT_TRUE(std::regex_match(fname, m, name)) << fname;
    EXPECT_EQ(std::stoi(m[1]), static_cast<int>(s));
    const int count = std::stoi(m[2]);
    EXPECT_TRUE(count == 3 || count == 4) << "15 over 4 shards: 4, 4, 4, 3";
    const auto examples = ReadExamples(a[s].string());
    ASSERT_EQ(static_cast<int>(examples.size()), count);
    for (const auto& ex : examples) {
      const auto& f = ex.features;
      ASSERT_EQ(f.size(), 3u);
      const std::string id = f.at("id").bytes.at(0);
      EXPECT_TRUE(std::regex_match(id, std::regex("[0-9a-f]{9}"))) << id;
      EXPECT_TRUE(ids.insert(id).second) << "duplicate id " << id;
      const int64_t cls = f.at("class").int64s.at(0);
      ASSERT_GE(cls, 0);
      ASSERT_LT(cls, 3);
      ++per_class[cls];
      image::Image img;
      const std::string& jpg = f.at("image").bytes.at(0);
      ASSERT_EQ(image::SniffFormat(jpg), image::ImageFormat::kJpeg);
      auto hdr = image::ReadJpegHeader(jpg);
      ASSERT_TRUE(hdr.ok());
      EXPECT_EQ(hdr->height, 32);
      EXPECT_EQ(hdr->width, 32);
      EXPECT_EQ(hdr->channels, 3);
      ++total;
    }
  }
  EXPECT_EQ(total, 15);
  EXPECT_EQ(per_class[0], 4);
  EXPECT_EQ(per_class[1], 5);
  EXPECT_EQ(per_class[2], 6);

  // Another seed shuffles differently.
  auto other = RunCommand(Strata() + " make-records --from " + from_.string() +
                              " --shards 4 --image-size 32 --seed 8 --quiet --out " + (root_ / "c").string(), true);
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(Slurp(Shards(root_ / "c" / "train")[0]), Slurp(a[0]));
}

TEST_F(MakeRecordsCli, NoLabelWritesImageAndIdOnly) {
  auto r = RunCommand(Strata() + " make-records --from " + from_.string() + " --no-label --split test --shards 2" +
                          " --image-size 24 --quiet --out " + (root_ / "t").string(), true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto shards = Shards(root_ / "t" / "test");
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[0].filename().string(), "00-24x24-8.tfrec");
  for (const auto& ex : ReadExamples(shards[0].string())) {
    EXPECT_EQ(ex.features.count("class"), 0u);
    EXPECT_EQ(ex.features.count("id"), 1u);
    EXPECT_EQ(ex.features.count("image"), 1u);
  }
  EXPECT_FALSE(fs::exists(root_ / "t" / "classes.txt"));
}

TEST_F(MakeRecordsCli, BadImageIsNamedAndStopsUnlessSkipBad) {
  std::ofstream(from_ / "tulips" / "broken.jpg", std::ios::binary) << "\xff\xd8\xff\xe0 this is not a JPEG";
  auto r = RunCommand(Strata() + " make-records --from " + from_.string() + " --image-size 16 --out " +
                          (root_ / "x").string(), true);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("broken.jpg"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--skip-bad"), std::string::npos) << r.output;
  auto s = RunCommand(Strata() + " make-records --from " + from_.string() + " --image-size 16 --skip-bad --out " +
                          (root_ / "y").string(), true);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("skipped"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("broken.jpg"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("wrote 15 examples"), std::string::npos) << s.output;
}

TEST_F(MakeRecordsCli, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCommand(Strata() + " make-records --from " + from_.string()).exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " make-records --from x --out y --quality 0").exit_code, 2);
  EXPECT_EQ(RunCommand(Strata() + " make-records --bogus").exit_code, 2);
  auto missing = RunCommand(Strata() + " make-records --from /nonexistent/dir --out " + (root_ / "z").string(), true);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent/dir"), std::string::npos) << missing.output;
}

TEST(MakeRecordsFashionMnist, WritesTfdsLayoutFromDebianIdxFiles) {
  if (!fs::exists(std::string(datasets::kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/deps.sh installs it)";
  const fs::path out = fs::path(::testing::TempDir()) / ("fmnist-" + std::to_string(::getpid()));
  fs::remove_all(out);
  auto r = RunCommand(Strata() + " make-records --from fashion-mnist --shards 2 --out " + out.string(), true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote 70000 examples in 4 files"), std::string::npos) << r.output;
  const fs::path dir = datasets::FashionMnistRecordDir(out.string());
  EXPECT_EQ(Slurp(dir / "label.labels.txt").substr(0, 20), "T-shirt/top\nTrouser\n");
  EXPECT_NE(Slurp(dir / "dataset_info.json").find("\"shardLengths\": [\"30000\", \"30000\"]"), std::string::npos);

  auto idx = datasets::ReadIdxImages(std::string(datasets::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz");
  auto labels = datasets::ReadIdxLabels(std::string(datasets::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_TRUE(idx.ok() && labels.ok());
  const auto first = ReadExamples((dir / "fashion_mnist-test.tfrecord-00000-of-00002").string());
  const auto second = ReadExamples((dir / "fashion_mnist-test.tfrecord-00001-of-00002").string());
  ASSERT_EQ(first.size(), 5000u);
  ASSERT_EQ(second.size(), 5000u);
  std::map<int64_t, int> per_class;
  for (size_t i = 0; i < 10000; ++i) {
    const auto& ex = i < 5000 ? first[i] : second[i - 5000];
    const int64_t label = ex.features.at("label").int64s.at(0);
    ASSERT_EQ(label, (*labels)[i]);
    ++per_class[label];
    if (i % 997 == 0) {  // spot-check pixels: lossless PNG of the IDX image
      image::Image img;
      ASSERT_TRUE(image::DecodePng(ex.features.at("image").bytes.at(0), {.channels = 0}, &img).ok());
      ASSERT_EQ(img.channels(), 1);
      ASSERT_EQ(img.height(), 28);
      EXPECT_EQ(0, std::memcmp(img.data(), idx->pixels.data() + i * 784, 784)) << "test image " << i;
    }
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << c;
  fs::remove_all(out);
}

}  // namespace
}  // namespace strata::testing
