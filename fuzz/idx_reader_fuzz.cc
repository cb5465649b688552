// Fuzzes the IDX reader (datasets/make_records.h ReadIdxImages / ReadIdxLabels), what
// `strata make-records fashion-mnist` reads from Debian's dataset-fashion-mnist files, plain
// or gzip. The input's bytes are the file. Any file must give images/labels or an error that
// names the file, never a crash, an exception or undefined behaviour; what is returned must
// be what the header promised (count x rows x cols pixels, one label per count).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "strata/datasets/make_records.h"

static void Check(bool ok) {
  if (!ok) std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/strata_idx_fuzz_" + std::to_string(::getpid()) + ".idx";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto images = strata::datasets::ReadIdxImages(path);
  if (images.ok()) {
    Check(images->rows > 0 && images->cols > 0);
    Check(images->pixels.size() == static_cast<uint64_t>(images->count) * images->rows * images->cols);
  } else {
    Check(images.status().message().find(path) != std::string::npos);
  }
  auto labels = strata::datasets::ReadIdxLabels(path);
  if (!labels.ok()) Check(labels.status().message().find(path) != std::string::npos);
  return 0;
}
