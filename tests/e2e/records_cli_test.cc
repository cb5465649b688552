// strata records count|inspect|verify|write, run as a user would.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct CliRun {
  int code;
  std::string out;  // stdout and stderr
};

CliRun Strata(const std::string& args) {
  std::string cmd = std::string(STRATA_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string Real(const std::string& name) { return std::string(STRATA_TESTDATA) + "/real/" + name; }

class RecordsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("strata_records_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(RecordsCliTest, CountPerFileAndTotal) {
  CliRun r = Strata("records count " + Real("pytorch-data_example.tfrecord") + " " +
                 Real("tfx_penguin_Split-train_data_tfrecord-00000-of-00001.gz"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("4  " + Real("pytorch-data_example.tfrecord") + " (none)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("234  " + Real("tfx_penguin_Split-train_data_tfrecord-00000-of-00001.gz") + " (gzip)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("238  total in 2 files"), std::string::npos) << r.out;
  CliRun j = Strata("records count --json " + Real("spotify-tfreader_part-00000-of-00004.tfrecords"));
  EXPECT_EQ(j.code, 0);
  EXPECT_EQ(nlohmann::json::parse(j.out)["total"], 3750);
}

TEST_F(RecordsCliTest, InspectTextAndJson) {
  CliRun r = Strata("records inspect " + Real("pytorch-data_example.tfrecord") + " --limit 1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("record 0 at byte 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x_byte: bytes[1] 8 bytes \"test str\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x_int: int64[10] 0, 10, 20"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("record 1 "), std::string::npos);
  CliRun j = Strata("records inspect --json --limit 2 " + Real("tfx_tfjs_next_page_data.tfrecord.gz"));
  EXPECT_EQ(j.code, 0) << j.out;
  auto first = nlohmann::json::parse(j.out.substr(0, j.out.find('\n')));
  EXPECT_EQ(first["type"], "Example");
  EXPECT_EQ(first["features"]["cur_page"]["values"][0]["b64"], "cGFnZTI=");  // "page2"
  EXPECT_EQ(first["features"]["session_index"]["values"][0], 1);
  CliRun raw = Strata("records inspect " + Real("magenta_tfrecord_iterator_test.tfrecord"));
  EXPECT_NE(raw.out.find("raw: 11 bytes \"hello world\""), std::string::npos) << raw.out;
  CliRun seq = Strata("records inspect --limit 1 " + Real("tfx_tfrecord_sequence_Split-eval_data_tfrecord_eval.gz"));
  EXPECT_NE(seq.out.find("SequenceExample"), std::string::npos) << seq.out;
  EXPECT_NE(seq.out.find("s: 2 steps"), std::string::npos) << seq.out;
}

TEST_F(RecordsCliTest, VerifyGoodAndCorruptFiles) {
  CliRun ok = Strata("records verify " + Real("tfx_mnist.tfrecord") + " " + Real("tfx_iris_training_data_tfrecord-00000-of-00004.gz"));
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("1000 records ok"), std::string::npos);
  const std::string bad = Real("CORRUPT_tf-models_snapshot_serengeti_sequence_examples.record");
  CliRun r = Strata("records verify " + bad);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("Truncated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(bad + " at byte 0"), std::string::npos) << r.out;

  // Two corruptions in one file: the first stops plain verify, --all lists both.
  std::ifstream in(Real("pytorch-data_example.tfrecord"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<size_t> offsets;  // where each record starts: 12-byte header, data, 4-byte CRC
  for (size_t off = 0; off + 8 <= bytes.size();) {
    offsets.push_back(off);
    uint64_t len;
    std::memcpy(&len, bytes.data() + off, 8);
    off += 16 + len;
  }
  ASSERT_EQ(offsets.size(), 4u);
  const size_t rec = offsets[1], rec3 = offsets[3];  // 124 and 389
  bytes[rec + 20] ^= 1;   // data of record 1
  bytes[rec3 + 20] ^= 1;  // data of record 3
  std::ofstream(Path("two_bad.tfrecord"), std::ios::binary) << bytes;
  CliRun first = Strata("records verify " + Path("two_bad.tfrecord"));
  EXPECT_EQ(first.code, 1);
  EXPECT_NE(first.out.find("bad data CRC in " + Path("two_bad.tfrecord") + " at byte " + std::to_string(rec)),
            std::string::npos) << first.out;
  EXPECT_EQ(first.out.find("at byte " + std::to_string(rec3)), std::string::npos);
  CliRun all = Strata("records verify --all " + Path("two_bad.tfrecord"));
  EXPECT_EQ(all.code, 1);
  EXPECT_NE(all.out.find("at byte " + std::to_string(rec)), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("at byte " + std::to_string(rec3)), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("2 records ok, 2 skipped"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("2 problems"), std::string::npos) << all.out;
}

TEST_F(RecordsCliTest, WriteJsonlThenReadBack) {
  std::ofstream(Path("in.jsonl")) << R"({"label": 3, "score": 0.5, "name": "cat", "raw": {"b64": "AAH/"}, "v": [1, 2.5], "tags": ["a", "b"]})"
                                  << "\n\n"
                                  << R"({"label": -7, "ids": [1, 2, 3], "missing": null})" << "\n";
  for (std::string comp : {"none", "gzip", "zlib"}) {
    std::string out = Path("out." + comp);
    CliRun w = Strata("records write --from " + Path("in.jsonl") + " --out " + out + " --compression " + comp);
    ASSERT_EQ(w.code, 0) << w.out;
    EXPECT_NE(w.out.find("wrote 2 examples"), std::string::npos);
    CliRun c = Strata("records count " + out);
    EXPECT_NE(c.out.find("2  " + out + " (" + comp + ")"), std::string::npos) << c.out;
    CliRun j = Strata("records inspect --json " + out);
    auto rec0 = nlohmann::json::parse(j.out.substr(0, j.out.find('\n')));
    auto f = rec0["features"];
    EXPECT_EQ(f["label"]["type"], "int64");
    EXPECT_EQ(f["label"]["values"][0], 3);
    EXPECT_EQ(f["score"]["type"], "float");
    EXPECT_EQ(f["score"]["values"][0], 0.5);
    EXPECT_EQ(f["name"]["values"][0]["b64"], "Y2F0");
    EXPECT_EQ(f["raw"]["values"][0]["b64"], "AAH/");
    EXPECT_EQ(f["raw"]["values"][0]["length"], 3);
    EXPECT_EQ(f["v"]["type"], "float");
    EXPECT_EQ(f["tags"]["values"].size(), 2u);
    auto rec1 = nlohmann::json::parse(j.out.substr(j.out.find('\n') + 1));
    EXPECT_EQ(rec1["features"]["label"]["values"][0], -7);
    EXPECT_EQ(rec1["features"]["missing"]["type"], "empty");
  }
}

TEST_F(RecordsCliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Strata("records").code, 2);
  EXPECT_EQ(Strata("records frobnicate").code, 2);
  EXPECT_EQ(Strata("records count").code, 2);
  EXPECT_EQ(Strata("records inspect a b").code, 2);
  EXPECT_EQ(Strata("records write --out x").code, 2);
  EXPECT_EQ(Strata("records write --from a --out b --compression lz4").code, 2);
  CliRun bad_json = [&] {
    std::ofstream(Path("bad.jsonl")) << "{\"a\": [1, \"x\"]}\n";
    return Strata("records write --from " + Path("bad.jsonl") + " --out " + Path("bad.tfrecord"));
  }();
  EXPECT_EQ(bad_json.code, 1);
  EXPECT_NE(bad_json.out.find("line 1: key 'a'"), std::string::npos) << bad_json.out;
  EXPECT_FALSE(std::filesystem::exists(Path("bad.tfrecord")));  // atomic: nothing left behind
  CliRun missing = Strata("records count /nonexistent/file.tfrecord");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("/nonexistent/file.tfrecord"), std::string::npos);
}

}  // namespace
