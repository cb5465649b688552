#include "strata/record/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace strata::crc32c {
namespace {

// RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32cTest, Rfc3720Vectors) {
  std::string buf(32, '\0');
  EXPECT_EQ(Value(buf), 0x8a9136aau);
  buf.assign(32, '\xff');
  EXPECT_EQ(Value(buf), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(i);
  EXPECT_EQ(Value(buf), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(31 - i);
  EXPECT_EQ(Value(buf), 0x113fdb5cu);
  const unsigned char pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(Value(reinterpret_cast<const char*>(pdu), sizeof(pdu)), 0xd9963a56u);
  EXPECT_EQ(Value("123456789"), 0xe3069283u);  // the CRC catalogue's check value
}

TEST(Crc32cTest, PortableMatchesRfcVectors) {
  std::string buf(32, '\0');
  EXPECT_EQ(ExtendPortable(0, buf.data(), buf.size()), 0x8a9136aau);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(i);
  EXPECT_EQ(ExtendPortable(0, buf.data(), buf.size()), 0x46dd794eu);
}

TEST(Crc32cTest, HardwareMatchesPortableAtEveryLengthAndAlignment) {
  if (!HardwareAccelerated()) GTEST_SKIP() << "no SSE4.2 on this host; portable path tested above";
  std::mt19937 rng(7);
  std::string data(3 * 8192 * 2 + 3 * 256 * 3 + 77, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  // Lengths around the interleaving block sizes, several alignments.
  for (size_t len : {0ul, 1ul, 7ul, 8ul, 9ul, 767ul, 768ul, 769ul, 1000ul, 24575ul, 24576ul, 24577ul, 30000ul,
                     data.size() - 8}) {
    for (size_t align = 0; align < 8; ++align) {
      EXPECT_EQ(ExtendSse42(0, data.data() + align, len), ExtendPortable(0, data.data() + align, len))
          << "len " << len << " align " << align;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsWholeValue) {
  std::string s = "hello world, this is a test of crc32c extension across pieces";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(Extend(Value(s.data(), cut), s.data() + cut, s.size() - cut), Value(s));
  }
}

TEST(Crc32cTest, MaskRoundTripsAndChangesValue) {
  for (uint32_t crc : {0u, 1u, 0x8a9136aau, 0xffffffffu}) {
    EXPECT_NE(Mask(crc), crc);
    EXPECT_NE(Mask(Mask(crc)), crc);
    EXPECT_EQ(Unmask(Mask(crc)), crc);
  }
}

}  // namespace
}  // namespace strata::crc32c
