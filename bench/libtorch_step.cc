// The reference CNN training step in LibTorch: the C++ peer of `strata bench-step`.
//
// The same model, loss, optimizer and synthetic inputs as bench/torch_reference_cnn.py (the
// Python peer): 3x3 convolutions with bias, batch norm (eps 1e-3, momentum 0.01), ReLU, 2x2 max
// pooling, Dense(128)-ReLU, Dropout(0.3), Dense(10); cross-entropy; SGD Nesterov momentum 0.9.
// Prints one JSON object with the Python peer's fields, so bench/step_vs_torch.sh reads both.
//
//   build/bench/libtorch_step [--batch 128] [--seconds 10] [--threads 1] [--channels-last]
//
// Built only where Debian's libtorch-dev is installed (bench/CMakeLists.txt).
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

torch::nn::Sequential Model() {
  auto block = [](torch::nn::Sequential& s, int64_t cin, int64_t cout) {
    s->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(cin, cout, 3).padding(1)));
    s->push_back(torch::nn::BatchNorm2d(torch::nn::BatchNormOptions(cout).eps(1e-3).momentum(0.01)));
    s->push_back(torch::nn::ReLU());
  };
  torch::nn::Sequential m;
  block(m, 1, 32);
  block(m, 32, 32);
  m->push_back(torch::nn::MaxPool2d(2));
  block(m, 32, 64);
  block(m, 64, 64);
  m->push_back(torch::nn::MaxPool2d(2));
  m->push_back(torch::nn::Flatten());
  m->push_back(torch::nn::Linear(64 * 7 * 7, 128));
  m->push_back(torch::nn::ReLU());
  m->push_back(torch::nn::Dropout(0.3));
  m->push_back(torch::nn::Linear(128, 10));
  return m;
}

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 128, threads = 1, warmup = 3;
  double seconds = 10;
  bool channels_last = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "libtorch_step: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--batch") batch = std::atoll(next());
    else if (a == "--seconds") seconds = std::atof(next());
    else if (a == "--threads") threads = std::atoll(next());
    else if (a == "--warmup") warmup = std::atoll(next());
    else if (a == "--channels-last") channels_last = true;
    else {
      std::fprintf(stderr, "libtorch_step: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  torch::set_num_threads(static_cast<int>(threads));
  torch::manual_seed(0);
  auto net = Model();
  const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  if (channels_last) {
    for (auto& p : net->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(format));
  }
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9).nesterov(true));
  const torch::Tensor x = torch::rand({batch, 1, 28, 28}).contiguous(format);
  const torch::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
  net->train();
  auto step = [&] {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
  };
  for (int64_t i = 0; i < warmup; ++i) step();
  std::vector<double> times;
  using clock = std::chrono::steady_clock;
  const double cpu0 = CpuSeconds();
  const auto start = clock::now();
  for (;;) {
    const auto t0 = clock::now();
    step();
    times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    if (std::chrono::duration<double>(clock::now() - start).count() >= seconds) break;
  }
  const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
  const double cpu = CpuSeconds() - cpu0;
  std::sort(times.begin(), times.end());
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double images = static_cast<double>(times.size() * batch);
  std::printf(
      "{\"framework\": \"libtorch %s\", \"precision\": \"f32\", \"channels_last\": %s, \"batch\": %lld, "
      "\"steps\": %zu, \"seconds\": %.3f, \"images_per_second\": %.2f, \"step_ms\": %.3f, \"cpu_seconds\": %.3f, "
      "\"images_per_cpu_second\": %.2f, \"peak_rss_bytes\": %lld}\n",
      TORCH_VERSION, channels_last ? "true" : "false", static_cast<long long>(batch), times.size(), elapsed,
      images / elapsed, times[times.size() / 2] * 1e3, cpu, images / cpu, static_cast<long long>(ru.ru_maxrss) * 1024);
  return 0;
}
