// Fuzzes the input pipeline's parsers: the element codec (element_codec.h), saved
// iterator state (iterator_state.h) restored onto a running pipeline, and cache files.
// Any input must give a Status, never a crash, a hang or an unchecked allocation. And what
// decodes re-encodes to bytes that decode to the same thing: an element's encoding, and a
// parsed state's serialization, are fixed points after one round (the property is checked
// with abort(), so the corpus replay in ctest fails on it).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "strata/data/dataset.h"
#include "strata/data/element_codec.h"
#include "strata/data/iterator_state.h"

using namespace strata;
using namespace strata::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 3;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode == 0) {
    Element e;
    while (!in.empty() && DecodeElement(&in, &e, "fuzz").ok()) {
      std::string again;
      EncodeElement(e, &again);  // whatever decodes re-encodes...
      std::string_view view(again);
      Element back;
      if (!DecodeElement(&view, &back, "fuzz re-encoded").ok() || !view.empty()) std::abort();
      std::string twice;
      EncodeElement(back, &twice);
      if (twice != again) std::abort();  // ...to the same bytes
    }
    return 0;
  }
  if (mode == 1) {
    auto st = IteratorState::Parse(in);
    if (st.ok()) {
      const std::string once = st->Serialize();
      auto back = IteratorState::Parse(once);
      if (!back.ok() || back->Serialize() != once) std::abort();
    }
    // Restore onto pipelines whose stages read many kinds of keys.
    static const Dataset kPipelines[] = {
        Dataset::range(50).shuffle(4, {.seed = 1}).map([](Element e) -> Result<Element> { return e; },
                                                        {.num_parallel_calls = 2}).batch(3).prefetch(2).repeat(2),
        Dataset::range(5).interleave([](const Element&) -> Result<Dataset> { return Dataset::range(3); },
                                     {.cycle_length = 2, .num_parallel_calls = 2}).take(7).skip(1).enumerate(),
    };
    for (const Dataset& ds : kPipelines) {
      auto it = ds.make_iterator();
      if (!it.ok()) continue;
      if (st.ok() && (*it)->Restore(std::string(in)).ok()) {
        for (int i = 0; i < 64; ++i) {
          auto e = (*it)->Next();
          if (e.ok() && !e->has_value()) break;
        }
      }
    }
    return 0;
  }
  // A cache file.
  char path[] = "/tmp/strata_fuzz_cache_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return 0;
  if (::write(fd, in.data(), in.size()) != static_cast<ssize_t>(in.size())) {
    ::close(fd);
    ::unlink(path);
    return 0;
  }
  ::close(fd);
  auto it = Dataset::range(3).cache(path).make_iterator();
  if (it.ok())
    for (int i = 0; i < 256; ++i) {
      auto e = (*it)->Next();
      if (!e.ok() || !e->has_value()) break;
    }
  ::unlink(path);
  return 0;
}
