// HttpServer: the live monitor page, as a Reporter that also serves HTTP.
//
//   GET /                 the page: two gauges (matrix-unit utilization, idle) and their
//                         history as charts; every asset is served from the binary
//                         (web/, embedded at build time by web_assets.cc): no network
//   GET /app.js, /style.css
//   GET /metrics          Prometheus text format 0.0.4 (window.h FormatPrometheus)
//   GET /api/v1/monitor   {"running":bool,"run":RunInfo,"latest":Window|null,
//                          "history":[{index,step,wall_time,start_seconds,utilization_pct,
//                                      idle_pct,step_ms,examples_per_s}...],
//                          "report":InputPipelineReport|null}
//
// Read-only: GET and HEAD only (405 otherwise, with Allow). Requests are parsed by
// Boost.Beast with limits: a request head over max_header_bytes gets 431, a request with a
// body 413, anything Beast cannot parse 400, an unknown path 404. Each connection has an
// idle timeout. Binds 127.0.0.1 unless told otherwise; port 0 picks a free port (port()).
// One I/O thread serves every connection (asynchronous, so a slow client blocks nobody).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "strata/core/status.h"
#include "strata/monitor/reporter.h"

namespace strata::monitor {

struct HttpServerOptions {
  std::string bind = "127.0.0.1";  // --monitor-bind; "0.0.0.0" exposes the page to the network
  int port = 0;                    // --monitor-port; 0 = any free port
  int max_header_bytes = 8192;     // the request line and headers together
  double idle_timeout_seconds = 10;  // a connection that sends nothing for this long is closed
  int history_points = 720;        // windows kept for the charts (2 h at 10 s)
};

class HttpServer : public Reporter {
 public:
  // Binds and starts serving now (the page shows "waiting" until the run starts).
  static Result<std::unique_ptr<HttpServer>> Start(HttpServerOptions options = {});
  ~HttpServer() override;  // stops serving and joins the I/O thread

  int port() const;
  // "http://127.0.0.1:8080/"
  std::string url() const;

  Status OnStart(const RunInfo& info) override;
  Status OnWindow(const Window& w) override;
  Status OnStop(const InputPipelineReport& report) override;

  // The JSON /api/v1/monitor serves, as of now.
  std::string ApiJson() const;

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A plain HTTP/1.1 GET (http:// only) with a timeout, for `strata monitor URL` and tests.
struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};
Result<HttpResponse> HttpGet(const std::string& url, double timeout_seconds = 5);

}  // namespace strata::monitor
