// Parsing of what HTTP servers and object stores answer, kept out of the transfer code so
// that the file systems (http.cc, s3.cc, gcs.cc) and the fuzz targets (fuzz/s3_listing_fuzz.cc,
// fuzz/gcs_listing_fuzz.cc, fuzz/http_response_fuzz.cc) run the very same code. Pure
// functions over bytes: no I/O, no environment. Bodies arrive de-chunked and decompressed by
// libcurl, and the status code is libcurl's, so neither is parsed here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/status.h"

namespace strata::io {

// One page of a bucket listing: object names in the server's order, and the token of the
// next page ("" when this is the last).
struct ListingPage {
  std::vector<std::string> names;
  std::string next_token;
};

// S3 ListObjectsV2 XML: every <Key> (entities &lt; &gt; &quot; &apos; &amp; decoded); the
// next token is <NextContinuationToken> when <IsTruncated> is "true". Any bytes are accepted:
// a body that is not a listing gives an empty last page.
ListingPage ParseS3ListObjectsV2(std::string_view xml);

// GCS JSON API objects.list: items[].name (non-string names skipped) and nextPageToken.
// Corruption when the body is not a JSON object; `where` names the listing in that error.
Result<ListingPage> ParseGcsListing(std::string_view json, std::string_view where);

// One response header line as libcurl hands it over ("Name: value\r\n"): appended to
// `headers` with the name lower-cased and the value trimmed. A status line ("HTTP/1.1 200 OK")
// starts a new response (after a redirect or a 100-continue) and clears `headers`; a line
// without a colon (the blank end of the headers) is ignored.
void ParseHeaderLine(std::string_view line, std::vector<std::pair<std::string, std::string>>* headers);

// A Content-Length value: decimal digits only, no sign, no overflow; nullopt otherwise.
std::optional<uint64_t> ParseContentLength(std::string_view value);

// The complete length of "bytes FIRST-LAST/TOTAL" (Content-Range of a 206): nullopt when
// the value has no '/', the total is "*" (unknown), or it is not a decimal uint64.
std::optional<uint64_t> ParseContentRangeTotal(std::string_view value);

}  // namespace strata::io
