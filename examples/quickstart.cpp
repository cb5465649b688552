// The seed's snippet in Strata: find the cores, make a strategy, build and compile the
// model in its scope, fit on TFRecord files. Run with the Fashion-MNIST TFRecords that
// `strata train` made (or any in TFDS's layout):
//   example_quickstart '~/.cache/strata/datasets/fashion_mnist/3.0.1/fashion_mnist-train.tfrecord-*' [EPOCHS] [STEPS]
#include <cstdio>
#include <cstdlib>

#include "strata/datasets/batch_size.h"
#include "strata/datasets/fashion_mnist.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/model.h"

using namespace strata;         // NOLINT: an example reads best unqualified
using namespace strata::keras;  // NOLINT

template <typename T> T Check(Result<T> r) {
  if (!r.ok()) std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), std::exit(1);
  return std::move(r).value();
}

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s TRAIN_GLOB [EPOCHS] [STEPS_PER_EPOCH]\n", argv[0]), 2;
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 2;
  const int64_t steps = argc > 3 ? std::atoll(argv[3]) : 200;
  // --- user code starts here
  auto strategy = Check(distribute::MirroredStrategy());  // one replica per core
  const int replicas = strategy->num_replicas_in_sync();
  std::printf("REPLICAS: %d\n", replicas);
  auto train = Check(datasets::FashionMnistDataset(argv[1], {.batch_size = 128, .replicas = replicas, .repeat = true}));
  const int64_t batch = datasets::GlobalBatch(128, replicas);  // 128 per replica
  std::unique_ptr<Model> model;
  {
    auto scope = strategy->scope();
    model = Check(Sequential({layers::InputLayer({28, 28, 1}),
                              layers::Conv2D(32, 3, {.padding = "same", .activation = "relu"}),
                              layers::MaxPooling2D(),
                              layers::Conv2D(64, 3, {.padding = "same", .activation = "relu"}),
                              layers::MaxPooling2D(), layers::Flatten(),
                              layers::Dense(128, {.activation = "relu"}), layers::Dense(10)}));
    Status s = model->compile({.optimizer = optimizers::SGD(0.05 * batch / 128.0, {.momentum = 0.9, .nesterov = true}),
                               .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                               .metrics = {"accuracy"}});
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  }
  model->summary();
  History history = Check(model->fit(train, {.epochs = epochs, .steps_per_epoch = steps}));
  // --- user code ends here
  std::printf("final accuracy: %.4f\n", history.history["accuracy"].back());
  return 0;
}
