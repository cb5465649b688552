#include "strata/io/responses.h"

#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

namespace strata::io {
namespace {

std::string XmlUnescape(std::string s) {
  static const std::pair<const char*, const char*> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : kEntities)
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += std::strlen(to)) s.replace(p, std::strlen(from), to);
  return s;
}

// Every <tag>value</tag> in order.
std::vector<std::string> XmlValues(std::string_view xml, const std::string& tag) {
  std::vector<std::string> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  for (size_t p = 0; (p = xml.find(open, p)) != std::string_view::npos;) {
    p += open.size();
    const size_t e = xml.find(close, p);
    if (e == std::string_view::npos) break;
    out.push_back(XmlUnescape(std::string(xml.substr(p, e - p))));
    p = e + close.size();
  }
  return out;
}

std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;  // would overflow
    v = v * 10 + d;
  }
  return v;
}

}  // namespace

ListingPage ParseS3ListObjectsV2(std::string_view xml) {
  ListingPage page;
  page.names = XmlValues(xml, "Key");
  const auto truncated = XmlValues(xml, "IsTruncated");
  const auto next = XmlValues(xml, "NextContinuationToken");
  if (!truncated.empty() && truncated[0] == "true" && !next.empty()) page.next_token = next[0];
  return page;
}

Result<ListingPage> ParseGcsListing(std::string_view json, std::string_view where) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Corruption("GCS listing " + std::string(where) + " is not a JSON object: " + std::string(json.substr(0, 200)));
  ListingPage page;
  if (auto items = j.find("items"); items != j.end() && items->is_array())
    for (const auto& item : *items)
      if (item.is_object())
        if (auto name = item.find("name"); name != item.end() && name->is_string()) page.names.push_back(name->get<std::string>());
  if (auto next = j.find("nextPageToken"); next != j.end() && next->is_string()) page.next_token = next->get<std::string>();
  return page;
}

void ParseHeaderLine(std::string_view line, std::vector<std::pair<std::string, std::string>>* headers) {
  if (line.starts_with("HTTP/")) {  // a new response (after a redirect or 100-continue)
    headers->clear();
    return;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ' || value.back() == '\t'))
    value.remove_suffix(1);
  headers->emplace_back(std::move(name), std::string(value));
}

std::optional<uint64_t> ParseContentLength(std::string_view value) { return ParseDecimal(value); }

std::optional<uint64_t> ParseContentRangeTotal(std::string_view value) {
  const size_t slash = value.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  return ParseDecimal(value.substr(slash + 1));
}

}  // namespace strata::io
