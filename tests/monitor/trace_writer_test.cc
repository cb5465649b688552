// The Chrome trace event file: valid JSON in the Trace Event Format's object form, one track
// per replica and per pipeline stage.
#include "strata/monitor/trace_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "strata/core/clock.h"
#include "strata/core/file.h"
#include "strata/monitor/matmul_workload.h"
#include "strata/monitor/monitor.h"

namespace strata::monitor {
namespace {

using nlohmann::json;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/monitor_trace_" + std::to_string(::getpid()) + "_" + name;
}

TEST(TraceWriterTest, StarvedRunTraceHasReplicaAndStageTracks) {
  const std::string path = TempPath("starved.json");
  MatmulWorkloadOptions wo{.replicas = 2, .n = 64, .matmuls_per_step = 2, .seconds = 0.8, .map_cost_ms = 10};
  MatmulWorkload work(wo);
  auto m = Monitor::Create({.interval_seconds = 0.2, .replicas = 2, .peak_gflops_per_core = 100,
                            .pipeline = work.PipelineSource(), .trace_sample_seconds = 0.05});
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->EnableTrace(path).ok());
  auto res = work.Run(m->get());
  ASSERT_TRUE(res.ok()) << res.status().ToString();

  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  json j = json::parse(*text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "not valid JSON: " << text->substr(0, 300);
  ASSERT_TRUE(j["traceEvents"].is_array());
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  EXPECT_EQ(j["otherData"]["report"]["slowest_stage"], "slow_map");
  EXPECT_EQ(j["otherData"]["dropped_events"], 0);

  std::map<int, std::string> thread_names;  // pid 1
  std::map<int, int> steps_per_tid, waits_per_tid;
  std::set<std::string> counter_tracks;
  int windows = 0;
  double last_step_end = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name" && e["pid"] == 1) thread_names[e["tid"]] = e["args"]["name"];
    if (ph == "X") {
      ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["ts"].get<double>(), -1.0) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e.dump();
      if (e["pid"] == 1 && e["name"] == "step") {
        ++steps_per_tid[e["tid"]];
        EXPECT_DOUBLE_EQ(e["args"]["matrix_flops"].get<double>(), 2 * 2.0 * 64 * 64 * 64);
        last_step_end = std::max(last_step_end, e["ts"].get<double>() + e["dur"].get<double>());
      }
      if (e["pid"] == 1 && e["name"] == "input wait") ++waits_per_tid[e["tid"]];
      if (e["pid"] == 3) ++windows;
    }
    if (ph == "C") {
      EXPECT_EQ(e["pid"], 2);
      ASSERT_TRUE(e["args"].is_object());
      counter_tracks.insert(e["name"]);
    }
  }
  EXPECT_EQ(thread_names.size(), 2u);
  EXPECT_EQ(thread_names[0], "replica 0");
  EXPECT_EQ(thread_names[1], "replica 1");
  int steps = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(steps_per_tid[r], 0) << r;
    EXPECT_GT(waits_per_tid[r], 0) << r;
    steps += steps_per_tid[r];
  }
  EXPECT_EQ(steps, res->steps);  // every step is on its replica's track
  EXPECT_EQ(counter_tracks, (std::set<std::string>{"0.0.0 source", "0.0 slow_map", "0 prefetch"}));
  EXPECT_GE(windows, 2);
  // Microseconds since Start(), like the monitor's own run time (its windows, from Start()
  // to Stop(), after every step ended). Not the workload's res->seconds: that starts when
  // Start() has returned, which under ThreadSanitizer or a loaded machine is milliseconds later.
  EXPECT_LE(last_step_end, res->report.seconds * 1e6 + 1e3);
}

TEST(TraceWriterTest, FullRingDropsAndCountsInsteadOfAllocating) {
  const std::string path = TempPath("dropped.json");
  auto m = Monitor::Create({.interval_seconds = 10, .replicas = 1, .peak_gflops_per_core = 1,
                            .trace_ring_events = 16, .trace_sample_seconds = 10});
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->EnableTrace(path).ok());
  ASSERT_TRUE((*m)->Start().ok());
  for (int i = 0; i < 100; ++i) {
    (*m)->StepBegin(0);
    (*m)->StepEnd(0, 1, 1);
  }
  ASSERT_TRUE((*m)->Stop().ok());
  json j = json::parse(*ReadFileToString(path));
  EXPECT_EQ(j["otherData"]["dropped_events"], 100 - 16);
  int steps = 0;
  for (const auto& e : j["traceEvents"]) steps += e["ph"] == "X" && e["name"] == "step";
  EXPECT_EQ(steps, 16);
}

// The communication timeline: each bucket an async slice on pid 4 from its start to its finish
// (microseconds since Start(), its bytes and ready time in args), the step's wait a complete
// slice on thread 1, and a multi-worker trace's clock anchors in the strata_clock event (with
// the offset a test gives this worker's clock). Without a trace the hooks do nothing.
TEST(TraceWriterTest, AllReduceBucketsAndTheWaitHaveTheirOwnTrackAndTheClockItsAnchors) {
  const std::string path = TempPath("allreduce.json");
  const int64_t sync = NowNanos();
  auto m = Monitor::Create({.interval_seconds = 10, .replicas = 1, .peak_gflops_per_core = 1, .trace_sample_seconds = 10,
                            .worker = 1, .clock_sync_ns = sync, .clock_offset_ns = 5'000'000'000});
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->EnableTrace(path).ok());
  ASSERT_TRUE((*m)->Start().ok());
  const int64_t t0 = NowNanos();
  (*m)->AllReduceBucket(0, 4096, t0 + 1'000, t0 + 3'000, t0 + 10'000);
  (*m)->AllReduceBucket(1, 1024, t0 + 2'000, t0 + 4'000, t0 + 8'000);  // in flight beside bucket 0
  (*m)->AllReduceWait(t0 + 5'000, t0 + 10'500);
  ASSERT_TRUE((*m)->Stop().ok());
  json j = json::parse(*ReadFileToString(path));
  std::map<int, json> begins, ends;
  json wait, anchors;
  std::map<int, std::string> threads;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 4) threads[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "strata_clock") anchors = e["args"];
    if (e["ph"] == "b") begins[e["id"]] = e;
    if (e["ph"] == "e") ends[e["id"]] = e;
    if (e["ph"] == "X" && e["name"] == "all-reduce wait") wait = e;
  }
  EXPECT_EQ(threads[0], "buckets");
  ASSERT_EQ(begins.size(), 2u);
  ASSERT_EQ(ends.size(), 2u);
  const double origin = begins[0]["ts"].get<double>() - 3.0;  // t0 in the trace's microseconds
  EXPECT_GE(origin, 0);
  EXPECT_EQ(begins[0]["pid"], 4);
  EXPECT_EQ(begins[0]["name"], "bucket 0");
  EXPECT_EQ(begins[0]["args"]["bytes"], 4096);
  EXPECT_NEAR(begins[0]["args"]["ready_ts"].get<double>(), origin + 1.0, 1e-6);
  EXPECT_NEAR(begins[0]["args"]["queued_us"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(ends[0]["ts"].get<double>(), origin + 10.0, 1e-6);
  EXPECT_NEAR(begins[1]["ts"].get<double>(), origin + 4.0, 1e-6);
  EXPECT_NEAR(ends[1]["ts"].get<double>(), origin + 8.0, 1e-6);
  EXPECT_EQ(begins[1]["args"]["bytes"], 1024);
  EXPECT_EQ(wait["tid"], 1);
  EXPECT_NEAR(wait["ts"].get<double>(), origin + 5.0, 1e-6);
  EXPECT_NEAR(wait["dur"].get<double>(), 5.5, 1e-9);
  EXPECT_EQ(anchors["worker"], 1);
  EXPECT_EQ(anchors["clock_sync_ns"].get<int64_t>(), sync + 5'000'000'000);
  // ts 0 is the monitor's start, after the sync, both read off this worker's shifted clock.
  EXPECT_GE(anchors["trace_start_ns"].get<int64_t>(), anchors["clock_sync_ns"].get<int64_t>());
  EXPECT_LE(anchors["trace_start_ns"].get<int64_t>(), t0 + 5'000'000'000);

  auto quiet = Monitor::Create({.peak_gflops_per_core = 1});
  ASSERT_TRUE(quiet.ok());
  ASSERT_TRUE((*quiet)->Start().ok());
  (*quiet)->AllReduceBucket(0, 1, 1, 2, 3);  // no trace: ignored
  (*quiet)->AllReduceWait(1, 2);
  ASSERT_TRUE((*quiet)->Stop().ok());
}

TEST(TraceWriterTest, BadPathFailsAtEnableNotAtTheEnd) {
  auto m = Monitor::Create({.peak_gflops_per_core = 1});
  ASSERT_TRUE(m.ok());
  Status st = (*m)->EnableTrace("/nonexistent-dir/trace.json");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent-dir/trace.json"), std::string::npos);
}

TEST(TraceWriterTest, StageNamesWithQuotesAndBadUtf8StayValidJson) {
  const std::string path = TempPath("names.json");
  auto w = TraceWriter::Open(path);
  ASSERT_TRUE(w.ok());
  RunInfo info;
  ASSERT_TRUE((*w)->Begin(info).ok());
  std::vector<StageSample> s = {{.name = "ma\"p\n\xff\xfe", .path = "0"}};
  ASSERT_TRUE((*w)->AddStageCounters(s, 1000, 0).ok());
  ASSERT_TRUE((*w)->AddStageCounters(s, 2000, 0).ok());
  ASSERT_TRUE((*w)->Finish(InputPipelineReport{}, 0).ok());
  json j = json::parse(*ReadFileToString(path), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
}

}  // namespace
}  // namespace strata::monitor
