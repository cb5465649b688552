// The parsers of io/responses.h on the answers real servers give (AWS S3 and GCS documented
// examples, curl's header lines), and on the malformed values the fuzz targets probe:
// fuzz/{s3_listing,gcs_listing,http_response}_fuzz.cc run the same functions over any bytes.
#include "strata/io/responses.h"

#include <gtest/gtest.h>

namespace strata::io {
namespace {

TEST(S3ListingParse, KeysInOrderAndTheNextTokenOfATruncatedPage) {
  const ListingPage page = ParseS3ListObjectsV2(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYEx==</NextContinuationToken>"
      "<Contents><Key>data/b.rec</Key><Size>3</Size></Contents>"
      "<Contents><Key>data/a&amp;b &lt;1&gt; &quot;q&quot; &apos;s&apos;.rec</Key></Contents></ListBucketResult>");
  EXPECT_EQ(page.names, (std::vector<std::string>{"data/b.rec", "data/a&b <1> \"q\" 's'.rec"}));
  EXPECT_EQ(page.next_token, "1ueGcxLPRx1Tr/XYEx==");
}

TEST(S3ListingParse, NoNextTokenUnlessTruncatedAndNoHalfKeys) {
  EXPECT_EQ(ParseS3ListObjectsV2("<IsTruncated>false</IsTruncated><NextContinuationToken>t</NextContinuationToken>").next_token,
            "");
  const ListingPage cut = ParseS3ListObjectsV2("<IsTruncated>true</IsTruncated><Key>a</Key><Key>b");
  EXPECT_EQ(cut.names, std::vector<std::string>{"a"});
  EXPECT_EQ(cut.next_token, "");
  EXPECT_TRUE(ParseS3ListObjectsV2("<Error><Code>NoSuchBucket</Code></Error>").names.empty());
  // "&amp;lt;" is the text "&lt;", not "<": entities are decoded once.
  EXPECT_EQ(ParseS3ListObjectsV2("<Key>&amp;lt;</Key>").names, std::vector<std::string>{"&lt;"});
}

TEST(GcsListingParse, NamesAndPageTokenSkippingEntriesWithoutAStringName) {
  auto page = ParseGcsListing(
      R"({"kind": "storage#objects", "nextPageToken": "CgtkYXRh", "items": [{"name": "a.rec"}, 1, null,
          {"name": 3}, [], {"name": "b/\u00e9.rec", "size": "12"}]})",
      "of gs://b/*");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->names, (std::vector<std::string>{"a.rec", "b/\xc3\xa9.rec"}));
  EXPECT_EQ(page->next_token, "CgtkYXRh");
  auto last = ParseGcsListing(R"({"items": [], "nextPageToken": 7})", "of gs://b/*");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->next_token, "");
}

TEST(GcsListingParse, ABodyThatIsNoJsonObjectIsCorruptionNamingTheListing) {
  for (const char* body : {"<html>502 Bad Gateway</html>", "[\"items\"]", "", "{\"items\": [", "\"x\""}) {
    auto page = ParseGcsListing(body, "of gs://bucket/data/*.rec");
    ASSERT_FALSE(page.ok()) << body;
    EXPECT_EQ(page.status().code(), StatusCode::kCorruption);
    EXPECT_NE(page.status().message().find("gs://bucket/data/*.rec"), std::string::npos) << page.status().message();
  }
}

TEST(HttpHeaderParse, LowerCaseNamesTrimmedValuesAndANewResponseClears) {
  std::vector<std::pair<std::string, std::string>> h;
  for (const char* line : {"HTTP/1.1 302 Found\r\n", "Location: https://x/y\r\n", "\r\n", "HTTP/2 206 \r\n",
                           "Content-Range: bytes 0-9/100\r\n", "X-Blank:\t \r\n", "NoColonHere\r\n",
                           "ETag:  \"abc\" \r\n", "\r\n"})
    ParseHeaderLine(line, &h);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"content-range", "bytes 0-9/100"}, {"x-blank", ""}, {"etag", "\"abc\""}};
  EXPECT_EQ(h, want);
}

TEST(HttpHeaderParse, ContentLengthIsExactlyADecimalUint64) {
  EXPECT_EQ(ParseContentLength("0"), 0u);
  EXPECT_EQ(ParseContentLength("8388608"), 8388608u);
  EXPECT_EQ(ParseContentLength("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "12a", "0x10", "18446744073709551616", "99999999999999999999999"})
    EXPECT_FALSE(ParseContentLength(bad).has_value()) << bad;
}

TEST(HttpHeaderParse, ContentRangeTotalNeedsADecimalCompleteLength) {
  EXPECT_EQ(ParseContentRangeTotal("bytes 0-8388607/20971520"), 20971520u);
  EXPECT_EQ(ParseContentRangeTotal("bytes */0"), 0u);
  // Unknown ("*"), missing, signed or trailing junk: no size, where strtoull read 0 or 2^64-1.
  for (const char* bad : {"bytes 0-9/*", "bytes 0-9", "bytes 0-9/", "bytes 0-9/-1", "bytes 0-9/100x", ""})
    EXPECT_FALSE(ParseContentRangeTotal(bad).has_value()) << bad;
}

}  // namespace
}  // namespace strata::io
