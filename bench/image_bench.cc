// Image decode and augmentation speed, one core, against peers in the same run.
//
// Test images are real photographs: the 2560x1600 JPEG wallpapers of Debian's
// plasma-workspace-wallpapers (Autumn, BytheWater, ColdRipple, ColorfulCups, ...), cut
// into 512 px tiles at full resolution and 331/224/192 px tiles at half resolution, and
// encoded at quality 90 with 4:2:0 subsampling. They are made once into a cache
// directory ($STRATA_BENCH_CACHE or /tmp/strata-bench-cache) and never go into git.
//
//   BM_Decode_Strata/S/F      image::DecodeJpeg, full size, reused output buffer; F = 1: its
//                             default, TensorFlow's INTEGER_FAST IDCT; F = 0: INTEGER_ACCURATE
//   BM_Decode_BareTurbo/S/F   a bare tjDecompressHeader3 + tjDecompress2 loop with the same
//                             IDCT (TJFLAG_FASTDCT when F = 1)
//   BM_Decode_StrataUnfused/S/1/0  DecodeJpeg with fused_color = false (tjDecompress2 only)
//   BM_Decode_PlanesOnly/S    tjDecompressToYUVPlanes alone (entropy decoding + IDCT), and
//   BM_Ycc420ToRgb/S          the fused upsampling + colour pass alone over those planes:
//                             the two halves of the fused decode
//   BM_Decode422_Strata/S/F   the tiles re-encoded 4:2:2 (q90), DecodeJpeg with the fused
//                             pass (F = 1) or without (F = 0)
//   (Pillow)                  bench/image_pillow_peer.py on the same files (run from here)
//   BM_Augment512_Strata      512 px stored -> 192x192 f32, random flip + saturation [0, 2]:
//                             DCT-scaled decode, crop, fused flip+resize, saturation kernel
//   BM_Augment512_FullDecode  the same augmenter with DCT scaling off (full decode, resize)
//   BM_Augment512_Naive       full decode -> u8 resize -> flip copy -> float -> saturation,
//                             separate passes (what a straightforward pipeline does)
// After the runs it prints the ratios the issue asks for (goals in brackets).
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "strata/image/augment.h"
#include "strata/image/color.h"
#include "strata/image/decode.h"
#include "strata/image/flip.h"
#include "strata/image/jpeg.h"
#include "strata/image/kernels.h"
#include "strata/image/normalize.h"
#include "strata/image/resize.h"
#include "strata/image/ycc.h"

namespace fs = std::filesystem;
namespace si = strata::image;

namespace {

const int kSizes[] = {512, 331, 224, 192};
const char* kPhotos[] = {"Autumn", "BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour", "EveningGlow",
                         "FallenLeaf", "Grey", "Kite", "OneStandsOut", "Path", "summer_1am"};

fs::path CacheDir() {
  const char* env = std::getenv("STRATA_BENCH_CACHE");
  return fs::path(env ? env : "/tmp/strata-bench-cache") / "image-tiles-v1";
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Cuts the wallpapers into tiles once; returns false (and says why) when none exist.
bool MakeTiles() {
  const fs::path dir = CacheDir();
  if (fs::exists(dir / "done")) return true;
  int photos = 0;
  si::Image full, half, tile;
  for (const char* name : kPhotos) {
    const fs::path src = fs::path("/usr/share/wallpapers") / name / "contents/images/2560x1600.jpg";
    if (!fs::exists(src)) continue;
    if (!si::DecodeJpeg(Slurp(src), {}, &full).ok()) continue;
    ++photos;
    if (!si::Resize(full.view(), full.height() / 2, full.width() / 2, {.method = si::ResizeMethod::kArea}, &half)
             .ok())
      return false;
    for (int s : kSizes) {
      fs::create_directories(dir / std::to_string(s));
      const si::ImageView from = s == 512 ? full.view() : half.view();
      int k = 0;
      for (int y = 0; y + s <= from.height; y += s)
        for (int x = 0; x + s <= from.width; x += s) {
          auto crop = from.Crop(y, x, s, s);
          std::string jpg;
          if (!crop.ok() || !si::EncodeJpeg(*crop, {.quality = 90, .subsampling = 420}, &jpg).ok()) return false;
          std::ofstream(dir / std::to_string(s) / (std::string(name) + "_" + std::to_string(k++) + ".jpg"),
                        std::ios::binary)
              << jpg;
        }
    }
  }
  if (photos == 0) {
    std::fprintf(stderr, "image_bench: no photos under /usr/share/wallpapers (apt-get install plasma-workspace-wallpapers)\n");
    return false;
  }
  std::ofstream(dir / "done") << photos << " photos\n";
  return true;
}

const std::vector<std::string>& Tiles(int size) {
  static std::map<int, std::vector<std::string>> cache;
  auto& v = cache[size];
  if (v.empty()) {
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(CacheDir() / std::to_string(size))) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (auto& f : files) v.push_back(Slurp(f));
  }
  return v;
}

// The same tiles re-encoded at quality 90 with 4:2:2 chroma (in memory, once).
const std::vector<std::string>& Tiles422(int size) {
  static std::map<int, std::vector<std::string>> cache;
  auto& v = cache[size];
  if (v.empty()) {
    si::Image img;
    for (const std::string& t : Tiles(size)) {
      std::string j;
      if (si::DecodeJpeg(t, {}, &img).ok() && si::EncodeJpeg(img.view(), {.quality = 90, .subsampling = 422}, &j).ok())
        v.push_back(std::move(j));
    }
  }
  return v;
}

void BM_Decode_Strata(benchmark::State& state) {
  const auto& tiles = Tiles(static_cast<int>(state.range(0)));
  si::Image out;
  // range(2) == 0: the fused colour path off (tjDecompress2 for everything), the "before".
  const si::JpegDecodeOptions options{.fast_dct = state.range(1) != 0, .fused_color = state.range(2) != 0};
  size_t i = 0;
  for (auto _ : state) {
    if (!si::DecodeJpeg(tiles[i], options, &out).ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out.data());
    if (++i == tiles.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

// 4:2:2 copies of the tiles: DecodeJpeg with the fused pass (range(1) = 1) or without.
void BM_Decode422_Strata(benchmark::State& state) {
  const auto& tiles = Tiles422(static_cast<int>(state.range(0)));
  si::Image out;
  const si::JpegDecodeOptions options{.fused_color = state.range(1) != 0};
  size_t i = 0;
  for (auto _ : state) {
    if (!si::DecodeJpeg(tiles[i], options, &out).ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out.data());
    if (++i == tiles.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Decode_BareTurbo(benchmark::State& state) {
  const auto& tiles = Tiles(static_cast<int>(state.range(0)));
  tjhandle h = tjInitDecompress();
  std::vector<unsigned char> buf(512 * 512 * 3);
  const int flags = state.range(1) != 0 ? TJFLAG_FASTDCT : 0;
  size_t i = 0;
  for (auto _ : state) {
    const std::string& t = tiles[i];
    int w, hh, samp, cs;
    tjDecompressHeader3(h, reinterpret_cast<const unsigned char*>(t.data()), t.size(), &w, &hh, &samp, &cs);
    if (tjDecompress2(h, reinterpret_cast<const unsigned char*>(t.data()), t.size(), buf.data(), w, w * 3, hh,
                      TJPF_RGB, flags) != 0)
      state.SkipWithError("tjDecompress2 failed");
    benchmark::DoNotOptimize(buf.data());
    if (++i == tiles.size()) i = 0;
  }
  tjDestroy(h);
  state.SetItemsProcessed(state.iterations());
}

// The planes of tile i (fast IDCT) into `planes`; false on error.
bool DecodePlanes(tjhandle h, const std::string& t, si::ycc::YccPlaneBuffers* planes, int* height, int* width) {
  int samp, cs;
  const auto* src = reinterpret_cast<const unsigned char*>(t.data());
  if (tjDecompressHeader3(h, src, t.size(), width, height, &samp, &cs) != 0 || samp != TJSAMP_420) return false;
  if (!planes->Reset(*height, *width)) return false;
  unsigned char* dst[3] = {planes->plane(0), planes->plane(1), planes->plane(2)};
  int strides[3] = {planes->stride(0), planes->stride(1), planes->stride(2)};
  return tjDecompressToYUVPlanes(h, src, t.size(), dst, *width, strides, *height, TJFLAG_FASTDCT) == 0;
}

void BM_Decode_PlanesOnly(benchmark::State& state) {
  const auto& tiles = Tiles(static_cast<int>(state.range(0)));
  tjhandle h = tjInitDecompress();
  si::ycc::YccPlaneBuffers planes;
  size_t i = 0;
  for (auto _ : state) {
    int height, width;
    if (!DecodePlanes(h, tiles[i], &planes, &height, &width)) state.SkipWithError("planes failed");
    benchmark::DoNotOptimize(planes.plane(0));
    if (++i == tiles.size()) i = 0;
  }
  tjDestroy(h);
  state.SetItemsProcessed(state.iterations());
}

void BM_Ycc420ToRgb(benchmark::State& state) {
  const auto& tiles = Tiles(static_cast<int>(state.range(0)));
  tjhandle h = tjInitDecompress();
  si::ycc::YccPlaneBuffers planes;
  int height = 0, width = 0;
  if (!DecodePlanes(h, tiles[0], &planes, &height, &width)) state.SkipWithError("planes failed");
  planes.ReplicateChromaEdges();
  std::vector<uint8_t> rgb(static_cast<size_t>(height) * width * 3);
  const si::ycc::YccKernels& k = si::ycc::Kernels();
  for (auto _ : state) {
    si::ycc::Ycc420ToRgb(planes.planes(), height, width, rgb.data(), width * 3, k, planes.scratch());
    benchmark::DoNotOptimize(rgb.data());
  }
  tjDestroy(h);
  state.SetItemsProcessed(state.iterations());
}

si::AugmentOptions Recipe(bool dct) {
  return {.height = 192, .width = 192, .dct_scaling = dct, .flip_left_right = 0.5f, .saturation_lower = 0,
          .saturation_upper = 2};
}

void RunAugment(benchmark::State& state, bool dct) {
  const auto& tiles = Tiles(512);
  auto aug = si::Augmenter::Make(Recipe(dct), 42);
  std::vector<float> out(192 * 192 * 3);
  size_t i = 0;
  uint64_t element = 0;
  for (auto _ : state) {
    if (!aug->Run(tiles[i], element++, out.data()).ok()) state.SkipWithError("augment failed");
    benchmark::DoNotOptimize(out.data());
    if (++i == tiles.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_Augment512_Strata(benchmark::State& state) { RunAugment(state, true); }
void BM_Augment512_FullDecode(benchmark::State& state) { RunAugment(state, false); }

void BM_Augment512_Naive(benchmark::State& state) {
  const auto& tiles = Tiles(512);
  si::Image decoded, resized, flipped;
  std::vector<float> out(192 * 192 * 3);
  size_t i = 0;
  uint64_t element = 0;
  for (auto _ : state) {
    si::SeedStream rng(42, element++);
    if (!si::DecodeJpeg(tiles[i], {}, &decoded).ok()) state.SkipWithError("decode failed");
    (void)si::Resize(decoded.view(), 192, 192, {}, &resized);
    si::ImageView v = resized.view();
    if (rng.Bernoulli(0.5f)) {
      si::FlipLeftRight(v, &flipped);
      v = flipped.view();
    }
    (void)si::NormalizeImage(v, {.mean = {0, 0, 0}, .std = {1, 1, 1}}, strata::DType::kF32, out.data());
    (void)si::RandomSaturation({out.data(), 192 * 192, 3}, 0, 2, rng);
    si::NormalizeInPlace(out.data(), 192 * 192, 3, {});
    benchmark::DoNotOptimize(out.data());
    if (++i == tiles.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

// Keeps the median items/s of each benchmark for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      auto it = r.counters.find("items_per_second");
      if (it != r.counters.end()) rate[r.run_name.function_name + (r.run_name.args.empty() ? "" : "/" + r.run_name.args)] = it->second;
    }
  }
  std::map<std::string, double> rate;
};

std::map<int, double> RunPillow(double seconds) {
  std::map<int, double> out;
  const fs::path script = fs::path(__FILE__).parent_path() / "image_pillow_peer.py";
  std::string cmd = "/usr/bin/python3 " + script.string() + " " + CacheDir().string() + " " + std::to_string(seconds);
  for (int s : kSizes) cmd += " " + std::to_string(s);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::string text;
  while (fgets(buf, sizeof(buf), p)) text += buf;
  pclose(p);
  // {"512": 123.4, "331": ...}: small enough to scan by hand.
  for (int s : kSizes) {
    const std::string key = "\"" + std::to_string(s) + "\": ";
    const size_t at = text.find(key);
    if (at != std::string::npos) out[s] = std::atof(text.c_str() + at + key.size());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (!MakeTiles()) return 1;
  for (int s : kSizes) {
    for (int fast : {1, 0}) {
      benchmark::RegisterBenchmark("BM_Decode_BareTurbo", BM_Decode_BareTurbo)->Args({s, fast});
      benchmark::RegisterBenchmark("BM_Decode_Strata", BM_Decode_Strata)->Args({s, fast, 1});
      if (fast) benchmark::RegisterBenchmark("BM_Decode_StrataUnfused", BM_Decode_Strata)->Args({s, fast, 0});
    }
  }
  for (int s : kSizes) {
    benchmark::RegisterBenchmark("BM_Decode_PlanesOnly", BM_Decode_PlanesOnly)->Arg(s);
    benchmark::RegisterBenchmark("BM_Ycc420ToRgb", BM_Ycc420ToRgb)->Arg(s);
    for (int fused : {1, 0}) benchmark::RegisterBenchmark("BM_Decode422_Strata", BM_Decode422_Strata)->Args({s, fused});
  }
  benchmark::RegisterBenchmark("BM_Augment512_Strata", BM_Augment512_Strata);
  benchmark::RegisterBenchmark("BM_Augment512_FullDecode", BM_Augment512_FullDecode);
  benchmark::RegisterBenchmark("BM_Augment512_Naive", BM_Augment512_Naive);
  benchmark::Initialize(&argc, argv);
  std::printf("kernels: %s; tiles per size: %zu (512), %zu (192); cache %s\n",
              si::kernels::IsaName(si::kernels::Kernels().isa), Tiles(512).size(), Tiles(192).size(),
              CacheDir().c_str());
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const std::map<int, double> pillow = RunPillow(1.0);
  auto& r = reporter.rate;
  std::printf("\nratios (one core; medians when --benchmark_repetitions > 1). Strata's default IDCT is\n"
              "TensorFlow's INTEGER_FAST; Pillow has no IDCT choice and decodes with libjpeg's accurate one:\n");
  for (int s : kSizes) {
    const std::string a = std::to_string(s);
    const double strata = r["BM_Decode_Strata/" + a + "/1/1"], bare = r["BM_Decode_BareTurbo/" + a + "/1"];
    const double acc = r["BM_Decode_Strata/" + a + "/0/1"], bare_acc = r["BM_Decode_BareTurbo/" + a + "/0"];
    const double unfused = r["BM_Decode_StrataUnfused/" + a + "/1/0"];
    const double pil = pillow.count(s) ? pillow.at(s) : 0;
    std::printf("  %3d px decode: strata %7.0f img/s, bare tjDecompress2 %7.0f, Pillow %7.0f | strata/bare %.3f [>= 0.97]"
                "  strata/Pillow %.2f [>= 1.2]\n",
                s, strata, bare, pil, bare > 0 ? strata / bare : 0, pil > 0 ? strata / pil : 0);
    std::printf("         fused colour path off (tjDecompress2): %7.0f img/s | fused / off %.3f\n", unfused,
                unfused > 0 ? strata / unfused : 0);
    std::printf("         accurate IDCT: strata %7.0f img/s, bare tjDecompress2 %7.0f | strata/bare %.3f;"
                "  strata/Pillow, same IDCT, %.2f\n",
                acc, bare_acc, bare_acc > 0 ? acc / bare_acc : 0, pil > 0 ? acc / pil : 0);
  }
  const double aug = r["BM_Augment512_Strata"], full = r["BM_Augment512_FullDecode"], naive = r["BM_Augment512_Naive"];
  std::printf("  512 -> 192 f32 + flip + saturation: strata %.0f img/s, full decode then resize %.0f (ratio %.2f [>= 1.1]), naive passes %.0f (ratio %.2f)\n",
              aug, full, full > 0 ? aug / full : 0, naive, naive > 0 ? aug / naive : 0);
  return 0;
}
