// strata.devices() (what `strata devices` prints) and strata.monitor (the live page and
// utilization / idle monitor of `strata train --monitor-port`, for fit and custom loops).
#include <pybind11/stl.h>

#include <algorithm>

#include "bindings.h"
#include "convert.h"
#include "host_info.h"
#include "strata/backend/compile.h"
#include "strata/monitor/fit_monitor.h"

namespace strata::python {

py::dict HostInfoDict(const distribute::HostInfo& h, bool this_host) {
  std::vector<std::string> precisions;
  if (this_host) {
    precisions = backend::TrainablePrecisions();
  } else {
    precisions = {"f32"};
    if (std::find(h.isa.begin(), h.isa.end(), "AVX-512") != h.isa.end()) precisions.push_back("bf16");
  }
  py::dict d;
  d["hostname"] = h.hostname;
  d["cpu_model"] = h.cpu_model;
  d["cores"] = h.cores;
  d["cpu_ids"] = h.cpu_ids;
  d["isa"] = h.isa;
  d["memory_bytes"] = h.memory_bytes;
  d["replicas"] = h.replicas;
  d["peak_f32_gflops_per_core"] = h.peak.f32_gflops_per_core;
  d["peak_bf16_gflops_per_core"] = h.peak.bf16_gflops_per_core;
  d["f32_kernel"] = h.peak.f32_kernel;
  d["bf16_kernel"] = h.peak.bf16_kernel;
  d["peak_from_cache"] = h.peak.from_cache;
  d["peak_provisional"] = h.peak.provisional;
  d["precisions"] = precisions;
  return d;
}

namespace {

void RegisterMonitor(py::module_& m) {
  using monitor::FitMonitor;
  py::class_<FitMonitor>(m, "FitMonitor",
                         "The monitor `strata train` runs (monitor/fit_monitor.h): fit's step observer; python/strata/monitor.py "
                         "wraps it with Keras-style keywords.")
      .def(py::init([](double interval_seconds, bool console, std::string tensorboard_dir, std::string trace_path,
                       int port, std::string bind, std::string report_json) {
             if (!(interval_seconds > 0)) ThrowValueError("interval_seconds must be > 0, got " + std::to_string(interval_seconds));
             if (port < -1 || port > 65535) ThrowValueError("port must be in [0, 65535] (or None), got " + std::to_string(port));
             return std::make_unique<FitMonitor>(monitor::FitMonitorOptions{
                 .interval_seconds = interval_seconds, .console = console, .tensorboard_dir = std::move(tensorboard_dir),
                 .trace_path = std::move(trace_path), .http_port = port, .http_bind = std::move(bind),
                 .report_json = std::move(report_json)});
           }),
           py::arg("interval_seconds"), py::arg("console"), py::arg("tensorboard_dir"), py::arg("trace_path"),
           py::arg("port"), py::arg("bind"), py::arg("report_json"))
      .def_property_readonly("url", &FitMonitor::url)
      .def_property_readonly("running", &FitMonitor::running)
      // A custom loop's run: what fit does once its step is compiled (no pipeline statistics).
      .def("start",
           [](FitMonitor& self, int replicas, bool bf16, int64_t initial_step) {
             if (self.running()) ThrowValueError("the monitor is already running: stop() it first");
             if (replicas < 1) ThrowValueError("replicas must be >= 1, got " + std::to_string(replicas));
             keras::FitStart start{.replicas = replicas, .bf16 = bf16, .initial_step = initial_step,
                                   .pipeline = [] { return std::vector<data::StageStatsSnapshot>(); }};
             Status s;
             {
               py::gil_scoped_release release;  // may calibrate the peak FLOP/s (a few hundred ms)
               s = self.OnTrainBegin(start);
             }
             Check(s);
           },
           py::arg("replicas"), py::arg("bf16"), py::arg("initial_step"))
      .def("stop",
           [](FitMonitor& self) {
             if (!self.running()) return;
             Status s;
             {
               py::gil_scoped_release release;  // joins the monitor's thread and the page's
               s = self.OnTrainEnd();
             }
             Check(s);
           })
      // Hooks: ignored unless running (the C++ hooks assume a started monitor).
      .def("step_begin", [](FitMonitor& self, int replica) { if (self.running()) self.StepBegin(replica); },
           py::arg("replica"))
      .def("step_end",
           [](FitMonitor& self, int replica, double matrix_flops, int64_t examples, double executed_flops) {
             // A negative executed count: the kernels executed what they counted.
             if (self.running())
               self.StepEnd(replica, matrix_flops, examples, executed_flops >= 0 ? executed_flops : matrix_flops);
           },
           py::arg("replica"), py::arg("matrix_flops"), py::arg("examples"), py::arg("executed_flops") = -1.0)
      .def("input_wait_begin", [](FitMonitor& self, int replica) { if (self.running()) self.InputWaitBegin(replica); },
           py::arg("replica"))
      .def("input_wait_end", [](FitMonitor& self, int replica) { if (self.running()) self.InputWaitEnd(replica); },
           py::arg("replica"))
      .def("pause", [](FitMonitor& self) { if (self.running()) self.Pause(); })
      .def("resume", [](FitMonitor& self) { if (self.running()) self.Resume(); });
}

}  // namespace

void RegisterDevices(py::module_& m) {
  m.def(
      "_devices",
      [](bool recalibrate) {
        Result<distribute::ClusterSpec> spec = [&] {
          py::gil_scoped_release release;  // a calibration runs a few hundred ms
          return distribute::ClusterResolver::Local({.recalibrate = recalibrate});
        }();
        py::list out;
        for (const auto& h : Unwrap(std::move(spec)).host_info) out.append(HostInfoDict(h, true));
        return out;
      },
      py::arg("recalibrate"), "This host as `strata devices --json` describes it (one dict per host).");
  py::module_ mon = m.def_submodule("monitor", "The utilization / idle monitor and its live page.");
  RegisterMonitor(mon);
}

}  // namespace strata::python
