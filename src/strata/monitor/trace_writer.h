// TraceWriter: a Chrome trace event file (the JSON Object Format of "Trace Event Format",
// which chrome://tracing, Perfetto and about:tracing open).
//
//   {"traceEvents":[
//     {"ph":"M","name":"process_name","pid":1,"args":{"name":"strata replicas"}},
//     {"ph":"M","name":"thread_name","pid":1,"tid":0,"args":{"name":"replica 0"}},
//     {"ph":"X","name":"step","pid":1,"tid":0,"ts":1234.5,"dur":68900.1,"args":{...}},   us
//     {"ph":"X","name":"input wait","pid":1,"tid":0,"ts":...,"dur":...},
//     {"ph":"C","name":"0.0 parallel_map","pid":2,"ts":...,"args":{"busy cores":0.98,...}},
//     {"ph":"X","name":"matrix 61% · idle 3%","pid":3,"tid":0,...}                 a window
//   ],
//   "displayTimeUnit":"ms","otherData":{"report":{...},"dropped_events":0}}
//
// Tracks: pid 1 has one thread per replica (steps and input waits as complete events),
// pid 2 one counter track per pipeline stage (busy cores, buffer fill, elements/s),
// pid 3 the monitor's windows, pid 4 the gradient all-reduce of a multi-worker job (each
// bucket an async slice from its start to its finish, args: bytes and when it was ready;
// thread 1 the step's wait for it). Timestamps are microseconds since Monitor::Start(). A
// multi-worker job's trace also holds {"ph":"M","name":"strata_clock","args":{"worker":W,
// "trace_start_ns":..,"clock_sync_ns":..}}: the worker's clock at ts 0 and at a moment every
// worker shared, which bench/merge_traces.py aligns the workers' traces by.
// Events are streamed to the file as the monitor drains them (memory stays bounded); the
// closing bracket is written by Finish(). A file cut short (a crash) still loads in Perfetto,
// which accepts an unterminated traceEvents array.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/file.h"
#include "strata/core/status.h"
#include "strata/monitor/input_report.h"
#include "strata/monitor/window.h"

namespace strata::monitor {

// One step or input wait of one replica, or one gradient bucket's all-reduce or the step's wait
// for it (`replica`: the bucket's index), recorded by a hook, written by the monitor thread.
struct TraceEvent {
  enum Kind : int32_t { kStep = 0, kInputWait = 1, kBucket = 2, kAllReduceWait = 3 };
  Kind kind = kStep;
  int32_t replica = 0;
  int64_t begin_ns = 0, end_ns = 0;  // NowNanos(); a bucket: started, seen finished
  double matrix_flops = 0;
  int64_t examples = 0;
  int64_t ready_ns = 0, bytes = 0;   // a bucket's
};

class TraceWriter {
 public:
  static Result<std::unique_ptr<TraceWriter>> Open(const std::string& path);
  ~TraceWriter();

  // The header and the track names.
  Status Begin(const RunInfo& info);
  // A multi-worker job's clock anchors (the strata_clock event), once ts 0 is known.
  Status AddClock(const RunInfo& info);
  Status Add(const TraceEvent& e, int64_t start_ns);
  // Counter samples for every stage at `now_ns` (rates against the previous sample).
  Status AddStageCounters(const std::vector<StageSample>& stages, int64_t now_ns, int64_t start_ns);
  Status AddWindow(const Window& w, int64_t start_ns);
  // Closes the array, writes the report as otherData and closes the file.
  Status Finish(const InputPipelineReport& report, int64_t dropped_events);

  int64_t events_written() const { return events_; }

 private:
  explicit TraceWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  Status Emit(const std::string& json_object);
  Status FlushBuffer();

  std::unique_ptr<WritableFile> file_;
  std::string buf_;  // pending bytes, written out beyond 64 KiB and at each counter sample
  int64_t events_ = 0;
  bool finished_ = false;
  struct Prev {
    int64_t ns = 0, elements = 0, busy_ns = 0;
  };
  std::map<std::string, Prev> prev_;  // by "path name"
};

}  // namespace strata::monitor
