// A program outside Strata's tree, built against an installed Strata (find_package(Strata)
// or pkg-config): reads a real TFRecord file of tf.train.Examples (TFX's MNIST sample,
// testdata/real/tfx_mnist.tfrecord: 1000 records of `image_floats` f32[784] in [-0.5, 0.5]
// and `image_class` i64), runs it through a tf.data-style pipeline and trains a small
// Sequential model for a few steps on every core.
//   strata_consumer FILE.tfrecord [EXPECTED_RECORDS]
// Exit 0 only when the file holds the expected records and the loss went down.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "strata/core/version.h"
#include "strata/data/sources.h"
#include "strata/datasets/batch_size.h"
#include "strata/distribute/strategy.h"
#include "strata/keras/model.h"
#include "strata/record/example.h"
#include "strata/record/record_reader.h"

using namespace strata;         // NOLINT: an example reads best unqualified
using namespace strata::keras;  // NOLINT

template <typename T> T Check(Result<T> r) {
  if (!r.ok()) std::fprintf(stderr, "strata_consumer: %s\n", r.status().ToString().c_str()), std::exit(1);
  return std::move(r).value();
}
void Check(const Status& s) {
  if (!s.ok()) std::fprintf(stderr, "strata_consumer: %s\n", s.ToString().c_str()), std::exit(1);
}

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s FILE.tfrecord [EXPECTED_RECORDS]\n", argv[0]), 2;
  const std::string path = argv[1];
  const long expected = argc > 2 ? std::atol(argv[2]) : -1;
  std::printf("strata %s\n", STRATA_VERSION);

  // 1. The record reader: every record is a tf.train.Example with the two features.
  auto reader = Check(record::RecordReader::Open(path));
  long records = 0;
  std::string_view rec;
  Status st;
  while ((st = reader->ReadRecord(&rec)).ok()) {
    record::Example ex = Check(record::DecodeExample(rec));
    if (ex.features["image_floats"].floats.size() != 784 || ex.features["image_class"].int64s.size() != 1)
      return std::fprintf(stderr, "%s record %ld: not a 784-float image with one class\n", path.c_str(), records), 1;
    ++records;
  }
  if (!st.IsOutOfRange()) Check(st);
  std::printf("records: %ld\n", records);
  if (expected >= 0 && records != expected)
    return std::fprintf(stderr, "%s: %ld records, expected %ld\n", path.c_str(), records, expected), 1;

  // 2. The pipeline: parse, shuffle, repeat, batch, prefetch.
  auto strategy = Check(distribute::MirroredStrategy());  // one replica per usable core
  const int replicas = strategy->num_replicas_in_sync();
  const int64_t per_replica = 32;
  auto parse = Check(data::ParseExampleFn({{.key = "image_floats", .type = record::FeatureKind::kFloat, .shape = {28, 28, 1}},
                                           {.key = "image_class", .type = record::FeatureKind::kInt64}}));
  data::Dataset train = data::TFRecordDataset(std::vector<std::string>{path})
                            .map([parse](data::Element e) -> Result<data::Element> {
                              STRATA_ASSIGN_OR_RETURN(data::Element d, parse(std::move(e)));
                              STRATA_ASSIGN_OR_RETURN(Tensor image, d.Get("image_floats"));
                              STRATA_ASSIGN_OR_RETURN(Tensor label, d.Get("image_class"));
                              return data::Element({image, label});  // (x, y) for fit
                            })
                            .shuffle(256, {.seed = 1})
                            .repeat()  // before batch: with many cores one global batch outgrows the file
                            .batch(datasets::GlobalBatch(per_replica, replicas), {.drop_remainder = true})
                            .prefetch(data::AUTOTUNE);

  // 3. The trainer: a small Sequential model, compiled in the strategy's scope, a few steps.
  std::unique_ptr<Model> model;
  {
    auto scope = strategy->scope();
    model = Check(Sequential({layers::InputLayer({28, 28, 1}), layers::Flatten(),
                              layers::Dense(64, {.activation = "relu"}), layers::Dense(10)}));
    Check(model->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9}),
                          .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                          .metrics = {"accuracy"}}));
  }
  History history = Check(model->fit(train, {.epochs = 4, .steps_per_epoch = 8, .verbose = 2}));
  const std::vector<double>& loss = history.history["loss"];
  if (loss.size() != 4 || !std::isfinite(loss.back()))
    return std::fprintf(stderr, "strata_consumer: fit returned %zu epochs of loss\n", loss.size()), 1;
  std::printf("replicas: %d\nloss: %.4f -> %.4f\naccuracy: %.4f\n", replicas, loss.front(), loss.back(),
              history.history["accuracy"].back());
  if (!(loss.back() < loss.front()))
    return std::fprintf(stderr, "strata_consumer: the loss did not go down\n"), 1;
  return 0;
}
