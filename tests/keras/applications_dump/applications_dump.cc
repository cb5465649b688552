// Prints an application's summary and its variables, for the structure oracle
// (tests/keras/applications_structure_test.py compares them with Keras's own definitions).
//
//   applications_dump MODEL [--size S] [--no-top] [--pooling avg|max] [--classes N] [--alpha A] [--depth-multiplier M]
//
// Output: the summary at line length 1000 (no field wraps, so columns parse at fixed
// positions), a line "== weights", then one line per variable in the variable store's order
// (trainable first, then state, each in creation order): name, shape "a,b,c", trainable 0/1;
// then "== layers" and the layers' names in Keras's order (Model::layers(), what Keras weight
// files are matched against by position).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "strata/keras/applications/applications.h"

int main(int argc, char** argv) {
  using namespace strata;
  if (argc < 2) {
    std::fprintf(stderr, "usage: applications_dump MODEL [--size S] [--no-top] [--pooling avg|max] [--classes N] [--alpha A] [--depth-multiplier M]\n");
    return 2;
  }
  keras::applications::Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--no-top") {
      o.include_top = false;
    } else if (a == "--size" && has_value) {
      const int64_t s = std::atoll(argv[++i]);
      o.input_shape = Shape{s, s, 3};
    } else if (a == "--pooling" && has_value) {
      o.pooling = argv[++i];
    } else if (a == "--classes" && has_value) {
      o.classes = std::atoi(argv[++i]);
    } else if (a == "--alpha" && has_value) {
      o.alpha = std::atof(argv[++i]);
    } else if (a == "--depth-multiplier" && has_value) {
      o.depth_multiplier = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "applications_dump: unknown or incomplete argument %s\n", a.c_str());
      return 2;
    }
  }
  auto model = keras::applications::ByName(argv[1], o);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  std::fputs((*model)->Summary(1000).c_str(), stdout);
  // The variables exist once compiled (the store is laid out from the training graph); mean
  // squared error takes any output shape (the features without the top are 4-D).
  Status s = (*model)->compile({.loss = keras::losses::MeanSquaredError()});
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("== weights\n");
  for (const auto& e : (*model)->variables()->entries()) {
    std::string dims;
    for (int64_t d : e.shape.dims()) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    std::printf("%s\t%s\t%d\n", e.name.c_str(), dims.c_str(), e.trainable ? 1 : 0);
  }
  std::printf("== layers\n");
  for (const auto& layer : (*model)->layers()) std::printf("%s\n", layer->name().c_str());
  return 0;
}
