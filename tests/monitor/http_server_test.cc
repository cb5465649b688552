// The live page's server: routes, read-only, 4xx for malformed and oversized requests.
#include "strata/monitor/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "strata/monitor/web_assets.h"
#include "common/promtool.h"

namespace strata::monitor {
namespace {

// Sends raw bytes to 127.0.0.1:port and returns everything the server answers until it
// closes the connection (or 5 s pass).
std::string RawExchange(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "socket failed";
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early on an oversized request
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::atoi(response.c_str() + 9);
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = HttpServer::Start({});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    ASSERT_GT(server_->port(), 0);
  }
  std::string Url(const std::string& path) { return "http://127.0.0.1:" + std::to_string(server_->port()) + path; }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, ServesThePageAndItsAssetsFromTheBinary) {
  auto page = HttpGet(Url("/"));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("id=\"gauge-matrix\""), std::string::npos);
  EXPECT_NE(page->body.find("id=\"gauge-idle\""), std::string::npos);
  // Every asset the page refers to is served here; nothing points off the host.
  EXPECT_EQ(page->body.find("http://"), std::string::npos);
  EXPECT_EQ(page->body.find("https://"), std::string::npos);
  for (const char* asset : {"/app.js", "/style.css"}) {
    EXPECT_NE(page->body.find(asset), std::string::npos) << asset;
    auto a = HttpGet(Url(asset));
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->status, 200) << asset;
    EXPECT_GT(a->body.size(), 500u) << asset;
    EXPECT_EQ(a->body, std::string(FindWebAsset(asset)->data)) << asset;
  }
  auto js = HttpGet(Url("/app.js"));
  EXPECT_NE(js->body.find("/api/v1/monitor"), std::string::npos);
}

TEST_F(HttpServerTest, ApiAndMetricsFollowTheRun) {
  auto before = HttpGet(Url("/api/v1/monitor"));
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->content_type, "application/json");
  auto j = nlohmann::json::parse(before->body);
  EXPECT_FALSE(j["started"].get<bool>());
  EXPECT_TRUE(j["latest"].is_null());

  RunInfo info;
  info.replicas = 2;
  info.peak_gflops_per_core = 220;
  ASSERT_TRUE(server_->OnStart(info).ok());
  Window w;
  w.index = 0;
  w.utilization_pct = 61;
  w.idle_pct = 3;
  w.replicas = {{.idle_pct = 2}, {.idle_pct = 4}};
  ASSERT_TRUE(server_->OnWindow(w).ok());
  w.index = 1;
  w.utilization_pct = 64;
  ASSERT_TRUE(server_->OnWindow(w).ok());

  auto api = HttpGet(Url("/api/v1/monitor?x=1"));
  ASSERT_TRUE(api.ok());
  j = nlohmann::json::parse(api->body);
  EXPECT_TRUE(j["running"].get<bool>());
  EXPECT_EQ(j["run"]["replicas"], 2);
  EXPECT_EQ(j["latest"]["index"], 1);
  EXPECT_DOUBLE_EQ(j["latest"]["utilization_pct"].get<double>(), 64);
  EXPECT_EQ(j["latest"]["replicas"].size(), 2u);
  ASSERT_EQ(j["history"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["history"][0]["utilization_pct"].get<double>(), 61);
  auto back = WindowFromJson(api->body);  // what `strata monitor URL` does
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->index, 1);

  auto metrics = HttpGet(Url("/metrics"));
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->content_type.rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_NE(metrics->body.find("\nstrata_monitor_matrix_unit_utilization_ratio 0.64\n"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("strata_monitor_idle_ratio{replica=\"1\"} 0.04\n"), std::string::npos);
  test::ExpectPromtoolAccepts(metrics->body);
  EXPECT_NE(metrics->body.find("strata_monitor_running 1\n"), std::string::npos);

  InputPipelineReport report;
  report.verdict = Verdict::kHighlyInputBound;
  report.slowest_stage = "slow_map";
  ASSERT_TRUE(server_->OnStop(report).ok());
  j = nlohmann::json::parse(HttpGet(Url("/api/v1/monitor"))->body);
  EXPECT_FALSE(j["running"].get<bool>());
  EXPECT_EQ(j["report"]["slowest_stage"], "slow_map");
  EXPECT_NE(HttpGet(Url("/metrics"))->body.find("strata_monitor_running 0\n"), std::string::npos);
}

TEST_F(HttpServerTest, UnknownPathIs404) {
  auto r = HttpGet(Url("/etc/passwd"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(StatusOf(RawExchange(server_->port(), "GET /../../x HTTP/1.1\r\nHost: a\r\n\r\n")), 404);
}

TEST_F(HttpServerTest, ReadOnlyOtherMethodsAre405) {
  for (const char* m : {"POST", "PUT", "DELETE", "PATCH"}) {
    const std::string res = RawExchange(server_->port(), std::string(m) + " /api/v1/monitor HTTP/1.1\r\nHost: a\r\n\r\n");
    EXPECT_EQ(StatusOf(res), 405) << m << ": " << res.substr(0, 80);
    EXPECT_NE(res.find("Allow: GET, HEAD"), std::string::npos) << m;
  }
}

TEST_F(HttpServerTest, HeadAnswersWithoutABody) {
  const std::string res = RawExchange(server_->port(), "HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(res), 200);
  const size_t end = res.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(res.size(), end + 4);  // no body bytes
  EXPECT_NE(res.find("Content-Length: " + std::to_string(FindWebAsset("/index.html")->data.size())),
            std::string::npos);
}

TEST_F(HttpServerTest, MalformedRequestsAre400) {
  for (const std::string& bad : {std::string("HELLO\r\n\r\n"), std::string("GET / HTTP/9.9\r\n\r\n"),
                                 std::string("GET / HTTP/1.1\r\nNo colon here\r\n\r\n"),
                                 std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)}) {
    const std::string res = RawExchange(server_->port(), bad);
    EXPECT_EQ(StatusOf(res), 400) << "request " << ::testing::PrintToString(bad) << " got " << res.substr(0, 80);
  }
}

TEST_F(HttpServerTest, OversizedRequestsAre4xx) {
  const std::string long_target = "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n";
  EXPECT_EQ(StatusOf(RawExchange(server_->port(), long_target)), 431);
  const std::string big_header = "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(9000, 'b') + "\r\n\r\n";
  EXPECT_EQ(StatusOf(RawExchange(server_->port(), big_header)), 431);
  const std::string body = "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  EXPECT_EQ(StatusOf(RawExchange(server_->port(), body)), 413);
  // The server still serves after all that.
  auto ok = HttpGet(Url("/metrics"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  const std::string two = "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nGET /api/v1/monitor HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  const std::string res = RawExchange(server_->port(), two);
  size_t first = res.find("HTTP/1.1 200");
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(res.find("HTTP/1.1 200", first + 1), std::string::npos) << res.substr(0, 200);
}

TEST(HttpServerStartTest, BindsLoopbackByDefaultAndRefusesBadAddresses) {
  auto s = HttpServer::Start({});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->url().rfind("http://127.0.0.1:", 0), 0u) << (*s)->url();
  auto bad = HttpServer::Start({.bind = "not-an-address"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not-an-address"), std::string::npos);
  auto taken = HttpServer::Start({.port = (*s)->port()});
  ASSERT_FALSE(taken.ok()) << "port " << (*s)->port() << " bound twice";
  EXPECT_NE(taken.status().message().find(std::to_string((*s)->port())), std::string::npos);
  EXPECT_FALSE(HttpServer::Start({.port = 70000}).ok());
}

TEST(HttpGetTest, RefusesWhatItCannotFetch) {
  EXPECT_FALSE(HttpGet("https://127.0.0.1:1/").ok());
  EXPECT_FALSE(HttpGet("ftp://x").ok());
  EXPECT_FALSE(HttpGet("http://:80/").ok());
  auto refused = HttpGet("http://127.0.0.1:1/api/v1/monitor", 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("127.0.0.1:1"), std::string::npos);
}

}  // namespace
}  // namespace strata::monitor
