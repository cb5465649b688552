// The monitor's TensorBoard scalars: read back by Strata's event reader and structured like
// the real TensorFlow event files in testdata/real (file version first, tags, steps).
#include "strata/monitor/event_reporter.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "strata/core/clock.h"
#include "strata/monitor/monitor.h"

namespace strata::monitor {
namespace {

std::vector<record::Event> ReadAll(const std::string& path) {
  std::vector<record::Event> out;
  auto reader = record::EventReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  record::Event e;
  Status st;
  while ((st = (*reader)->Next(&e)).ok()) out.push_back(e);
  EXPECT_TRUE(st.IsOutOfRange()) << st.ToString();
  return out;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/monitor_events_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// What a real Keras (TF 2) event file looks like: the file version record first, then
// summaries whose scalars are simple_values with a tag, at increasing steps.
TEST(EventReporterTest, RealKerasEventFileHasTheShapeWeWrite) {
  const auto events =
      ReadAll(std::string(STRATA_TESTDATA) + "/real/tfx_iris-keras_train_events.out.tfevents.1598485465.penguin.1486.6519.v2");
  ASSERT_EQ(events.size(), 244u);
  EXPECT_EQ(events[0].what, record::Event::What::kFileVersion);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  int scalars = 0;
  for (const auto& e : events)
    for (const auto& v : e.summary)
      if (v.kind == record::SummaryValue::Kind::kSimpleValue && v.tag == "batch_loss") ++scalars;
  EXPECT_EQ(scalars, 100);
}

TEST(EventReporterTest, MonitorScalarsReadBackWithTagsAndSteps) {
  const std::string dir = FreshDir("own");
  auto rep = EventFileReporter::Create(dir);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  const std::string path = (*rep)->path();
  EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos) << path;
  EXPECT_EQ(path.substr(path.size() - 3), ".v2");

  std::vector<StageSample> stages = {{.name = "parallel_map", .path = "0.0", .elements = 0, .busy_ns = 0}};
  auto m = Monitor::Create({.interval_seconds = 0.1,
                            .replicas = 2,
                            .peak_gflops_per_core = 10,
                            .pipeline =
                                [&] {
                                  stages[0].busy_ns += 50'000'000;
                                  return stages;
                                },
                            .initial_step = 100});
  ASSERT_TRUE(m.ok());
  (*m)->AddReporter(std::move(*rep));
  const double before = WallSeconds();
  ASSERT_TRUE((*m)->Start().ok());
  for (int i = 0; i < 12; ++i) {
    for (int r = 0; r < 2; ++r) (*m)->StepBegin(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    for (int r = 0; r < 2; ++r) (*m)->StepEnd(r, 1e8, 16);
  }
  ASSERT_TRUE((*m)->Stop().ok());

  const auto events = ReadAll(path);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0].what, record::Event::What::kFileVersion);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  std::map<std::string, std::vector<int64_t>> steps_by_tag;
  for (size_t i = 1; i < events.size(); ++i) {
    const auto& e = events[i];
    ASSERT_EQ(e.what, record::Event::What::kSummary) << "event " << i;
    EXPECT_GE(e.wall_time, before - 1) << "event " << i;
    EXPECT_LE(e.wall_time, WallSeconds() + 1) << "event " << i;
    for (const auto& v : e.summary) {
      EXPECT_EQ(v.kind, record::SummaryValue::Kind::kSimpleValue) << v.tag;
      steps_by_tag[v.tag].push_back(e.step);
      if (v.tag == "monitor/matrix_unit_utilization" || v.tag == "monitor/idle_time") {
        EXPECT_GE(v.simple_value, 0.0f);
        EXPECT_LE(v.simple_value, 100.0f);
      }
    }
  }
  for (const char* tag : {"monitor/matrix_unit_utilization", "monitor/idle_time", "monitor/step_time_ms",
                          "monitor/examples_per_second", "monitor/replica_0/matrix_unit_utilization",
                          "monitor/replica_1/idle_time", "monitor/input/0.0_parallel_map/busy_percent"}) {
    ASSERT_TRUE(steps_by_tag.count(tag)) << tag;
    const auto& steps = steps_by_tag[tag];
    EXPECT_GE(steps.size(), 2u) << tag;
    for (size_t i = 1; i < steps.size(); ++i) EXPECT_GE(steps[i], steps[i - 1]) << tag;
    EXPECT_GT(steps.front(), 100) << tag;  // initial_step + steps done
    EXPECT_LE(steps.back(), 112) << tag;
  }
}

TEST(EventReporterTest, SharedWriterGetsTheScalarsNextToTheLoopsOwn) {
  const std::string dir = FreshDir("shared");
  auto writer = record::EventWriter::Create(dir);
  ASSERT_TRUE(writer.ok());
  std::mutex mu;
  auto m = Monitor::Create({.interval_seconds = 0.05, .replicas = 1, .peak_gflops_per_core = 10});
  ASSERT_TRUE(m.ok());
  (*m)->AddReporter(std::make_unique<EventFileReporter>(writer->get(), &mu, EventFileReporterOptions{}));
  ASSERT_TRUE((*m)->Start().ok());
  for (int i = 0; i < 4; ++i) {
    (*m)->StepBegin(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    (*m)->StepEnd(0, 1e6, 1);
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_TRUE((*writer)->WriteScalar("epoch_loss", i + 1, 1.0f / (i + 1)).ok());
  }
  ASSERT_TRUE((*m)->Stop().ok());
  ASSERT_TRUE((*writer)->Close().ok());
  std::set<std::string> tags;
  for (const auto& e : ReadAll((*writer)->path()))
    for (const auto& v : e.summary) tags.insert(v.tag);
  EXPECT_TRUE(tags.count("epoch_loss"));
  EXPECT_TRUE(tags.count("monitor/matrix_unit_utilization"));
  EXPECT_TRUE(tags.count("monitor/idle_time"));
}

TEST(EventReporterTest, MissingDirectoryIsAnError) {
  auto rep = EventFileReporter::Create("/nonexistent/monitor/logdir");
  EXPECT_FALSE(rep.ok());
}

}  // namespace
}  // namespace strata::monitor
