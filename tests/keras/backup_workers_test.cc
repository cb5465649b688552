// MultiWorker BackupAndRestore's file in one process: a backup that holds several workers'
// input positions is refused by a run with another worker count, with both counts named.
// (Writing and restoring with two workers over MPI: tests/slow/mpi_train_test.cc.)
#include <gtest/gtest.h>

#include <filesystem>

#include "blobs.h"
#include "strata/keras/checkpoint.h"
#include "strata/keras/model.h"
#include "common/temp_path.h"

namespace strata::keras {
namespace {

using namespace layers;  // NOLINT
using testing::Blobs;

TEST(BackupWorkers, ABackupOfTwoWorkersIsRefusedByOne) {
  const std::string dir = strata::test::TempPath("strata-backup-workers");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/backup.ckpt";
  auto m = Sequential({InputLayer({8}), Dense(4, {.activation = "relu"}), Dense(3)}, "mlp");
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->compile({.optimizer = optimizers::SGD(0.05, {.momentum = 0.9}),
                             .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})})
                  .ok());
  auto train = data::Dataset::from_tensor_slices(Blobs(64, 3)).batch(32, {.drop_remainder = true});
  ASSERT_TRUE((*m)->fit(train, {.epochs = 1, .verbose = 0}).ok());
  ASSERT_TRUE((*m)->SaveBackup(path, 1, 0).ok());
  EXPECT_TRUE((*m)->RestoreBackup(path).ok());  // one worker's own backup

  // The same file as two workers write it: each worker's position, packed.
  backend::VariableStore& store = *(*m)->variables();
  Tensor slots(DType::kF32, {store.num_trainable()});
  CheckpointState st;
  ASSERT_TRUE(ReadCheckpoint(path, &store, &slots, &st).ok());
  st.iterator_state = "strata-workers 2\n1\na1\nb";
  ASSERT_TRUE(WriteCheckpoint(path, store, (*m)->compile_options().optimizer, slots, st).ok());
  Status s = (*m)->RestoreBackup(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("written by 2 workers, restored by 1"), std::string::npos) << s.ToString();

  // A truncated entry is corruption, named as such.
  st.iterator_state = "strata-workers 1\n9\nab";
  ASSERT_TRUE(WriteCheckpoint(path, store, (*m)->compile_options().optimizer, slots, st).ok());
  s = (*m)->RestoreBackup(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("worker 0's is truncated"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace strata::keras
