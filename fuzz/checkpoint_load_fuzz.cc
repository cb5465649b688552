// Fuzzes checkpoint loading (keras/checkpoint.h ReadCheckpoint through Model::load_weights)
// into a small compiled model (Dense 3->2 with SGD momentum, so there are optimizer slots).
// Input, first byte:
//   'R'  the rest is the file's bytes as they are (framing, CRCs, truncation);
//   else the rest is up to four records separated by "\n----\n" (header JSON, parameters,
//        slots, iterator state), framed with valid CRCs here so that the fuzzer reaches the
//        header and the variable table instead of stopping at a checksum.
// Invariants: no crash, exception or sanitizer report; a failed load leaves the model's
// weights exactly as they were (ReadCheckpoint checks everything before it copies). The same
// holds for the weights-only load (inference), which must also leave the slots alone.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "strata/keras/model.h"
#include "strata/keras/spec.h"
#include "strata/record/tfrecord_format.h"

using namespace strata;

namespace {

keras::Model& TheModel() {
  static keras::Model* model = [] {
    auto m = keras::ModelFromJson(R"({"class_name": "Sequential", "config": {"name": "fuzz", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3]}},
        {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})");
    if (!m.ok()) std::abort();
    if (!(*m)->compile({.optimizer = keras::optimizers::SGD(0.1, {.momentum = 0.9}), .loss = keras::losses::MeanSquaredError()}).ok()) std::abort();
    return m->release();
  }();
  return *model;
}

std::string Frame(std::string_view data) {
  char header[record::kHeaderSize], footer[record::kFooterSize];
  record::EncodeHeader(data.size(), header);
  record::EncodeFooter(data, footer);
  return std::string(header, sizeof header) + std::string(data) + std::string(footer, sizeof footer);
}

std::string Weights(keras::Model& m) {
  const Tensor& p = m.variables()->params();
  return std::string(static_cast<const char*>(p.raw_data()), p.nbytes());
}

std::string Slots(keras::Model& m) {
  auto state = m.get_state();  // parameters, then the optimizer slots
  if (!state.ok()) std::abort();
  const size_t np = static_cast<size_t>(m.variables()->params().num_elements());
  return std::string(reinterpret_cast<const char*>(state->data() + np), (state->size() - np) * sizeof(float));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string file;
  if (data[0] == 'R') {
    file = std::string(in);
  } else {
    size_t p = 0;
    for (int r = 0; r < 4 && p <= in.size(); ++r) {
      size_t e = in.find("\n----\n", p);
      if (e == std::string_view::npos) e = in.size();
      file += Frame(in.substr(p, e - p));
      p = e + 6;
    }
  }
  static const std::string path = "/tmp/strata_checkpoint_fuzz_" + std::to_string(::getpid()) + ".ckpt";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }
  keras::Model& m = TheModel();
  const std::string before = Weights(m);
  const Status s = m.load_weights(path);
  if (!s.ok() && Weights(m) != before) std::abort();  // a bad file must leave the model alone
  if (!s.ok() && s.message().find(path) == std::string::npos) std::abort();  // errors name the file
  const std::string weights = Weights(m), slots = Slots(m);
  const Status w = m.load_weights(path, {.weights_only = true});
  if (Slots(m) != slots) std::abort();  // the weights alone: never the optimizer's slots
  if (!w.ok() && Weights(m) != weights) std::abort();
  if (!w.ok() && w.message().find(path) == std::string::npos) std::abort();
  if (s.ok() && !w.ok()) std::abort();  // what loads whole loads its weights alone
  return 0;
}
