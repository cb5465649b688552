// strata bench-input: runs the flowers input pipeline alone (no training) and reports how
// fast it delivers batches, with the per-stage statistics.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "strata/core/clock.h"
#include "strata/core/cpu.h"
#include "strata/datasets/flowers.h"

namespace strata::cli {
namespace {

int RunBenchInput(const std::vector<std::string>& args) {
  std::string data, deterministic = "false";
  int64_t image_size = 192, batch = 64, threads = 0, seed = -1;
  double seconds = 10;
  bool json = false;
  FlagParser flags("bench-input",
                   "--data GLOB [--image-size S] [--batch B] [--deterministic true|false] [--seconds T] "
                   "[--threads N] [--seed N] [--json]",
                   "Runs the flowers recipe (list files -> TFRecordDataset -> parse -> decode + resize -> flip +\n"
                   "saturation -> repeat -> shuffle(2048) -> batch -> prefetch) alone for T seconds and prints\n"
                   "images/s, MB/s of records read and the per-stage table (busy time, time blocked up- and\n"
                   "downstream, buffer fill, parallelism; * = set by AUTOTUNE).");
  flags.String("data", &data, "TFRecord files (glob; ',' separates several) with `image` JPEG and `class` int64");
  flags.Int("image-size", &image_size, "decoded images are resized to S x S (default 192)");
  flags.Int("batch", &batch, "images per batch (default 64)");
  flags.String("deterministic", &deterministic, "true: exact order for a seed; false (default): as ready");
  flags.Double("seconds", &seconds, "how long to run (default 10)");
  flags.Int("threads", &threads, "CPU budget for AUTOTUNE (default: usable cores)");
  flags.Int("seed", &seed, "seed for file order, shuffle and augmentation (default: random)");
  flags.Bool("json", &json, "print one JSON object");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (data.empty()) return Fail("bench-input", "--data is required", kExitUsage);
  if (deterministic != "true" && deterministic != "false")
    return Fail("bench-input", "--deterministic must be true or false, got '" + deterministic + "'", kExitUsage);
  if (image_size <= 0 || image_size > 4096) return Fail("bench-input", "--image-size must be in [1, 4096]", kExitUsage);
  if (batch <= 0) return Fail("bench-input", "--batch must be > 0", kExitUsage);
  if (threads < 0) return Fail("bench-input", "--threads must be >= 0", kExitUsage);
  if (!(seconds > 0)) return Fail("bench-input", "--seconds must be > 0", kExitUsage);

  datasets::FlowersOptions o;
  o.image_size = static_cast<int>(image_size);
  o.batch_size = batch;
  o.deterministic = deterministic == "true";
  if (seed >= 0) o.seed = static_cast<uint64_t>(seed);
  o.autotune.cpu_budget = static_cast<int>(threads);
  auto ds = datasets::FlowersDataset(data, o);
  if (!ds.ok()) return Fail("bench-input", ds.status().ToString());
  auto it = ds->make_iterator();
  if (!it.ok()) return Fail("bench-input", it.status().ToString());

  // The first batch includes opening files and filling the shuffle buffer: measure after it.
  data::Element e;
  bool end = false;
  Status s = (*it)->GetNext(&e, &end);
  if (!s.ok()) return Fail("bench-input", s.ToString());
  if (end) return Fail("bench-input", "the dataset produced no batch (fewer images than --batch?)");
  // The first batch's shape and labels: what --image-size, --batch and --seed select, in the JSON.
  const Shape first_shape = e[0].shape();
  std::vector<int64_t> first_labels;
  if (e.size() > 1) {
    const Tensor labels = e[1].Contiguous();
    first_labels.assign(labels.data<int64_t>(), labels.data<int64_t>() + labels.num_elements());
  }
  int64_t record_bytes0 = 0;
  for (const auto& st : (*it)->Stats())
    if (st.name == "tfrecord") record_bytes0 = st.bytes;
  Stopwatch sw;
  int64_t batches = 0;
  while (sw.ElapsedSeconds() < seconds) {
    s = (*it)->GetNext(&e, &end);
    if (!s.ok()) return Fail("bench-input", s.ToString());
    if (end) break;
    ++batches;
  }
  const double elapsed = sw.ElapsedSeconds();
  auto stats = (*it)->Stats();
  int64_t record_bytes = 0;
  for (const auto& st : stats)
    if (st.name == "tfrecord") record_bytes = st.bytes;
  const double images_per_second = static_cast<double>(batches * batch) / elapsed;
  const double mb_per_second = static_cast<double>(record_bytes - record_bytes0) / 1e6 / elapsed;
  const int budget = threads > 0 ? static_cast<int>(threads) : UsableCores();

  if (json) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& st : stats)
      stages.push_back({{"path", st.path},
                        {"stage", st.name},
                        {"elements", st.elements},
                        {"bytes", st.bytes},
                        {"busy_seconds", st.busy_ns * 1e-9},
                        {"blocked_upstream_seconds", st.blocked_upstream_ns * 1e-9},
                        {"blocked_downstream_seconds", st.blocked_downstream_ns * 1e-9},
                        {"buffer_fill", st.buffer_fill},
                        {"buffer_capacity", st.buffer_capacity},
                        {"parallelism", st.parallelism},
                        {"autotuned", st.autotuned},
                        {"errors_ignored", st.errors_ignored}});
    nlohmann::json j = {{"images_per_second", images_per_second},
                        {"mb_per_second", mb_per_second},
                        {"batches", batches},
                        {"batch", batch},
                        {"image_size", image_size},
                        {"seconds", elapsed},
                        {"deterministic", o.deterministic},
                        {"cpu_budget", budget},
                        {"first_batch_shape", first_shape.dims()},
                        {"first_batch_labels", first_labels},
                        {"stages", stages}};
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("flowers pipeline: %s, %lldx%lld px, batch %lld, deterministic %s, cpu budget %d\n", data.c_str(),
              static_cast<long long>(image_size), static_cast<long long>(image_size), static_cast<long long>(batch),
              deterministic.c_str(), budget);
  std::printf("images/s  %.1f\nMB/s read %.2f\nbatches   %lld in %.2f s\n\n", images_per_second, mb_per_second,
              static_cast<long long>(batches), elapsed);
  std::printf("%s", (*it)->StatsTable().c_str());
  return kExitOk;
}

const Registrar kBenchInput({"bench-input", "run the flowers input pipeline alone: images/s, MB/s, per-stage table",
                             RunBenchInput});

}  // namespace
}  // namespace strata::cli
