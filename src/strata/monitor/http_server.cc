#include "strata/monitor/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "strata/core/log.h"
#include "strata/monitor/json_util.h"
#include "strata/monitor/web_assets.h"

namespace strata::monitor {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

// What the pages show, updated by the monitor thread, read by the I/O thread.
struct HttpServer::Impl {
  HttpServerOptions options;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  std::thread thread;
  int port = 0;

  mutable std::mutex mu;
  bool started = false, running = false;
  RunInfo info;
  std::optional<Window> latest;
  std::deque<Window> history;  // windows without stages (the charts need the scalars)
  std::optional<InputPipelineReport> report;

  std::string Api() const {
    std::lock_guard<std::mutex> lock(mu);
    json hist = json::array();
    for (const auto& w : history)
      hist.push_back({{"index", w.index},
                      {"step", w.step},
                      {"wall_time", w.wall_time},
                      {"start_seconds", w.start_seconds},
                      {"utilization_pct", w.utilization_pct},
                      {"idle_pct", w.idle_pct},
                      {"step_ms", w.step_ms},
                      {"examples_per_s", w.examples_per_s}});
    json j = {{"running", running},
              {"started", started},
              {"run", started ? RunInfoJson(info) : json(nullptr)},
              {"latest", latest ? WindowJson(*latest) : json(nullptr)},
              {"history", hist},
              {"report", report ? ReportJson(*report) : json(nullptr)}};
    return Dump(j);
  }

  std::string Metrics() const {
    std::lock_guard<std::mutex> lock(mu);
    Window none;
    std::string text = FormatPrometheus(info, latest ? *latest : none);
    text += "# HELP strata_monitor_running Whether a computation is running (1) or not (0).\n"
            "# TYPE strata_monitor_running gauge\n";
    text += std::string("strata_monitor_running ") + (running ? "1" : "0") + "\n";
    return text;
  }

  void Accept();
};

namespace {

// One connection: read a request (with limits), answer it, repeat while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl* server) : stream_(std::move(socket)), server_(server) {}

  void Run() { Read(); }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(0);  // read-only: no request carries a body
    stream_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(server_->options.idle_timeout_seconds * 1e3)));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      Close();
      return;
    }
    if (ec) {
      // Refused requests: say why with a 4xx, then close.
      http::status status = http::status::bad_request;
      if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
        status = http::status::request_header_fields_too_large;
      else if (ec == http::error::body_limit)
        status = http::status::payload_too_large;
      Reply(status, "text/plain; charset=utf-8", std::string(http::obsolete_reason(status)) + ": " + ec.message() + "\n",
            /*keep_alive=*/false, /*head=*/false);
      return;
    }
    const auto& req = parser_->get();
    const bool head = req.method() == http::verb::head;
    if (req.method() != http::verb::get && !head) {
      Reply(http::status::method_not_allowed, "text/plain; charset=utf-8", "read-only: GET and HEAD only\n",
            false, false);
      return;
    }
    std::string target(req.target());
    if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
    const bool keep = req.keep_alive();
    if (target == "/api/v1/monitor") {
      Reply(http::status::ok, "application/json", server_->Api(), keep, head);
    } else if (target == "/metrics") {
      Reply(http::status::ok, "text/plain; version=0.0.4; charset=utf-8", server_->Metrics(), keep, head);
    } else if (const WebAsset* a = FindWebAsset(target == "/" ? "/index.html" : target)) {
      Reply(http::status::ok, a->content_type, std::string(a->data), keep, head);
    } else {
      Reply(http::status::not_found, "text/plain; charset=utf-8", "not found: " + target.substr(0, 200) + "\n", keep,
            head);
    }
  }

  void Reply(http::status status, std::string_view type, std::string body, bool keep_alive, bool head) {
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    res->set(http::field::server, "strata-monitor");
    res->set(http::field::content_type, std::string(type));
    res->set(http::field::cache_control, "no-store");
    res->set(http::field::access_control_allow_origin, "*");
    if (status == http::status::method_not_allowed) res->set(http::field::allow, "GET, HEAD");
    res->keep_alive(keep_alive);
    const size_t size = body.size();
    if (!head) res->body() = std::move(body);
    res->prepare_payload();
    if (head) res->content_length(size);
    stream_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(server_->options.idle_timeout_seconds * 1e3)));
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, std::size_t) {
      if (ec || !keep_alive) {
        self->Close();
        return;
      }
      self->Read();
    });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{16384};  // the most a request head may occupy, with slack
  std::optional<http::request_parser<http::empty_body>> parser_;
  HttpServer::Impl* server_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(ioc, [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) std::make_shared<Session>(std::move(socket), this)->Run();
    Accept();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options) {
  if (options.port < 0 || options.port > 65535)
    return InvalidArgument("monitor: port must be in [0, 65535], got " + std::to_string(options.port));
  if (options.max_header_bytes < 256) options.max_header_bytes = 256;
  if (options.max_header_bytes > 16000) options.max_header_bytes = 16000;  // fits the read buffer
  if (!(options.idle_timeout_seconds > 0)) options.idle_timeout_seconds = 10;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.bind, ec);
  if (ec) return InvalidArgument("monitor: bad bind address '" + options.bind + "': " + ec.message());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  const std::string where = options.bind + ":" + std::to_string(options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (ec) return IOError("monitor: cannot open a socket for " + where + ": " + ec.message());
  impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  impl->acceptor.bind(endpoint, ec);
  if (ec) return IOError("monitor: cannot bind " + where + ": " + ec.message());
  impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return IOError("monitor: cannot listen on " + where + ": " + ec.message());
  impl->port = impl->acceptor.local_endpoint(ec).port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    for (;;) {
      try {
        raw->ioc.run();
        return;
      } catch (const std::exception& e) {  // a handler threw (out of memory): log, keep serving
        STRATA_LOG(kWarn) << "monitor http: " << e.what();
      }
    }
  });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port; }

std::string HttpServer::url() const {
  std::string host = impl_->options.bind;
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(impl_->port) + "/";
}

Status HttpServer::OnStart(const RunInfo& info) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->info = info;
  impl_->started = true;
  impl_->running = true;
  return Status::OK();
}

Status HttpServer::OnWindow(const Window& w) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->latest = w;
  Window brief = w;
  brief.stages.clear();
  brief.replicas.clear();
  impl_->history.push_back(std::move(brief));
  while (impl_->history.size() > static_cast<size_t>(std::max(1, impl_->options.history_points)))
    impl_->history.pop_front();
  return Status::OK();
}

Status HttpServer::OnStop(const InputPipelineReport& report) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->running = false;
  impl_->report = report;
  return Status::OK();
}

std::string HttpServer::ApiJson() const { return impl_->Api(); }

// ---- client ------------------------------------------------------------------------------

Result<HttpResponse> HttpGet(const std::string& url, double timeout_seconds) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return InvalidArgument("only http:// URLs are supported, got '" + url + "'");
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  const std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
  std::string host = hostport, port = "80";
  if (!hostport.empty() && hostport[0] == '[') {  // [::1]:8080
    const size_t close = hostport.find(']');
    if (close == std::string::npos) return InvalidArgument("bad URL '" + url + "'");
    host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size() && hostport[close + 1] == ':') port = hostport.substr(close + 2);
  } else if (const size_t colon = hostport.rfind(':'); colon != std::string::npos) {
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
  }
  if (host.empty() || port.empty()) return InvalidArgument("bad URL '" + url + "': no host or port");

  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1e3));
  beast::error_code result;
  HttpResponse out;
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, hostport);
  req.set(http::field::user_agent, "strata-monitor");
  req.set(http::field::connection, "close");
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  try {
    resolver.async_resolve(host, port, [&](beast::error_code ec, tcp::resolver::results_type results) {
      if (ec) {
        result = ec;
        return;
      }
      stream.expires_after(timeout);
      stream.async_connect(results, [&](beast::error_code ec2, const tcp::endpoint&) {
        if (ec2) {
          result = ec2;
          return;
        }
        stream.expires_after(timeout);
        http::async_write(stream, req, [&](beast::error_code ec3, std::size_t) {
          if (ec3) {
            result = ec3;
            return;
          }
          stream.expires_after(timeout);
          http::async_read(stream, buffer, parser, [&](beast::error_code ec4, std::size_t) { result = ec4; });
        });
      });
    });
    ioc.run();
  } catch (const std::exception& e) {
    return IOError("GET " + url + ": " + e.what());
  }
  if (result) return IOError("GET " + url + ": " + result.message());
  const auto& res = parser.get();
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[http::field::content_type]);
  out.body = res.body();
  return out;
}

}  // namespace strata::monitor
