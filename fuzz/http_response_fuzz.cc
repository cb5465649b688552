// Fuzzes the HTTP response parsing Strata does itself (io/responses.h): header lines as
// libcurl hands them over, Content-Length and Content-Range values, and the status ->
// error mapping of io/http.h HttpError. Input: newline-separated header lines; the first
// two bytes also give a status code. Invariants: header names are lower case, values carry
// no surrounding blanks or line ends, a number is accepted only when it is exactly a
// decimal uint64 (checked against an independent reading), and every error status gives
// the documented code with the status in its message.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/io/http.h"
#include "strata/io/responses.h"

using namespace strata;

static void Check(bool ok) {
  if (!ok) std::abort();
}

// The reference reading of a decimal uint64: digits only, compared as text against
// UINT64_MAX ("18446744073709551615") after dropping leading zeros.
static bool IsDecimalUint64(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  while (s.size() > 1 && s.front() == '0') s.remove_prefix(1);
  const std::string_view max = "18446744073709551615";
  return s.size() < max.size() || (s.size() == max.size() && s <= max);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> headers;
  for (size_t p = 0; p <= text.size();) {
    size_t e = text.find('\n', p);
    if (e == std::string_view::npos) e = text.size();
    const std::string_view line = text.substr(p, e == text.size() ? e - p : e - p + 1);
    strata::io::ParseHeaderLine(line, &headers);
    if (line.starts_with("HTTP/")) Check(headers.empty());
    p = e + 1;
  }
  for (const auto& [name, value] : headers) {
    for (char c : name) Check(!std::isupper(static_cast<unsigned char>(c)));
    if (!value.empty()) {
      Check(value.front() != ' ' && value.front() != '\t');
      Check(value.back() != ' ' && value.back() != '\t' && value.back() != '\r' && value.back() != '\n');
    }
    const auto length = strata::io::ParseContentLength(value);
    Check(length.has_value() == IsDecimalUint64(value));
    if (length) {
      std::string_view digits(value);
      while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
      Check(std::to_string(*length) == digits);
    }
    const auto total = strata::io::ParseContentRangeTotal(value);
    const size_t slash = value.rfind('/');
    Check(total.has_value() == (slash != std::string::npos && IsDecimalUint64(std::string_view(value).substr(slash + 1))));
  }

  strata::io::HttpResponse response;
  response.status = size >= 2 ? (data[0] << 8 | data[1]) % 1000 : 0;
  response.body = std::string(text);
  response.headers = headers;
  strata::io::HttpRequest request{.url = "https://example.invalid/o"};
  const Status s = strata::io::HttpError(request, response, "gs://b/o");
  Check(!s.ok());
  Check(s.message().find("HTTP " + std::to_string(response.status)) == 0);
  Check(s.message().find('\n') == std::string::npos && s.message().find('\r') == std::string::npos);
  if (response.status == 404) Check(s.code() == StatusCode::kNotFound);
  else if (response.status >= 400 && response.status < 500) Check(s.code() == StatusCode::kInvalidArgument);
  else Check(s.code() == StatusCode::kIOError);
  return 0;
}
