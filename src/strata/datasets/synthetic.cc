#include "strata/datasets/synthetic.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

#include "strata/data/rng.h"
#include "strata/image/image.h"
#include "strata/image/jpeg.h"
#include "strata/image/png.h"
#include "strata/record/example.h"
#include "strata/record/record_writer.h"

namespace strata::datasets {
namespace {

Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir", dir, errno);
  return Status::OK();
}

}  // namespace

Result<std::vector<std::string>> WriteSyntheticFlowers(const std::string& dir, SyntheticFlowersOptions o) {
  STRATA_RETURN_IF_ERROR(MakeDir(dir));
  std::vector<std::string> names;
  image::Image img;
  std::string jpeg;
  record::ExampleBuilder b;
  data::Rng rng(o.seed);
  const int s = o.image_size;
  for (int f = 0; f < o.files; ++f) {
    char name[64];
    std::snprintf(name, sizeof name, "/flowers-%02d.tfrec", f);
    names.push_back(dir + name);
    STRATA_ASSIGN_OR_RETURN(auto w, record::RecordWriter::Open(names.back()));
    for (int r = 0; r < o.records_per_file; ++r) {
      const int64_t label = static_cast<int64_t>(rng.Below(o.classes));
      uint8_t* p = img.Reset(s, s, 3);
      const float fx = 2 + rng.UniformFloat(0, 6), fy = 2 + rng.UniformFloat(0, 6), ph = rng.UniformFloat(0, 6.28f);
      for (int y = 0; y < s; ++y)
        for (int x = 0; x < s; ++x) {
          const float u = static_cast<float>(x) / s, v = static_cast<float>(y) / s;
          const float petal = std::sin(fx * 6.28f * u + ph) * std::cos(fy * 6.28f * v);
          const int noise = static_cast<int>(rng.Below(24));
          uint8_t* px = p + (static_cast<int64_t>(y) * s + x) * 3;
          px[0] = static_cast<uint8_t>(std::clamp(128 + 100 * petal + noise, 0.0f, 255.0f));
          px[1] = static_cast<uint8_t>(std::clamp(90 + 60 * v + (label % 7) * 10 + noise, 0.0f, 255.0f));
          px[2] = static_cast<uint8_t>(std::clamp(60 + 120 * u * v + noise, 0.0f, 255.0f));
        }
      jpeg.clear();
      STRATA_RETURN_IF_ERROR(image::EncodeJpeg(img.view(), {.quality = o.jpeg_quality}, &jpeg));
      b.Clear();
      b.AddBytes("image", std::string_view(jpeg));
      b.AddInt64s("class", std::span(&label, 1));
      const std::string id = "f" + std::to_string(f) + "r" + std::to_string(r);
      b.AddBytes("id", std::string_view(id));
      STRATA_RETURN_IF_ERROR(w->WriteRecord(b.Finish()));
    }
    STRATA_RETURN_IF_ERROR(w->Close());
  }
  return names;
}

Result<std::vector<std::string>> WriteSyntheticFashionMnist(const std::string& dir, int files, int records_per_file) {
  STRATA_RETURN_IF_ERROR(MakeDir(dir));
  std::vector<std::string> names;
  image::Image img;
  std::string png;
  record::ExampleBuilder b;
  data::Rng rng(7);
  for (int f = 0; f < files; ++f) {
    char name[96];
    std::snprintf(name, sizeof name, "/fashion_mnist-train.tfrecord-%05d-of-%05d", f, files);
    names.push_back(dir + name);
    STRATA_ASSIGN_OR_RETURN(auto w, record::RecordWriter::Open(names.back()));
    for (int r = 0; r < records_per_file; ++r) {
      const int64_t label = (static_cast<int64_t>(f) * records_per_file + r) % 10;
      uint8_t* p = img.Reset(28, 28, 1);
      for (int i = 0; i < 28 * 28; ++i) p[i] = static_cast<uint8_t>(10 * label + rng.Below(100));
      png.clear();
      STRATA_RETURN_IF_ERROR(image::EncodePng(img.view(), {}, &png));
      b.Clear();
      b.AddBytes("image", std::string_view(png));
      b.AddInt64s("label", std::span(&label, 1));
      STRATA_RETURN_IF_ERROR(w->WriteRecord(b.Finish()));
    }
    STRATA_RETURN_IF_ERROR(w->Close());
  }
  return names;
}

}  // namespace strata::datasets
