// TFRecord files written by Strata (`strata records write`, NONE and GZIP) read by a reader
// that shares no code with it: @roboflow/tfrecords from npm (pinned by
// remote/tfrecords_reader/package-lock.json, installed into the build tree by
// remote/install_tfrecords_reader.sh, run by remote/read_tfrecords.js). It frames the records,
// checks both CRCs with its own CRC32C and decodes each tf.train.Example with google-protobuf.
// It has no GZIP code: read_tfrecords.js gunzips with node's zlib first.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "remote_servers.h"
#include "strata/record/record_reader.h"

namespace strata {
namespace {

using nlohmann::json;
using testing::TempDir;

// Standard base64 with padding, as node's Buffer.toString('base64') writes it.
std::string B64(const std::string& raw) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < raw.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(raw[i]) << 16;
    if (i + 1 < raw.size()) v |= static_cast<uint8_t>(raw[i + 1]) << 8;
    if (i + 2 < raw.size()) v |= static_cast<uint8_t>(raw[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < raw.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < raw.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

TEST(NpmTfrecordsReader, ReadsStrataWrittenNoneAndGzipFilesWithTheSameRecordBytes) {
  auto install = testing::RunCommand(std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/install_tfrecords_reader.sh " +
                                     std::string(STRATA_EXAMPLES_DIR) + "/../npm-tfrecords-reader");
  ASSERT_EQ(install.exit_code, 0) << "npm ci of @roboflow/tfrecords failed (needs node/npm and the npm registry)";
  ASSERT_TRUE(testing::OnPath("node")) << "node is not installed: the independent reader runs on it";
  const std::string reader_dir = install.output.substr(0, install.output.find('\n'));

  // 60 Examples of every feature kind, and what the npm reader must decode from each.
  TempDir dir;
  std::ofstream in(dir.path + "/in.jsonl");
  std::vector<json> want;
  for (int i = 0; i < 60; ++i) {
    std::string blob;
    for (int k = 0; k < i * 7; ++k) blob += static_cast<char>((i * 31 + k * 17) & 0xff);  // 0..413 bytes, any value
    const std::vector<double> x = {0.5 * i, -1.25, 3e-3 * i};
    const std::vector<int64_t> tags = {i, -i, int64_t{1} << 40};
    in << json{{"id", i}, {"x", x}, {"name", "record-" + std::to_string(i)}, {"blob", {{"b64", B64(blob)}}},
               {"tags", tags}, {"missing", nullptr}}
              .dump()
       << "\n";
    json x32 = json::array();
    for (double v : x) x32.push_back(static_cast<double>(static_cast<float>(v)));  // float_list is float32
    want.push_back({{"id", {{"int64", {i}}}},
                    {"x", {{"float", x32}}},
                    {"name", {{"bytes", {B64("record-" + std::to_string(i))}}}},
                    {"blob", {{"bytes", {B64(blob)}}}},
                    {"tags", {{"int64", tags}}},
                    {"missing", json::object()}});
  }
  in.close();
  const std::string none = dir.path + "/none.tfrecord", gzip = dir.path + "/gzip.tfrecord.gz";
  for (auto [out, comp] : {std::pair{none, "none"}, std::pair{gzip, "gzip"}}) {
    auto w = testing::RunCommand(testing::Strata() + " records write --from " + dir.path + "/in.jsonl --out " + out +
                                     " --compression " + comp,
                                 true);
    ASSERT_EQ(w.exit_code, 0) << w.output;
  }
  // A copy with one data byte of record 30 changed: the oracle must notice (its CRC check is
  // real) and stop there.
  auto locate = record::RecordReader::Open(none);
  ASSERT_TRUE(locate.ok());
  std::string skip;
  for (int i = 0; i <= 30; ++i) ASSERT_TRUE((*locate)->ReadRecord(&skip).ok());
  std::string bytes = testing::ReadText(none);
  bytes[(*locate)->last_record_offset() + 12 + 5] ^= 0x10;
  std::ofstream(dir.path + "/damaged.tfrecord", std::ios::binary) << bytes;

  auto r = testing::RunCommand("node " + std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/read_tfrecords.js " +
                               reader_dir + " " + none + " " + gzip + " " + dir.path + "/damaged.tfrecord");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json got = json::parse(r.output);
  ASSERT_EQ(got.size(), 3u);
  for (int f = 0; f < 2; ++f) {
    const json& file = got[static_cast<size_t>(f)];
    SCOPED_TRACE(file["file"].get<std::string>());
    EXPECT_EQ(file["gunzipped"].get<bool>(), f == 1);
    EXPECT_EQ(file["crc_errors"], json::array());
    // The same record bytes as Strata's own reader gives, one for one.
    auto strata_reader = record::RecordReader::Open(f == 0 ? none : gzip);
    ASSERT_TRUE(strata_reader.ok()) << strata_reader.status().ToString();
    std::vector<std::string> records;
    std::string rec;
    while ((*strata_reader)->ReadRecord(&rec).ok()) records.push_back(rec);
    ASSERT_EQ(records.size(), want.size());
    ASSERT_EQ(file["records"].size(), records.size());
    for (size_t i = 0; i < records.size(); ++i)
      EXPECT_EQ(file["records"][i].get<std::string>(), B64(records[i])) << "record " << i;
    // And each Example decodes, by the npm package's protobuf, to the values written.
    ASSERT_EQ(file["features"].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(file["features"][i], want[i]) << "record " << i;
  }
  EXPECT_EQ(got[2]["crc_errors"], json::array({"Wrong Data CRC"}));
  EXPECT_EQ(got[2]["records"].size(), 30u);
}

}  // namespace
}  // namespace strata
