#include "strata/datasets/make_records.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string_view>

#include "strata/core/cpu.h"
#include "strata/core/file.h"
#include "strata/core/thread_pool.h"
#include "strata/image/decode.h"
#include "strata/image/jpeg.h"
#include "strata/image/png.h"
#include "strata/image/random.h"
#include "strata/image/resize.h"
#include "strata/record/example.h"
#include "strata/record/record_writer.h"

namespace strata::datasets {

namespace fs = std::filesystem;

const char* const kFashionMnistClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

namespace {

int Threads(int requested) { return requested > 0 ? requested : std::max(1, UsableCores()); }

bool IsImageFile(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

Result<std::vector<fs::path>> SortedEntries(const fs::path& dir, bool want_dirs) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return IOError("cannot list " + dir.string() + ": " + ec.message());
  std::vector<fs::path> out;
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (want_dirs ? e.is_directory(ec) : (e.is_regular_file(ec) && IsImageFile(e.path()))) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Item {
  std::string path;  // source file
  int64_t label = 0;
  std::string id;    // 9 hex characters
};

// The largest centred square, decoded at the smallest DCT scale that keeps it >= size,
// resized to size x size and encoded as JPEG.
Status EncodeSquareJpeg(const std::string& path, int size, int quality, std::string* jpeg) {
  thread_local image::Image decoded, resized;
  STRATA_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  STRATA_ASSIGN_OR_RETURN(image::ImageInfo info, image::ReadImageInfo(bytes));
  const int side = std::min(info.height, info.width);
  image::DecodeOptions d{.channels = 3,
                         .min_height = static_cast<int>(std::ceil(static_cast<double>(info.height) * size / side)),
                         .min_width = static_cast<int>(std::ceil(static_cast<double>(info.width) * size / side))};
  STRATA_RETURN_IF_ERROR(image::DecodeImage(bytes, d, &decoded));
  const image::ImageView full = decoded.view();
  const int s = std::min(full.height, full.width);
  STRATA_ASSIGN_OR_RETURN(image::ImageView square, full.Crop((full.height - s) / 2, (full.width - s) / 2, s, s));
  const image::ResizeMethod m = s >= size ? image::ResizeMethod::kArea : image::ResizeMethod::kBilinear;
  STRATA_RETURN_IF_ERROR(image::Resize(square, size, size, {.method = m}, &resized));
  return image::EncodeJpeg(resized.view(), {.quality = quality, .subsampling = 420}, jpeg);
}

// Reports progress from worker threads through one lock, at most ~20 times a second.
class Progress {
 public:
  Progress(const ProgressFn& fn, int64_t total) : fn_(fn), total_(total) {}
  void Add(int64_t n) {
    const int64_t done = done_.fetch_add(n) + n;
    if (!fn_) return;
    std::lock_guard<std::mutex> lock(mu_);
    fn_(done, total_);
  }

 private:
  const ProgressFn& fn_;
  int64_t total_;
  std::atomic<int64_t> done_{0};
  std::mutex mu_;
};

std::string Hex9(uint64_t v) {
  static const char* hex = "0123456789abcdef";
  std::string s(9, '0');
  for (int i = 8; i >= 0; --i, v >>= 4) s[i] = hex[v & 15];
  return s;
}


// Ids: 36 bits of the seed's stream per item in sorted order (counted from `first`),
// redrawn on a collision with any id in `ids`; then a shuffle across shards (Fisher-Yates
// on the seed's stream).
void AssignIdsAndShuffle(uint64_t seed, uint64_t first, std::set<std::string>* ids, std::vector<Item>* items) {
  for (size_t i = 0; i < items->size(); ++i) {
    image::SeedStream rng(seed, first + i, /*purpose=*/2);
    std::string id;
    do {
      const uint64_t v = (static_cast<uint64_t>(rng.NextU32()) << 4) ^ (rng.NextU32() & 15);
      id = Hex9(v & 0xFFFFFFFFFull);
    } while (!ids->insert(id).second);
    (*items)[i].id = id;
  }
  image::SeedStream shuffle(seed, first, /*purpose=*/1);
  for (size_t i = items->size(); i > 1; --i)
    std::swap((*items)[i - 1], (*items)[shuffle.UniformInt(static_cast<uint32_t>(i))]);
}

// Encodes `items` on the pool and writes them to SPLIT_DIR/{shard:02d}-{S}x{S}-{count}.tfrec
// in the flowers schema (class when o.labels, id, image).
using EncodeFn = std::function<Status(const Item&, std::string* jpeg)>;
Status WriteShards(const std::vector<Item>& items, int shards, const fs::path& split_dir, const MakeRecordsOptions& o,
                   const EncodeFn& encode, ThreadPool& pool, Progress& progress, MakeRecordsReport* report) {
  const int64_t total = static_cast<int64_t>(items.size());
  const std::string size = std::to_string(o.image_size) + "x" + std::to_string(o.image_size);
  int64_t begin = 0;
  std::vector<std::string> jpegs;
  std::vector<Status> errors;
  record::ExampleBuilder builder;
  for (int shard = 0; shard < shards; ++shard) {
    const int64_t count = total / shards + (shard < total % shards ? 1 : 0);
    jpegs.assign(count, std::string());
    errors.assign(count, Status::OK());
    pool.ParallelFor(count, [&](int64_t i) {
      errors[i] = encode(items[begin + i], &jpegs[i]);
      progress.Add(1);
    });
    int64_t good = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (errors[i].ok()) {
        ++good;
        continue;
      }
      const std::string what = items[begin + i].path + ": " + errors[i].ToString();
      if (!o.skip_bad) return errors[i].WithContext("make-records: cannot use " + items[begin + i].path + " (--skip-bad to go on)");
      report->skipped.push_back(what);
    }
    char name[64];
    std::snprintf(name, sizeof(name), "%02d-%s-%lld.tfrec", shard, size.c_str(), static_cast<long long>(good));
    const std::string path = (split_dir / name).string();
    STRATA_ASSIGN_OR_RETURN(auto writer, record::RecordWriter::Open(path));
    for (int64_t i = 0; i < count; ++i) {
      if (!errors[i].ok()) continue;
      const Item& item = items[begin + i];
      builder.Clear();
      if (o.labels) {
        const int64_t label = item.label;
        builder.AddInt64s("class", std::span(&label, 1));
      }
      builder.AddBytes("id", item.id);
      builder.AddBytes("image", jpegs[i]);
      STRATA_RETURN_IF_ERROR(writer->WriteRecord(builder.Finish()).WithContext(path));
    }
    STRATA_RETURN_IF_ERROR(writer->Close());
    report->files.push_back(path);
    report->written += good;
    begin += count;
  }
  return Status::OK();
}

}  // namespace

Result<MakeRecordsReport> MakeImageFolderRecords(const std::string& from_dir, const std::string& out_dir,
                                                 const MakeRecordsOptions& o) {
  if (o.image_size <= 0 || o.image_size > 8192) {
    return InvalidArgument("make-records: --image-size must be in 1..8192, not " + std::to_string(o.image_size));
  }
  if (o.quality < 1 || o.quality > 100) {
    return InvalidArgument("make-records: --quality must be in 1..100, not " + std::to_string(o.quality));
  }
  if (o.shards < 0) return InvalidArgument("make-records: --shards must be >= 0");
  std::error_code ec;
  if (!fs::is_directory(from_dir, ec)) return NotFound("make-records: " + from_dir + " is not a directory");

  MakeRecordsReport report;
  std::vector<Item> items;
  STRATA_ASSIGN_OR_RETURN(std::vector<fs::path> class_dirs, SortedEntries(from_dir, true));
  for (size_t c = 0; c < class_dirs.size(); ++c) {
    report.classes.push_back(class_dirs[c].filename().string());
    STRATA_ASSIGN_OR_RETURN(std::vector<fs::path> files, SortedEntries(class_dirs[c], false));
    for (auto& f : files) items.push_back({f.string(), static_cast<int64_t>(c), ""});
  }
  if (!o.labels) {  // a test split may also keep its images at the top level
    STRATA_ASSIGN_OR_RETURN(std::vector<fs::path> files, SortedEntries(from_dir, false));
    for (auto& f : files) items.push_back({f.string(), -1, ""});
  } else if (class_dirs.empty()) {
    return InvalidArgument("make-records: " + from_dir +
                           " has no class sub-folders (one folder per class; --no-label for unlabelled images)");
  }
  if (items.empty()) return InvalidArgument("make-records: no .jpg, .jpeg or .png files under " + from_dir);

  std::set<std::string> ids;
  AssignIdsAndShuffle(o.seed, 0, &ids, &items);

  const int64_t total = static_cast<int64_t>(items.size());
  const int shards = static_cast<int>(std::min<int64_t>(o.shards > 0 ? o.shards : 16, total));
  const fs::path split_dir = fs::path(out_dir) / o.split;
  fs::create_directories(split_dir, ec);
  if (ec) return IOError("make-records: cannot create " + split_dir.string() + ": " + ec.message());
  if (o.labels) {
    std::string text;
    for (const auto& c : report.classes) text += c + "\n";
    STRATA_RETURN_IF_ERROR(WriteFileAtomic((fs::path(out_dir) / "classes.txt").string(), text));
  }

  ThreadPool pool({.num_threads = Threads(o.threads), .name = "make-records"});
  Progress progress(o.progress, total);
  auto encode = [&o](const Item& item, std::string* jpeg) { return EncodeSquareJpeg(item.path, o.image_size, o.quality, jpeg); };
  STRATA_RETURN_IF_ERROR(WriteShards(items, shards, split_dir, o, encode, pool, progress, &report));
  return report;
}

// ---- generated flowers -----------------------------------------------------------------

namespace {

// HSV in [0, 1] to RGB in [0, 255].
void HsvToRgb(float h, float sat, float v, float rgb[3]) {
  h = (h - std::floor(h)) * 6.0f;
  const int i = static_cast<int>(h) % 6;
  const float f = h - std::floor(h), p = v * (1 - sat), q = v * (1 - sat * f), t = v * (1 - sat * (1 - f));
  const float table[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  for (int c = 0; c < 3; ++c) rgb[c] = 255.0f * table[i][c];
}

}  // namespace

void RenderGeneratedFlower(int label, uint64_t seed, uint64_t index, int size, uint8_t* rgb) {
  // The class: golden-ratio hues keep neighbouring classes apart; 3..9 petals.
  const float petal_hue = std::fmod(0.61803398f * static_cast<float>(label), 1.0f);
  const float centre_hue = std::fmod(0.5f + 0.2763932f * static_cast<float>(label), 1.0f);
  const int petals = 3 + (label * 5) % 7;
  const float bg_hue = 0.22f + 0.16f * static_cast<float>((label * 3) % 5) / 4.0f;  // greens to teals
  // The image: position, size, rotation, lighting, noise.
  image::SeedStream rng(seed, index, /*purpose=*/7);
  const float s = static_cast<float>(size);
  const float cx = s * rng.Uniform(0.38f, 0.62f), cy = s * rng.Uniform(0.38f, 0.62f);
  const float radius = s * rng.Uniform(0.26f, 0.40f), turn = rng.Uniform(0.0f, 6.2831853f);
  const float light = rng.Uniform(0.75f, 1.0f);
  float petal[3], centre[3], bg[3];
  HsvToRgb(petal_hue + rng.Uniform(-0.02f, 0.02f), 0.8f, light, petal);
  HsvToRgb(centre_hue, 0.9f, 0.9f * light, centre);
  HsvToRgb(bg_hue, 0.6f, 0.35f * light, bg);
  for (int y = 0; y < size; ++y) {
    for (int x = 0; x < size; ++x) {
      const float dx = static_cast<float>(x) + 0.5f - cx, dy = static_cast<float>(y) + 0.5f - cy;
      const float r = std::sqrt(dx * dx + dy * dy), phi = std::atan2(dy, dx);
      const float edge = radius * (0.45f + 0.55f * std::fabs(std::cos(0.5f * static_cast<float>(petals) * (phi - turn))));
      const float* base = r < 0.22f * radius ? centre : r < edge ? petal : bg;
      // Petals darken towards their tips; the background has a vertical gradient.
      const float shade = base == petal ? 1.0f - 0.35f * r / radius : base == bg ? 0.8f + 0.4f * static_cast<float>(y) / s : 1.0f;
      uint8_t* px = rgb + (static_cast<int64_t>(y) * size + x) * 3;
      const float noise = static_cast<float>(static_cast<int>(rng.NextU32() % 25) - 12);
      for (int c = 0; c < 3; ++c) px[c] = static_cast<uint8_t>(std::clamp(base[c] * shade + noise, 0.0f, 255.0f));
    }
  }
}

Result<MakeRecordsReport> MakeGeneratedFlowerRecords(const std::string& out_dir, const GeneratedFlowersOptions& o) {
  if (o.classes < 1 || o.classes > 100000) return InvalidArgument("make-records: --classes must be in 1..100000");
  if (o.image_size < 8 || o.image_size > 8192) return InvalidArgument("make-records: --image-size must be in 8..8192");
  if (o.train_per_class < 0 || o.val_per_class < 0 || o.test_per_class < 0 || o.shards < 1)
    return InvalidArgument("make-records: per-class counts must be >= 0 and --shards >= 1");
  MakeRecordsReport report;
  for (int c = 0; c < o.classes; ++c) {
    char fallback[32];
    std::snprintf(fallback, sizeof(fallback), "class_%03d", c);
    report.classes.push_back(c < static_cast<int>(o.class_names.size()) ? o.class_names[c] : fallback);
  }
  std::string text;
  for (const auto& c : report.classes) text += c + "\n";
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return IOError("make-records: cannot create " + out_dir + ": " + ec.message());
  STRATA_RETURN_IF_ERROR(WriteFileAtomic((fs::path(out_dir) / "classes.txt").string(), text));

  struct Split {
    const char* name;
    int per_class;
  };
  const Split splits[3] = {{"train", o.train_per_class}, {"val", o.val_per_class}, {"test", o.test_per_class}};
  const int64_t total = static_cast<int64_t>(o.classes) * (o.train_per_class + o.val_per_class + o.test_per_class);
  ThreadPool pool({.num_threads = Threads(o.threads), .name = "make-records"});
  Progress progress(o.progress, total);
  std::set<std::string> ids;
  uint64_t next_index = 0;
  MakeRecordsOptions write{.image_size = o.image_size, .quality = o.quality, .seed = o.seed};
  const uint64_t seed = o.seed, size = static_cast<uint64_t>(o.image_size);
  // The item's path field holds the image's global index: it seeds the rendering.
  auto encode = [seed, size, &write](const Item& item, std::string* jpeg) -> Status {
    thread_local image::Image img;
    const uint64_t index = std::stoull(item.path.substr(item.path.rfind('#') + 1));
    RenderGeneratedFlower(static_cast<int>(item.label), seed, index, static_cast<int>(size),
                          img.Reset(static_cast<int>(size), static_cast<int>(size), 3));
    return image::EncodeJpeg(img.view(), {.quality = write.quality, .subsampling = 420}, jpeg);
  };
  std::string test_labels = "id,label\n";
  for (const Split& split : splits) {
    std::vector<Item> items;
    for (int c = 0; c < o.classes; ++c)
      for (int i = 0; i < split.per_class; ++i)
        items.push_back({"generated:" + std::string(split.name) + "/" + report.classes[c] + "#" +
                             std::to_string(next_index + items.size()), c, ""});
    if (items.empty()) continue;
    AssignIdsAndShuffle(o.seed, next_index, &ids, &items);
    next_index += items.size();
    write.labels = std::string(split.name) != "test";
    const fs::path split_dir = fs::path(out_dir) / split.name;
    fs::create_directories(split_dir, ec);
    if (ec) return IOError("make-records: cannot create " + split_dir.string() + ": " + ec.message());
    const int shards = static_cast<int>(std::min<int64_t>(o.shards, static_cast<int64_t>(items.size())));
    STRATA_RETURN_IF_ERROR(WriteShards(items, shards, split_dir, write, encode, pool, progress, &report));
    if (!write.labels)
      for (const Item& item : items) test_labels += item.id + "," + std::to_string(item.label) + "\n";
  }
  STRATA_RETURN_IF_ERROR(WriteFileAtomic((fs::path(out_dir) / "test_labels.csv").string(), test_labels));
  return report;
}

// ---- Fashion-MNIST ---------------------------------------------------------------------

namespace {

// Reads a plain or gzip file whole (gzread passes plain files through).
Result<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return ErrnoError("open", path, errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      return Corruption(path + ": " + msg);
    }
    if (n == 0) break;
    out.append(buf, n);
    if (out.size() > (size_t{1} << 31)) {
      gzclose(f);
      return InvalidArgument(path + ": more than 2 GiB uncompressed; not an IDX file of this dataset");
    }
  }
  gzclose(f);
  return out;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) | static_cast<uint8_t>(s[at + 3]);
}

std::string FindIdx(const std::string& dir, const std::string& stem) {
  const std::string gz = dir + "/" + stem + ".gz";
  std::error_code ec;
  return fs::exists(gz, ec) ? gz : dir + "/" + stem;
}

}  // namespace

Result<IdxImages> ReadIdxImages(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string data, ReadMaybeGzip(path));
  if (data.size() >= 4 && BigEndian32(data, 0) != 0x803) {
    return Corruption(path + ": not an IDX u8 image file (magic " + std::to_string(BigEndian32(data, 0)) +
                      ", want 2051)");
  }
  if (data.size() < 16) return Truncated(path + ": IDX image header needs 16 bytes, file has " + std::to_string(data.size()));
  IdxImages out;
  out.count = BigEndian32(data, 4);
  out.rows = static_cast<int>(BigEndian32(data, 8));
  out.cols = static_cast<int>(BigEndian32(data, 12));
  if (out.rows <= 0 || out.cols <= 0 || out.rows > 4096 || out.cols > 4096) {
    return Corruption(path + ": IDX image size " + std::to_string(out.rows) + "x" + std::to_string(out.cols));
  }
  const uint64_t want = static_cast<uint64_t>(out.count) * out.rows * out.cols;
  if (data.size() - 16 != want) {
    return Corruption(path + ": header promises " + std::to_string(out.count) + " images of " +
                      std::to_string(out.rows) + "x" + std::to_string(out.cols) + " (" + std::to_string(want) +
                      " bytes), file holds " + std::to_string(data.size() - 16));
  }
  out.pixels.assign(data.begin() + 16, data.end());
  return out;
}

Result<std::vector<uint8_t>> ReadIdxLabels(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string data, ReadMaybeGzip(path));
  if (data.size() >= 4 && BigEndian32(data, 0) != 0x801) {
    return Corruption(path + ": not an IDX u8 label file (magic " + std::to_string(BigEndian32(data, 0)) +
                      ", want 2049)");
  }
  if (data.size() < 8) return Truncated(path + ": IDX label header needs 8 bytes, file has " + std::to_string(data.size()));
  const uint64_t n = BigEndian32(data, 4);
  if (data.size() - 8 != n) {
    return Corruption(path + ": header promises " + std::to_string(n) + " labels, file holds " +
                      std::to_string(data.size() - 8));
  }
  return std::vector<uint8_t>(data.begin() + 8, data.end());
}

std::string FashionMnistRecordDir(const std::string& out_dir) {
  return (fs::path(out_dir) / "fashion_mnist" / "3.0.1").string();
}

Result<MakeRecordsReport> MakeFashionMnistRecords(const std::string& out_dir, const FashionMnistRecordsOptions& o) {
  if (o.train_shards <= 0 || o.test_shards <= 0) return InvalidArgument("fashion-mnist: shards must be >= 1");
  struct Split {
    const char* name;
    const char* stem;
    int shards;
    IdxImages images;
    std::vector<uint8_t> labels;
  };
  Split splits[2] = {{"train", "train", o.train_shards, {}, {}}, {"test", "t10k", o.test_shards, {}, {}}};
  int64_t total = 0;
  for (Split& s : splits) {
    const std::string img_path = FindIdx(o.source_dir, std::string(s.stem) + "-images-idx3-ubyte");
    const std::string lbl_path = FindIdx(o.source_dir, std::string(s.stem) + "-labels-idx1-ubyte");
    STRATA_ASSIGN_OR_RETURN(s.images, ReadIdxImages(img_path));
    STRATA_ASSIGN_OR_RETURN(s.labels, ReadIdxLabels(lbl_path));
    if (static_cast<int64_t>(s.labels.size()) != s.images.count) {
      return Corruption("fashion-mnist: " + img_path + " has " + std::to_string(s.images.count) + " images but " +
                        lbl_path + " has " + std::to_string(s.labels.size()) + " labels");
    }
    for (size_t i = 0; i < s.labels.size(); ++i)
      if (s.labels[i] > 9) return Corruption(lbl_path + ": label " + std::to_string(s.labels[i]) + " at index " + std::to_string(i));
    total += s.images.count;
  }
  const std::string dir = FashionMnistRecordDir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IOError("fashion-mnist: cannot create " + dir + ": " + ec.message());

  MakeRecordsReport report;
  for (const char* c : kFashionMnistClasses) report.classes.push_back(c);
  ThreadPool pool({.num_threads = Threads(o.threads), .name = "make-records"});
  Progress progress(o.progress, total);
  std::string info_splits;
  for (Split& s : splits) {
    const int64_t n = s.images.count, per = static_cast<int64_t>(s.images.rows) * s.images.cols;
    std::vector<std::string> pngs(n);
    std::vector<Status> errors(n);
    pool.ParallelFor((n + 255) / 256, [&](int64_t chunk) {
      const int64_t end = std::min(n, (chunk + 1) * 256);
      for (int64_t i = chunk * 256; i < end; ++i) {
        const image::ImageView v{s.images.pixels.data() + i * per, s.images.rows, s.images.cols, 1, s.images.cols};
        errors[i] = image::EncodePng(v, {}, &pngs[i]);
      }
      progress.Add(end - chunk * 256);
    });
    for (int64_t i = 0; i < n; ++i)
      if (!errors[i].ok()) return errors[i].WithContext(std::string("fashion-mnist ") + s.name + " image " + std::to_string(i));
    std::string lengths;
    record::ExampleBuilder builder;
    int64_t begin = 0;
    for (int shard = 0; shard < s.shards; ++shard) {
      const int64_t count = n / s.shards + (shard < n % s.shards ? 1 : 0);
      char name[96];
      std::snprintf(name, sizeof(name), "fashion_mnist-%s.tfrecord-%05d-of-%05d", s.name, shard, s.shards);
      const std::string path = dir + "/" + name;
      STRATA_ASSIGN_OR_RETURN(auto writer, record::RecordWriter::Open(path));
      for (int64_t i = begin; i < begin + count; ++i) {
        builder.Clear();
        builder.AddBytes("image", pngs[i]);
        const int64_t label = s.labels[i];
        builder.AddInt64s("label", std::span(&label, 1));
        STRATA_RETURN_IF_ERROR(writer->WriteRecord(builder.Finish()).WithContext(path));
      }
      STRATA_RETURN_IF_ERROR(writer->Close());
      report.files.push_back(path);
      lengths += (lengths.empty() ? "\"" : ", \"") + std::to_string(count) + "\"";
      begin += count;
    }
    report.written += n;
    info_splits += std::string(info_splits.empty() ? "" : ",\n") + "    {\"name\": \"" + s.name +
                   "\", \"numShards\": \"" + std::to_string(s.shards) + "\", \"shardLengths\": [" + lengths + "]}";
  }
  std::string labels;
  for (const char* c : kFashionMnistClasses) labels += std::string(c) + "\n";
  STRATA_RETURN_IF_ERROR(WriteFileAtomic(dir + "/label.labels.txt", labels));
  const std::string info =
      "{\n  \"name\": \"fashion_mnist\",\n  \"version\": \"3.0.1\",\n  \"fileFormat\": \"tfrecord\",\n"
      "  \"features\": {\"image\": {\"shape\": [28, 28, 1], \"dtype\": \"uint8\", \"encoding\": \"png\"},"
      " \"label\": {\"numClasses\": 10, \"dtype\": \"int64\"}},\n  \"splits\": [\n" +
      info_splits + "\n  ],\n  \"source\": \"" + o.source_dir + " (Debian dataset-fashion-mnist)\"\n}\n";
  STRATA_RETURN_IF_ERROR(WriteFileAtomic(dir + "/dataset_info.json", info));
  return report;
}

}  // namespace strata::datasets
