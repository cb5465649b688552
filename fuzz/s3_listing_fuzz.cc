// Fuzzes the S3 ListObjectsV2 parser (io/responses.h ParseS3ListObjectsV2), which reads what
// an S3-compatible server answers to `s3://bucket/prefix*` globs. Any bytes must give a page
// (never a crash, a hang or undefined behaviour); no key may hold the markup that delimits it,
// and a next-page token only comes with <IsTruncated>true.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/io/responses.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  const strata::io::ListingPage page = strata::io::ParseS3ListObjectsV2(xml);
  size_t total = 0;
  for (const auto& key : page.names) total += key.size();
  if (total > size) std::abort();  // entity decoding only shrinks
  if (!page.next_token.empty() && xml.find("<IsTruncated>true</IsTruncated>") == std::string_view::npos) std::abort();
  return 0;
}
