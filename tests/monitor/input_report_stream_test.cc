// The input-pipeline report's per-stream read rate (docs/remote.md): bytes over busy seconds of
// the file readers, whose busy time is summed over one thread per open file.
#include <gtest/gtest.h>

#include "strata/monitor/input_report.h"

namespace strata::monitor {
namespace {

TEST(InputReportStreams, FileReadersShowMegabytesPerSecondPerStream) {
  RunTotals t;
  t.seconds = 10;
  t.replicas = 1;
  t.steps = 100;
  t.replica_steps = 100;
  t.examples = 100;
  // 1.6 GB read by 16 streams in 8 busy seconds in all: 200 MB/s per stream.
  const std::vector<StageSample> stages = {
      {.name = "parallel_interleave", .path = "0", .elements = 8000, .bytes = 1600000000, .busy_ns = 1000000},
      {.name = "files", .path = "0.0", .elements = 16, .bytes = 0, .busy_ns = 1000},
      {.name = "tfrecord", .path = "0.f", .elements = 8000, .bytes = 1600000000, .busy_ns = 8000000000},
  };
  const InputPipelineReport r = AnalyzeInputPipeline(t, stages);
  ASSERT_EQ(r.stages.size(), 3u);
  for (const auto& s : r.stages) {
    if (s.name == "tfrecord")
      EXPECT_DOUBLE_EQ(s.stream_mb_per_second, 200.0);
    else
      EXPECT_EQ(s.stream_mb_per_second, 0.0) << s.name;  // pass-through stages have no stream rate
  }
  EXPECT_NE(FormatReportText(r).find("MB/s/str"), std::string::npos);
  EXPECT_NE(ReportToJson(r).find("\"stream_mb_per_second\":200"), std::string::npos) << ReportToJson(r);
}

}  // namespace
}  // namespace strata::monitor
