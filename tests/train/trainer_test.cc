// The trainer (train/trainer.h) in C++: a two-phase fine-tune runs its named phases in order,
// keeps the backbone's weights through the head's phase and trains them in the next, and tells
// its reporter each step; the library says nothing of commands to run next. flowers-cnn at
// 32 px on 128 generated images, a few steps a phase: each run takes a fraction of a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/temp_path.h"
#include "strata/datasets/make_records.h"
#include "strata/keras/checkpoint.h"
#include "strata/train/model_source.h"
#include "strata/train/trainer.h"

namespace strata::train {
namespace {

namespace fs = std::filesystem;

// Everything the trainer tells it, as "begin PHASE", "end PHASE", "line TEXT" and "finished".
// At the end of the head's phase it copies the first convolution's kernel, which the phase kept
// frozen.
class Recorder final : public Reporter {
 public:
  void PhaseBegin(Phase phase) override { events.push_back(std::string("begin ") + PhaseName(phase)); }
  void PhaseEnd(Phase phase, double seconds) override {
    events.push_back(std::string("end ") + PhaseName(phase));
    EXPECT_GE(seconds, 0);
    if (phase == Phase::kFitHead && on_head_end) on_head_end();
  }
  void Line(const std::string& line) override {
    events.push_back("line " + line);
    lines.push_back(line);
  }
  void Finished(const Recipe& r, const TrainReport& report) override {
    events.push_back("finished");
    finished_path = report.model_path;
    finished_epochs = r.epochs;
  }

  std::vector<std::string> Phases() const {
    std::vector<std::string> out;
    for (const std::string& e : events)
      if (e.rfind("line ", 0) != 0) out.push_back(e);
    return out;
  }
  const std::string* LineStarting(const std::string& prefix) const {
    for (const std::string& l : lines)
      if (l.rfind(prefix, 0) == 0) return &l;
    return nullptr;
  }

  std::vector<std::string> events, lines;
  std::function<void()> on_head_end;
  std::string finished_path;
  int64_t finished_epochs = 0;
};

// A parameter's values by its variable's name.
std::vector<float> Values(keras::Model& model, const std::string& name) {
  const backend::VariableStore::Entry* e = model.variables()->Find(name);
  if (!e) return {};
  const float* p = model.variables()->params().data<float>() + e->offset;
  return std::vector<float>(p, p + e->size);
}

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::TempPath("strata_trainer"));
    fs::remove_all(*dir_);
    datasets::GeneratedFlowersOptions o;
    o.classes = 4;
    o.train_per_class = 32;
    o.val_per_class = 8;
    o.test_per_class = 1;
    o.image_size = 32;
    o.shards = 2;
    auto made = datasets::MakeGeneratedFlowerRecords(*dir_ + "/flowers", o);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  // The flowers preset's recipe, made small: flowers-cnn at 32 px, 4 classes, 3 steps of 8
  // images an epoch on one replica, in a fixed order.
  static Recipe Small() {
    Recipe r = *Preset("flowers");
    r.model = "flowers-cnn";
    r.data = Path("flowers/train/*.tfrec");
    r.val = Path("flowers/val/*.tfrec");
    r.image_size = 32;
    r.classes = 4;
    r.epochs = 1;
    r.steps_per_epoch = 3;
    r.validation_steps = 2;
    r.batch_per_replica = 8;
    r.replicas = 1;
    r.warmup_epochs = 0;
    r.precision = "f32";
    r.seed = 7;
    r.deterministic = true;
    r.monitor = false;
    r.verbose = 2;
    return r;
  }

  static std::string* dir_;
};
std::string* TrainerTest::dir_ = nullptr;

TEST_F(TrainerTest, ATwoPhaseFineTuneRunsItsPhasesInOrder) {
  Recipe r = Small();
  r.epochs = 2;
  r.freeze_until = "re_lu_1";  // the two plain convolutions and their batch norms
  r.freeze_backbone_epochs = 1;
  r.checkpoint_dir = Path("fine_tune_backups");
  r.out = Path("fine_tuned.ckpt");
  auto recorder = std::make_shared<Recorder>();
  auto trainer = Trainer::Create(r, recorder);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  EXPECT_EQ(recorder->Phases(), (std::vector<std::string>{"begin prepare", "end prepare"}));

  keras::Model& model = (*trainer)->model();
  std::string backbone, head;  // the first convolution's kernel and the classifier's
  for (const auto& e : model.variables()->entries()) {
    if (e.role != graph::VariableRole::kParameter) continue;
    if (backbone.empty() && e.name.rfind("conv2d/", 0) == 0) backbone = e.name;
    if (head.empty() && e.name.rfind("dense/", 0) == 0) head = e.name;
  }
  ASSERT_FALSE(backbone.empty());
  ASSERT_FALSE(head.empty());
  const std::vector<float> backbone_before = Values(model, backbone), head_before = Values(model, head);
  std::vector<float> backbone_after_head, head_after_head;
  recorder->on_head_end = [&] {
    backbone_after_head = Values(model, backbone);
    head_after_head = Values(model, head);
  };

  auto report = (*trainer)->Run();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(recorder->Phases(),
            (std::vector<std::string>{"begin prepare", "end prepare", "begin fit head", "end fit head", "begin fit all",
                                      "end fit all", "begin evaluate", "end evaluate", "begin save", "end save",
                                      "begin report", "end report", "finished"}));

  // The head's phase trained the head alone; the fine-tuning trained the backbone too.
  ASSERT_FALSE(backbone_after_head.empty());
  EXPECT_TRUE(backbone_after_head == backbone_before) << "the frozen backbone changed in the head's phase";
  EXPECT_TRUE(head_after_head != head_before) << "the head did not train in its phase";
  EXPECT_TRUE(Values(model, backbone) != backbone_before) << "the backbone did not train in the fine-tuning";

  // Both phases' epochs in one history, and the report of the run.
  EXPECT_EQ(report->history.epoch, (std::vector<int>{0, 1}));
  EXPECT_EQ(report->history.history["loss"].size(), 2u);
  EXPECT_EQ(report->history.history["val_f1_macro"].size(), 2u);
  EXPECT_EQ(report->steps_per_epoch, 3);
  EXPECT_EQ(report->global_batch, 8);
  EXPECT_GE(report->val_accuracy, 0);
  EXPECT_LE(report->val_accuracy, 1);
  EXPECT_EQ(report->model_path, r.out);
  EXPECT_EQ(recorder->finished_path, r.out);
  EXPECT_EQ(recorder->finished_epochs, 2);
  EXPECT_TRUE(keras::IsCheckpointFile(r.out));
  EXPECT_TRUE(fs::exists(r.checkpoint_dir + "/head_trained.h5"));
  auto saved = ReadModelInfo(r.out);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->preset, "flowers");
  EXPECT_EQ(saved->classes, 4);

  // The account: each phase's layers and learning rate (the fine-tuning's a tenth of the
  // schedule's), `val` under the recipe's name for it, and no command to run next.
  const std::string* phase1 = recorder->LineStarting("phase 1 (head): epochs 1-1 with the layers up to re_lu_1 frozen");
  const std::string* phase2 = recorder->LineStarting("phase 2 (fine-tuning): epochs 2-2 with every layer trainable");
  ASSERT_NE(phase1, nullptr);
  ASSERT_NE(phase2, nullptr);
  EXPECT_NE(phase2->find("at the learning rate x 0.1"), std::string::npos) << *phase2;
  EXPECT_NE(recorder->LineStarting("phase 1 model saved to " + r.checkpoint_dir + "/head_trained.h5"), nullptr);
  EXPECT_NE(recorder->LineStarting("model saved to " + r.out), nullptr);
  EXPECT_NE(recorder->LineStarting("val loss: "), nullptr);
  EXPECT_NE(recorder->LineStarting("val accuracy: "), nullptr);
  EXPECT_NE(recorder->LineStarting("val macro F1: "), nullptr);
  EXPECT_EQ(recorder->LineStarting("test "), nullptr);
  for (const std::string& line : recorder->lines) EXPECT_EQ(line.find("next:"), std::string::npos) << line;

  auto again = (*trainer)->Run();
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("a trainer runs once"), std::string::npos);
}

// One fit of every layer, no `val`: no head phase, no evaluation; the report names `val` as the
// recipe does once there is one, and `verbose` 0 tells the reporter nothing.
TEST_F(TrainerTest, APlainRunHasOneFitAndVerboseZeroIsSilent) {
  Recipe r = Small();
  r.val = "";
  r.out = Path("plain.ckpt");
  auto recorder = std::make_shared<Recorder>();
  auto report = train::Run(r, recorder);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(recorder->Phases(),
            (std::vector<std::string>{"begin prepare", "end prepare", "begin fit all", "end fit all", "begin save",
                                      "end save", "begin report", "end report", "finished"}));
  EXPECT_EQ(recorder->LineStarting("phase 1"), nullptr);
  EXPECT_NE(recorder->LineStarting("validation: none"), nullptr);

  r.verbose = 0;
  r.out = Path("quiet.ckpt");
  auto quiet = std::make_shared<Recorder>();
  ASSERT_TRUE(train::Run(r, quiet).ok());
  EXPECT_TRUE(quiet->events.empty()) << quiet->events.front();
}

// A bad recipe fails in Create, with the flag named, before the run's first phase.
TEST_F(TrainerTest, ABadRecipeFailsInCreateNamingTheFlag) {
  Recipe r = Small();
  r.freeze_until = "no_such_layer";
  auto recorder = std::make_shared<Recorder>();
  auto trainer = Trainer::Create(r, recorder);
  EXPECT_EQ(trainer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(trainer.status().message().find("--freeze-until no_such_layer: model flowers-cnn has no layer named"),
            std::string::npos)
      << trainer.status().ToString();
  EXPECT_EQ(recorder->Phases(), std::vector<std::string>{"begin prepare"}) << "a failed phase does not end";

  r = Small();
  r.schedule = "linear";
  EXPECT_EQ(Trainer::Create(r, recorder).status().message(), "--schedule must be cosine, constant or rampup");
}

}  // namespace
}  // namespace strata::train
