// IDX parsing and the Fashion-MNIST writer over small synthetic IDX files.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "strata/datasets/make_records.h"
#include "strata/image/png.h"
#include "strata/record/example.h"
#include "strata/record/record_reader.h"

namespace strata::datasets {
namespace {

namespace fs = std::filesystem;

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

void WriteGz(const fs::path& p, const std::string& data) {
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
  gzclose(f);
}

class Idx : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("idx-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void WriteSet(const std::string& stem, int n) {
    std::string img = Be32(0x803) + Be32(n) + Be32(28) + Be32(28), lbl = Be32(0x801) + Be32(n);
    for (int i = 0; i < n; ++i) {
      for (int p = 0; p < 784; ++p) img += static_cast<char>((p * 3 + i * 17) % 256);
      lbl += static_cast<char>(i % 10);
    }
    WriteGz(dir_ / (stem + "-images-idx3-ubyte.gz"), img);
    std::ofstream(dir_ / (stem + "-labels-idx1-ubyte"), std::ios::binary) << lbl;  // plain file also works
  }
  fs::path dir_;
};

TEST_F(Idx, WritesBothSplitsShardedWithLosslessPngs) {
  WriteSet("train", 25);
  WriteSet("t10k", 7);
  int64_t last_done = 0, last_total = 0;
  auto report = MakeFashionMnistRecords(
      (dir_ / "out").string(), {.source_dir = dir_.string(), .train_shards = 3, .test_shards = 1, .threads = 2,
                                .progress = [&](int64_t d, int64_t t) { last_done = d, last_total = t; }});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->written, 32);
  EXPECT_EQ(last_done, 32);
  EXPECT_EQ(last_total, 32);
  ASSERT_EQ(report->files.size(), 4u);
  EXPECT_EQ(fs::path(report->files[0]).filename(), "fashion_mnist-train.tfrecord-00000-of-00003");
  EXPECT_EQ(fs::path(report->files[3]).filename(), "fashion_mnist-test.tfrecord-00000-of-00001");
  int index = 0;
  for (int s = 0; s < 3; ++s) {
    auto reader = record::RecordReader::Open(report->files[s]);
    ASSERT_TRUE(reader.ok());
    std::string_view rec;
    int n = 0;
    while ((*reader)->ReadRecord(&rec).ok()) {
      auto ex = record::DecodeExample(rec);
      ASSERT_TRUE(ex.ok());
      EXPECT_EQ(ex->features.at("label").int64s.at(0), index % 10);
      image::Image img;
      ASSERT_TRUE(image::DecodePng(ex->features.at("image").bytes.at(0), {.channels = 0}, &img).ok());
      ASSERT_EQ(img.channels(), 1);
      for (int p = 0; p < 784; ++p) ASSERT_EQ(img.data()[p], (p * 3 + index * 17) % 256);
      ++index, ++n;
    }
    EXPECT_EQ(n, s < 1 ? 9 : 8);  // 25 over 3 shards: 9, 8, 8
  }
}

TEST_F(Idx, ShortOrWrongFilesAreNamed) {
  WriteSet("train", 3);
  std::string img = Be32(0x803) + Be32(5) + Be32(28) + Be32(28) + std::string(784 * 4, 'x');  // promises 5, has 4
  WriteGz(dir_ / "bad-images-idx3-ubyte.gz", img);
  auto r = ReadIdxImages((dir_ / "bad-images-idx3-ubyte.gz").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("bad-images-idx3-ubyte.gz"), std::string::npos);
  EXPECT_NE(r.status().message().find("promises 5"), std::string::npos) << r.status().ToString();
  auto labels_as_images = ReadIdxImages((dir_ / "train-labels-idx1-ubyte").string());
  EXPECT_EQ(labels_as_images.status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(ReadIdxLabels((dir_ / "missing").string()).ok());
  // A test split whose files are missing fails naming them.
  auto report = MakeFashionMnistRecords((dir_ / "out").string(), {.source_dir = dir_.string()});
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("t10k"), std::string::npos) << report.status().ToString();
}

}  // namespace
}  // namespace strata::datasets
