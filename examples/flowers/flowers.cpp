// Kaggle's "Flower Classification with TPUs" recipe through the library API: the same
// pipeline, model, schedule and metrics as `strata train --preset flowers` (docs/flowers.md).
//   example_flowers 'DIR/train/*.tfrec' 'DIR/val/*.tfrec' [IMAGE_SIZE=192] [EPOCHS=12] [STEPS_PER_EPOCH]
#include <cstdio>
#include <cstdlib>

#include "strata/core/cpu.h"
#include "strata/datasets/flowers.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/model.h"

using namespace strata;         // NOLINT: an example reads best unqualified
using namespace strata::keras;  // NOLINT

template <typename T> T Check(Result<T> r) {
  if (!r.ok()) std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), std::exit(1);
  return std::move(r).value();
}

int main(int argc, char** argv) {
  if (argc < 3) return std::fprintf(stderr, "usage: %s TRAIN_GLOB VAL_GLOB [SIZE] [EPOCHS] [STEPS]\n", argv[0]), 2;
  const int size = argc > 3 ? std::atoi(argv[3]) : 192, epochs = argc > 4 ? std::atoi(argv[4]) : 12;
  const int64_t steps = argc > 5 ? std::atoll(argv[5]) : 12753 / 32;  // the competition's train split
  // --- user code starts here
  auto strategy = Check(distribute::MirroredStrategy());  // one replica per core
  const int replicas = strategy->num_replicas_in_sync();
  auto train = Check(datasets::FlowersDataset(argv[1], {.image_size = size, .batch_size = 16, .replicas = replicas}));
  auto val = Check(datasets::FlowersDataset(argv[2], {.image_size = size, .batch_size = 16, .replicas = replicas,
                                                      .deterministic = true, .augment = false, .repeat = false,
                                                      .shuffle_buffer = 0, .drop_remainder = false}));
  std::unique_ptr<Model> model;
  {
    auto scope = strategy->scope();
    // flowers-cnn (models/flowers-cnn.json): four strided convolutions with batch norm.
    std::vector<LayerPtr> net = {layers::InputLayer({size, size, 3})};
    for (int filters : {32, 64, 128, 256}) {
      net.push_back(filters < 128 ? layers::Conv2D(filters, 3, {.strides = 2, .padding = "same", .use_bias = false})
                                  : layers::SeparableConv2D(filters, 3, {.strides = 2, .padding = "same", .use_bias = false}));
      net.push_back(layers::BatchNormalization());
      net.push_back(layers::ReLU());
    }
    for (auto l : {layers::GlobalAveragePooling2D(), layers::Dropout(0.2), layers::Dense(104, {.activation = "softmax"})})
      net.push_back(l);
    model = Check(Sequential(net, "flowers_cnn"));
    // Ramp-up / sustain / exponential decay, max scaled by the replicas (10x the notebooks'
    // fine-tuning values: this model starts from scratch).
    auto lr = schedules::RampUpSustainDecay({.start = 1e-4, .max = 5e-4, .min = 1e-5, .rampup_epochs = 3,
                                             .sustain_epochs = 2, .decay = 0.8, .replicas = replicas}, steps);
    Status s = model->compile({.optimizer = optimizers::Adam(lr), .loss = losses::SparseCategoricalCrossentropy(),
                               .metrics = {"accuracy", "f1_macro"},
                               .precision = HostIsa().avx512_bf16 ? "mixed_bfloat16" : "float32"});
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  }
  model->summary();
  History history = Check(model->fit(train, {.epochs = epochs, .steps_per_epoch = steps, .validation_data = &val}));
  // --- user code ends here
  std::printf("val accuracy: %.4f\nval macro F1: %.4f\n", history.history["val_accuracy"].back(),
              history.history["val_f1_macro"].back());
  return 0;
}
