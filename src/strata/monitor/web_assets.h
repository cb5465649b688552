// The live page's files (src/strata/monitor/web/), embedded in the binary at build time:
// web_assets.cc includes each file's bytes with the assembler's .incbin, which finds them
// through the compiler's include path (src/). Nothing is fetched from the network.
//
// After editing a file under web/, touch web_assets.cc (the build does not see .incbin
// dependencies).
#pragma once

#include <string_view>

namespace strata::monitor {

struct WebAsset {
  std::string_view path;          // "/index.html"
  std::string_view content_type;  // "text/html; charset=utf-8"
  std::string_view data;
};

// The asset served at `path`, or nullptr.
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace strata::monitor
