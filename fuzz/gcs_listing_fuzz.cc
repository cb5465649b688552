// Fuzzes the GCS objects.list JSON parser (io/responses.h ParseGcsListing), which reads what
// a GCS (or emulator) server answers to `gs://bucket/prefix*` globs. Any bytes must give a page
// or a Corruption error naming the listing, never a crash, an exception or undefined behaviour.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/io/responses.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto page = strata::io::ParseGcsListing(json, "of gs://b/x*");
  if (!page.ok()) {
    if (page.status().code() != strata::StatusCode::kCorruption) std::abort();
    if (page.status().message().find("gs://b/x*") == std::string::npos) std::abort();
    return 0;
  }
  size_t total = page->next_token.size();
  for (const auto& name : page->names) total += name.size();
  if (total > size) std::abort();  // JSON escapes only shrink
  return 0;
}
