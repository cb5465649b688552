// RecordReader / RecordWriter over in-memory and real files: clean end, truncated tails,
// corruption with offsets, ignore_errors, compression round trips, atomic writes.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "strata/record/crc32c.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"

// The largest operator new request while a test watches (replaced for this binary; a pass-
// through to malloc). The reader's buffers are std::string, so a length taken on trust would
// show here as a request of that length, even where the allocation itself would succeed
// (overcommit) and no status code could tell.
namespace {
std::atomic<bool> g_watch_allocations{false};
std::atomic<size_t> g_largest_allocation{0};
void* Allocate(size_t n) {
  if (g_watch_allocations.load(std::memory_order_relaxed)) {
    size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(size_t n) { return Allocate(n); }
void* operator new[](size_t n) { return Allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace strata::record {
namespace {

// The largest allocation `read` makes.
template <typename F>
size_t LargestAllocationOf(F read) {
  g_largest_allocation = 0;
  g_watch_allocations = true;
  read();
  g_watch_allocations = false;
  return g_largest_allocation.load();
}

std::string Frame(std::string_view data) {
  std::string out(kHeaderSize, '\0');
  EncodeHeader(data.size(), out.data());
  out += data;
  char f[kFooterSize];
  EncodeFooter(data, f);
  out.append(f, kFooterSize);
  return out;
}

std::string Frames(const std::vector<std::string>& recs) {
  std::string s;
  for (const auto& r : recs) s += Frame(r);
  return s;
}

std::unique_ptr<RecordReader> ReaderOver(std::string bytes, RecordReaderOptions o = {}) {
  auto r = RecordReader::Open(NewMemoryFile("mem.tfrecord", std::move(bytes)), o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

// Reads everything; returns the records and the final status.
Status ReadAll(RecordReader* r, std::vector<std::string>* out) {
  std::string_view v;
  Status st;
  while ((st = r->ReadRecord(&v)).ok()) out->emplace_back(v);
  return st;
}

std::string TempDir() {
  auto d = std::filesystem::temp_directory_path() / ("strata_record_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(RecordFormatTest, WorkedExampleBytes) {
  // docs/formats/tfrecord.md walks through exactly these bytes.
  std::string f = Frame("hello world");
  ASSERT_EQ(f.size(), 12u + 11u + 4u);
  EXPECT_EQ(DecodeFixed64(f.data()), 11u);
  EXPECT_EQ(crc32c::Unmask(DecodeFixed32(f.data() + 8)), crc32c::Value(f.data(), 8));
  EXPECT_EQ(crc32c::Unmask(DecodeFixed32(f.data() + 23)), crc32c::Value("hello world"));
}

TEST(RecordReaderTest, EmptyFileIsCleanEnd) {
  auto r = ReaderOver("");
  std::string_view v;
  EXPECT_EQ(r->ReadRecord(&v).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r->ReadRecord(&v).code(), StatusCode::kOutOfRange);
}

TEST(RecordReaderTest, ReadsRecordsAndOffsets) {
  auto r = ReaderOver(Frames({"a", "", "hello"}));
  std::string_view v;
  ASSERT_TRUE(r->ReadRecord(&v).ok());
  EXPECT_EQ(v, "a");
  EXPECT_EQ(r->last_record_offset(), 0u);
  EXPECT_EQ(r->offset(), 17u);
  ASSERT_TRUE(r->ReadRecord(&v).ok());
  EXPECT_EQ(v, "");
  ASSERT_TRUE(r->ReadRecord(&v).ok());
  EXPECT_EQ(v, "hello");
  EXPECT_EQ(r->last_record_offset(), 33u);
  EXPECT_TRUE(r->ReadRecord(&v).IsOutOfRange());
  EXPECT_EQ(r->stats().records, 3);
}

TEST(RecordReaderTest, TruncatedInsideHeaderIsTruncatedWithOffset) {
  std::string bytes = Frames({"abc", "defg"});
  size_t second = Frame("abc").size();
  for (size_t cut = second + 1; cut < second + kHeaderSize; ++cut) {
    auto r = ReaderOver(bytes.substr(0, cut));
    std::vector<std::string> got;
    Status st = ReadAll(r.get(), &got);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(st.code(), StatusCode::kTruncated) << st.ToString();
    EXPECT_NE(st.message().find("mem.tfrecord at byte " + std::to_string(second)), std::string::npos) << st.message();
  }
}

TEST(RecordReaderTest, TruncatedInsideDataIsTruncatedOrQuietEnd) {
  std::string bytes = Frames({"abc", "defghijk"});
  size_t second = Frame("abc").size();
  for (size_t cut = second + kHeaderSize; cut < bytes.size(); ++cut) {
    auto r = ReaderOver(bytes.substr(0, cut));
    std::vector<std::string> got;
    Status st = ReadAll(r.get(), &got);
    EXPECT_EQ(got.size(), 1u);
    EXPECT_EQ(st.code(), StatusCode::kTruncated) << st.ToString();
    EXPECT_NE(st.message().find("at byte " + std::to_string(second)), std::string::npos) << st.message();
    // Sticky: asking again gives the same error, never a record.
    std::string_view v;
    EXPECT_EQ(r->ReadRecord(&v).code(), StatusCode::kTruncated);

    auto quiet = ReaderOver(bytes.substr(0, cut), {.stop_at_truncated_tail = true});
    got.clear();
    st = ReadAll(quiet.get(), &got);
    EXPECT_TRUE(st.IsOutOfRange()) << st.ToString();
    EXPECT_EQ(got, std::vector<std::string>{"abc"});
    EXPECT_EQ(quiet->stats().truncated_tails, 1);
  }
}

TEST(RecordReaderTest, BadLengthCrcIsCorruptionWithOffset) {
  std::string bytes = Frames({"abc", "defg"});
  size_t second = Frame("abc").size();
  bytes[second + 9] ^= 0x40;  // length CRC of record 2
  auto r = ReaderOver(bytes);
  std::vector<std::string> got;
  Status st = ReadAll(r.get(), &got);
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("bad length CRC in mem.tfrecord at byte " + std::to_string(second)), std::string::npos)
      << st.message();
}

TEST(RecordReaderTest, FlippedLengthByteIsBadLengthCrc) {
  std::string bytes = Frames({"abc"});
  bytes[0] ^= 0x01;
  auto r = ReaderOver(bytes);
  std::string_view v;
  Status st = r->ReadRecord(&v);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("bad length CRC"), std::string::npos);
}

TEST(RecordReaderTest, BadDataCrcIsCorruptionWithOffset) {
  std::string bytes = Frames({"abc", "defg", "hi"});
  size_t second = Frame("abc").size();
  bytes[second + kHeaderSize + 1] ^= 0x01;  // a data byte of record 2
  auto r = ReaderOver(bytes);
  std::vector<std::string> got;
  Status st = ReadAll(r.get(), &got);
  EXPECT_EQ(got, std::vector<std::string>{"abc"});
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("bad data CRC in mem.tfrecord at byte " + std::to_string(second)), std::string::npos)
      << st.message();
}

TEST(RecordReaderTest, LengthBeyondFileNeverAllocatesIt) {
  // A header with a valid CRC announcing 2^40 bytes in a 30-byte file: reported, not
  // allocated (the length is checked against the file size first).
  std::string bytes(kHeaderSize, '\0');
  EncodeHeader(uint64_t{1} << 40, bytes.data());
  bytes += "short";
  auto r = ReaderOver(bytes, {.max_record_bytes = uint64_t{1} << 50});
  std::string_view v;
  Status st;
  const size_t largest = LargestAllocationOf([&] { st = r->ReadRecord(&v); });
  EXPECT_EQ(st.code(), StatusCode::kTruncated) << st.ToString();
  EXPECT_NE(st.message().find("length beyond the file"), std::string::npos) << st.message();
  EXPECT_LT(largest, size_t{1} << 20) << "the reader allocated " << largest << " bytes for a 30-byte file";
}

TEST(RecordReaderTest, LengthOverLimitIsCorruption) {
  std::string bytes(kHeaderSize, '\0');
  EncodeHeader(uint64_t{1} << 40, bytes.data());
  auto r = ReaderOver(bytes);
  std::string_view v;
  Status st = r->ReadRecord(&v);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("exceeds max_record_bytes"), std::string::npos);
}

TEST(RecordReaderTest, IgnoreErrorsSkipsAndCounts) {
  std::string bytes = Frames({"one", "two", "three", "four"});
  size_t r2 = Frame("one").size(), r3 = r2 + Frame("two").size();
  bytes[r2 + kHeaderSize] ^= 0x20;  // data CRC of "two" fails
  bytes[r3 + 2] ^= 0x20;            // length CRC of "three" fails
  bytes += Frame("five").substr(0, 9);  // truncated tail
  auto r = ReaderOver(bytes, {.ignore_errors = true});
  std::vector<std::string> got;
  Status st = ReadAll(r.get(), &got);
  EXPECT_TRUE(st.IsOutOfRange()) << st.ToString();
  EXPECT_EQ(got, (std::vector<std::string>{"one", "four"}));
  EXPECT_EQ(r->stats().skipped_records, 2);
  EXPECT_EQ(r->stats().skipped_bytes, static_cast<int64_t>(Frame("three").size()));
  EXPECT_EQ(r->stats().truncated_tails, 1);
}

TEST(RecordReaderTest, SmallBufferLargeRecords) {
  std::mt19937 rng(1);
  std::vector<std::string> recs;
  for (int i = 0; i < 20; ++i) {
    std::string s(rng() % 20000, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    recs.push_back(s);
  }
  auto r = ReaderOver(Frames(recs), {.buffer_bytes = 4096});
  std::vector<std::string> got;
  EXPECT_TRUE(ReadAll(r.get(), &got).IsOutOfRange());
  EXPECT_EQ(got, recs);
}

std::string Deflate(std::string_view data, bool gzip) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(RecordReaderTest, DetectsCompression) {
  std::string raw = Frames({"x", "yy"});
  EXPECT_EQ(DetectCompression(raw), Compression::kNone);
  EXPECT_EQ(DetectCompression(Deflate(raw, true)), Compression::kGzip);
  EXPECT_EQ(DetectCompression(Deflate(raw, false)), Compression::kZlib);
  EXPECT_EQ(DetectCompression(""), Compression::kNone);
  // A record of 35615 bytes starts with 1f 8b, the gzip magic: the valid header wins.
  std::string hdr(kHeaderSize, '\0');
  EncodeHeader(0x8b1f, hdr.data());
  EXPECT_EQ(DetectCompression(hdr), Compression::kNone);
}

TEST(RecordReaderTest, ReadsZlibAndGzipAndConcatenatedGzip) {
  std::vector<std::string> recs = {"alpha", std::string(100000, 'b'), "", "gamma"};
  std::string raw = Frames(recs);
  for (bool gzip : {false, true}) {
    auto r = ReaderOver(Deflate(raw, gzip), {.buffer_bytes = 4096});
    EXPECT_EQ(r->compression(), gzip ? Compression::kGzip : Compression::kZlib);
    std::vector<std::string> got;
    EXPECT_TRUE(ReadAll(r.get(), &got).IsOutOfRange());
    EXPECT_EQ(got, recs);
  }
  // Two gzip members back to back, as `cat a.gz b.gz` makes.
  auto r = ReaderOver(Deflate(Frames({"m1"}), true) + Deflate(Frames({"m2"}), true));
  std::vector<std::string> got;
  EXPECT_TRUE(ReadAll(r.get(), &got).IsOutOfRange());
  EXPECT_EQ(got, (std::vector<std::string>{"m1", "m2"}));
}

TEST(RecordReaderTest, TruncatedGzipIsTruncatedOrQuiet) {
  std::string raw = Frames({"first record", "second record"});
  std::string gz = Deflate(raw, true);
  std::string cut = gz.substr(0, gz.size() - 6);  // trailer cut: data may be all there
  auto r = ReaderOver(cut);
  std::vector<std::string> got;
  Status st = ReadAll(r.get(), &got);
  EXPECT_EQ(st.code(), StatusCode::kTruncated) << st.ToString();
  auto quiet = ReaderOver(cut, {.stop_at_truncated_tail = true});
  got.clear();
  EXPECT_TRUE(ReadAll(quiet.get(), &got).IsOutOfRange());
  EXPECT_EQ(got.size(), 2u);
}

TEST(RecordReaderTest, CorruptGzipIsCorruption) {
  std::string gz = Deflate(Frames({std::string(5000, 'q')}), true);
  gz[gz.size() / 2] ^= 0x55;
  gz[gz.size() / 2 + 1] ^= 0x55;
  auto r = ReaderOver(gz);
  std::vector<std::string> got;
  Status st = ReadAll(r.get(), &got);
  EXPECT_TRUE(st.code() == StatusCode::kCorruption) << st.ToString();
  EXPECT_TRUE(got.empty());
}

TEST(RecordReaderTest, CompressedHugeLengthDoesNotAllocateIt) {
  std::string bytes(kHeaderSize, '\0');
  EncodeHeader(uint64_t{1} << 35, bytes.data());
  auto r = ReaderOver(Deflate(bytes + "tiny", true));
  std::string_view v;
  Status st;
  // Compressed, the file size says nothing of the length: the buffer grows only as decoded
  // data arrives (at most doubling), so 2^35 announced bytes cost one read-ahead window.
  const size_t largest = LargestAllocationOf([&] { st = r->ReadRecord(&v); });
  EXPECT_EQ(st.code(), StatusCode::kTruncated) << st.ToString();
  EXPECT_LT(largest, size_t{1} << 20) << "the reader allocated " << largest << " bytes for 2^35 announced";
}

TEST(RecordWriterTest, RoundTripsEveryCompression) {
  std::string dir = TempDir();
  std::vector<std::string> recs = {"a", std::string(300000, 'z'), "", "last"};
  for (Compression c : {Compression::kNone, Compression::kZlib, Compression::kGzip}) {
    std::string path = dir + "/rt." + std::string(CompressionName(c));
    auto w = RecordWriter::Open(path, {.compression = c});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (const auto& r : recs) ASSERT_TRUE((*w)->WriteRecord(r).ok());
    ASSERT_TRUE((*w)->Close().ok());
    auto r = RecordReader::Open(path);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)->compression(), c);
    std::vector<std::string> got;
    EXPECT_TRUE(ReadAll(r->get(), &got).IsOutOfRange());
    EXPECT_EQ(got, recs);
  }
  std::filesystem::remove_all(dir);
}

TEST(RecordWriterTest, UncompressedBytesAreExactlyTheFraming) {
  std::string dir = TempDir();
  std::string path = dir + "/exact.tfrecord";
  auto w = RecordWriter::Open(path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->WriteRecord("hello world").ok());
  ASSERT_TRUE((*w)->WriteRecord("12345").ok());
  ASSERT_TRUE((*w)->Close().ok());
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, Frames({"hello world", "12345"}));
  std::filesystem::remove_all(dir);
}

TEST(RecordWriterTest, UnclosedAtomicWriterLeavesNoFile) {
  std::string dir = TempDir();
  std::string path = dir + "/never.tfrecord";
  {
    auto w = RecordWriter::Open(path, {.compression = Compression::kGzip});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteRecord("x").ok());
    ASSERT_TRUE((*w)->Flush().ok());
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // no temporary left behind either
  std::filesystem::remove_all(dir);
}

TEST(RecordWriterTest, AppendingWriterFlushMakesWholeRecordsVisible) {
  std::string dir = TempDir();
  std::string path = dir + "/events.test";
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    auto w = RecordWriter::Open(path, {.compression = c, .atomic = false});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteRecord("r1").ok());
    ASSERT_TRUE((*w)->WriteRecord("r2").ok());
    ASSERT_TRUE((*w)->Flush().ok());
    // A reader tailing the growing file sees both records; the open stream ends quietly.
    auto r = RecordReader::Open(path, {.stop_at_truncated_tail = true});
    ASSERT_TRUE(r.ok());
    std::vector<std::string> got;
    EXPECT_TRUE(ReadAll(r->get(), &got).IsOutOfRange());
    EXPECT_EQ(got, (std::vector<std::string>{"r1", "r2"})) << CompressionName(c);
    ASSERT_TRUE((*w)->Close().ok());
  }
  std::filesystem::remove_all(dir);
}

TEST(RecordWriterTest, RefusesAutoAndBadLevel) {
  EXPECT_EQ(RecordWriter::Open("/tmp/x", {.compression = Compression::kAuto}).status().code(),
            StatusCode::kInvalidArgument);
  auto w = RecordWriter::Open(std::filesystem::temp_directory_path().string() + "/strata_bad_level",
                              {.compression = Compression::kZlib, .compression_level = 12});
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
}

TEST(CompressionTest, ParsesNames) {
  EXPECT_EQ(*ParseCompression("GZIP"), Compression::kGzip);
  EXPECT_EQ(*ParseCompression("zlib"), Compression::kZlib);
  EXPECT_EQ(*ParseCompression(""), Compression::kNone);
  EXPECT_EQ(*ParseCompression("auto"), Compression::kAuto);
  EXPECT_FALSE(ParseCompression("lz4").ok());
}

}  // namespace
}  // namespace strata::record
