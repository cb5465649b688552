// The Strata side of tests/keras/h5_weights_test.py: builds a JSON-spec model, loads a Keras
// weight file into it, runs a forward pass on raw f32 inputs and saves its weights back.
//
//   h5_weights_tool --spec S.json [--load W.h5 [--by-name] [--skip-mismatch]]
//                   [--input X.f32 --output Y.f32] [--save OUT.h5]
//
// Prints the load report ("layout legacy|keras3", "loaded a b", "skipped ...", "absent ...");
// an error prints its message on stderr and exits 1.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/keras/h5_weights.h"
#include "strata/keras/spec.h"

using namespace strata;

namespace {
int Fail(const std::string& m) {
  std::cerr << m << "\n";
  return 1;
}
std::string Join(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& s : v) r += (r.empty() ? "" : " ") + s;
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  std::string spec, load, input, output, save;
  keras::KerasWeightsOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--spec") spec = next();
    else if (a == "--load") load = next();
    else if (a == "--input") input = next();
    else if (a == "--output") output = next();
    else if (a == "--save") save = next();
    else if (a == "--by-name") options.by_name = true;
    else if (a == "--skip-mismatch") options.skip_mismatch = true;
    else return Fail("unknown flag " + a);
  }
  auto model = keras::LoadModelSpec(spec);
  if (!model.ok()) return Fail(model.status().ToString());
  keras::CompileOptions co;
  co.loss = keras::losses::SparseCategoricalCrossentropy({.from_logits = !(*model)->ends_in_softmax()});
  if (Status st = (*model)->compile(co); !st.ok()) return Fail(st.ToString());
  if (!load.empty()) {
    auto report = keras::LoadKerasWeights(**model, load, options);
    if (!report.ok()) return Fail(report.status().ToString());
    std::cout << "layout " << (report->layout == keras::KerasWeightsLayout::kKeras3 ? "keras3" : "legacy") << "\n"
              << "loaded " << Join(report->loaded) << "\n"
              << "absent " << Join(report->absent) << "\n";
    for (const auto& s : report->skipped) std::cout << "skipped " << s << "\n";
  }
  if (!input.empty()) {
    auto shape = (*model)->input_shape(0);
    if (!shape.ok()) return Fail(shape.status().ToString());
    std::ifstream in(input, std::ios::binary | std::ios::ate);
    const int64_t bytes = in.tellg();
    const int64_t per = shape->num_elements();
    const int64_t n = bytes / static_cast<int64_t>(sizeof(float)) / per;
    std::vector<int64_t> dims = {n};
    dims.insert(dims.end(), shape->dims().begin(), shape->dims().end());
    Tensor x(DType::kF32, Shape(dims));
    in.seekg(0);
    in.read(static_cast<char*>(x.raw_data()), static_cast<std::streamsize>(x.nbytes()));
    auto ds = data::Dataset::from_tensor_slices(data::Element({x})).batch(n);
    auto y = (*model)->predict(ds);
    if (!y.ok()) return Fail(y.status().ToString());
    std::ofstream out(output, std::ios::binary);
    out.write(static_cast<const char*>(y->raw_data()), static_cast<std::streamsize>(y->nbytes()));
  }
  if (!save.empty())
    if (Status st = keras::SaveKerasWeights(**model, save); !st.ok()) return Fail(st.ToString());
  return 0;
}
