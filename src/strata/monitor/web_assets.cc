#include "strata/monitor/web_assets.h"

#include <array>

// Each file becomes a read-only byte array between two symbols. The path is relative to
// an include directory (src/ is one for every target that builds this file); GCC and
// Clang both hand their -I directories to the assembler for .incbin.
#define STRATA_INCBIN(sym, file)                                  \
  asm(".section .rodata\n"                                        \
      ".balign 16\n"                                              \
      ".global strata_web_" #sym "_begin\n"                       \
      "strata_web_" #sym "_begin:\n"                              \
      ".incbin \"" file "\"\n"                                    \
      ".global strata_web_" #sym "_end\n"                         \
      "strata_web_" #sym "_end:\n"                                \
      ".byte 0\n"                                                 \
      ".previous\n");                                             \
  extern "C" const char strata_web_##sym##_begin[];               \
  extern "C" const char strata_web_##sym##_end[];

STRATA_INCBIN(index_html, "strata/monitor/web/index.html")
STRATA_INCBIN(app_js, "strata/monitor/web/app.js")
STRATA_INCBIN(style_css, "strata/monitor/web/style.css")

namespace strata::monitor {
namespace {

std::string_view Bytes(const char* begin, const char* end) {
  return std::string_view(begin, static_cast<size_t>(end - begin));
}

}  // namespace

const WebAsset* FindWebAsset(std::string_view path) {
  static const std::array<WebAsset, 3> kAssets = {{
      {"/index.html", "text/html; charset=utf-8", Bytes(strata_web_index_html_begin, strata_web_index_html_end)},
      {"/app.js", "text/javascript; charset=utf-8", Bytes(strata_web_app_js_begin, strata_web_app_js_end)},
      {"/style.css", "text/css; charset=utf-8", Bytes(strata_web_style_css_begin, strata_web_style_css_end)},
  }};
  for (const auto& a : kAssets)
    if (a.path == path) return &a;
  return nullptr;
}

}  // namespace strata::monitor
