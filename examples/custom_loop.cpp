// A custom training loop: the C++ form of Keras's
//
//   @tf.function
//   def train_step(x, y):
//       with tf.GradientTape() as tape:
//           loss = loss_fn(y, model(x, training=True))
//       optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), ...))
//       accuracy.update_state(y, logits)
//
// It trains the reference CNN on Fashion-MNIST twice from the same seed, once with fit() and
// once with the loop, and reports whether the final weights and loss are equal to the bit.
//   example_custom_loop '~/.cache/strata/datasets/fashion_mnist/3.0.1/fashion_mnist-train.tfrecord-*' [STEPS]
#include <cstdio>
#include <cstdlib>

#include "strata/datasets/batch_size.h"
#include "strata/datasets/fashion_mnist.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/spec.h"

using namespace strata;         // NOLINT: an example reads best unqualified
using namespace strata::keras;  // NOLINT

template <typename T> T Check(Result<T> r) {
  if (!r.ok()) std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), std::exit(1);
  return std::move(r).value();
}
void Check(const Status& s) {
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str()), std::exit(1);
}

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s TRAIN_GLOB [STEPS]\n", argv[0]), 2;
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 40;
  auto strategy = Check(distribute::MirroredStrategy());  // one replica per core
  const int replicas = strategy->num_replicas_in_sync();
  auto train =
      Check(datasets::FashionMnistDataset(argv[1], {.batch_size = 32, .replicas = replicas, .seed = 7, .repeat = true}));
  const int64_t batch = datasets::GlobalBatch(32, replicas);
  // The reference recipe: SGD with Nesterov momentum and weight decay, warm-up then cosine decay.
  auto make_model = [&] {
    auto scope = strategy->scope();
    auto model = Check(LoadModelSpec("reference-cnn"));
    const double lr = 0.05 * static_cast<double>(batch) / 128;
    Check(model->compile({.optimizer = optimizers::SGD(schedules::CosineDecay(0, steps, {.warmup_target = lr, .warmup_steps = steps / 4}),
                                                       {.momentum = 0.9, .nesterov = true, .weight_decay = 5e-4}),
                          .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                          .metrics = {"accuracy"},
                          .seed = 42}));
    return model;
  };

  // 1. The reference: fit.
  auto reference = make_model();
  History history = Check(reference->fit(train, {.epochs = 1, .steps_per_epoch = steps, .verbose = 0}));

  // 2. The same training as a custom loop.
  auto model = make_model();
  auto accuracy = Check(MakeMetric("accuracy", model->compile_options().loss));
  Mean loss;
  auto batches = Check(train.make_iterator());
  for (int64_t step = 0; step < steps; ++step) {
    data::Element xy;
    bool end = false;
    Check(batches->GetNext(&xy, &end));
    auto tape = Check(model->compute_gradients(xy));  // forward + backward, gradients averaged
    Check(model->apply_gradients());                                // the optimizer's (sharded) update
    loss.Update(tape.loss);
    for (const MetricBatch& b : tape.replicas) accuracy->Update(b);
  }

  // 3. Same weights (and optimizer state), same loss, same accuracy?
  const bool same_weights = Check(model->get_state()) == Check(reference->get_state());
  const bool same_loss = loss.Result() == history.history["loss"].back() &&
                         accuracy->Result() == history.history["accuracy"].back();
  std::printf("fit:         loss %.6f - accuracy %.4f\n", history.history["loss"].back(), history.history["accuracy"].back());
  std::printf("custom loop: loss %.6f - accuracy %.4f\n", loss.Result(), accuracy->Result());
  std::printf("%s after %lld steps on %d replicas: weights %s, loss %s\n",
              same_weights && same_loss ? "EQUAL" : "DIFFERENT", static_cast<long long>(steps),
              strategy->num_replicas_in_sync(), same_weights ? "identical" : "differ", same_loss ? "identical" : "differs");
  return same_weights && same_loss ? 0 : 1;
}
