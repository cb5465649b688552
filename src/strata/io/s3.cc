#include "strata/io/s3.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

#include "strata/io/http.h"
#include "strata/io/responses.h"

namespace strata::io {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 15];
  }
  return s;
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string Trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r");
  const size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The [profile] section of an AWS credentials file.
void ReadCredentialsFile(S3Config* c) {
  std::string path = Env("AWS_SHARED_CREDENTIALS_FILE");
  if (path.empty() && !Env("HOME").empty()) path = Env("HOME") + "/.aws/credentials";
  std::string profile = Env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  std::ifstream in(path);
  std::string line;
  bool in_profile = false;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      in_profile = Trim(line.substr(1, line.find(']') - 1)) == profile;
      continue;
    }
    const size_t eq = line.find('=');
    if (!in_profile || eq == std::string::npos) continue;
    const std::string k = Trim(line.substr(0, eq)), v = Trim(line.substr(eq + 1));
    if (k == "aws_access_key_id") c->access_key = v;
    if (k == "aws_secret_access_key") c->secret_key = v;
    if (k == "aws_session_token") c->session_token = v;
  }
}

std::string AmzDateNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

struct S3Location {
  std::string bucket, key;
};

Result<S3Location> ParseS3(const std::string& path) {
  std::string_view rest(path);
  rest.remove_prefix(5);  // "s3://"
  const size_t slash = rest.find('/');
  S3Location loc{std::string(rest.substr(0, slash)), slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1))};
  if (loc.bucket.empty()) return InvalidArgument("'" + path + "' names no bucket (expected s3://bucket/key)");
  return loc;
}

class S3FileSystem : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path) override {
    STRATA_ASSIGN_OR_RETURN(S3Location loc, ParseS3(path));
    if (loc.key.empty()) return InvalidArgument("'" + path + "' names a bucket, not an object");
    const S3Config c = S3Config::FromEnv();
    Target t = TargetFor(c, loc.bucket, loc.key, {});
    return OpenHttpFile(path, t.url, Signer(c, t), HttpOptions::FromEnv());
  }

  Result<std::vector<std::string>> Glob(const std::string& pattern) override {
    STRATA_ASSIGN_OR_RETURN(S3Location loc, ParseS3(pattern));
    const S3Config c = S3Config::FromEnv();
    const HttpOptions o = HttpOptions::FromEnv();
    const std::string prefix = LiteralPrefix(loc.key);
    std::vector<std::string> names;
    std::string token;
    do {
      std::vector<std::pair<std::string, std::string>> query = {{"list-type", "2"}, {"prefix", prefix}};
      if (!token.empty()) query.emplace_back("continuation-token", token);
      Target t = TargetFor(c, loc.bucket, "", query);
      HttpRequest req{.url = t.url};
      STRATA_ASSIGN_OR_RETURN(HttpResponse r, Fetch(req, o, Signer(c, t)));
      if (r.status != 200) return HttpError(req, r, "listing " + pattern);
      ListingPage page = ParseS3ListObjectsV2(r.body);
      for (const std::string& key : page.names)
        if (GlobMatch(loc.key, key)) names.push_back("s3://" + loc.bucket + "/" + key);
      // A server that hands back the token it was given would be listed forever.
      if (!page.next_token.empty() && page.next_token == token)
        return Corruption("listing " + pattern + ": the server returned continuation token '" + token +
                          "' twice (" + t.url + ")");
      token = std::move(page.next_token);
    } while (!token.empty());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  struct Target {
    std::string url, host, canonical_uri;
    std::vector<std::pair<std::string, std::string>> query;
  };

  static Target TargetFor(const S3Config& c, const std::string& bucket, const std::string& key,
                          std::vector<std::pair<std::string, std::string>> query) {
    Target t;
    std::string scheme = "https";
    if (c.endpoint.empty()) {
      t.host = bucket + ".s3." + c.region + ".amazonaws.com";
      t.canonical_uri = "/" + UriEncode(key, true);
    } else {
      std::string_view e(c.endpoint);
      if (const size_t p = e.find("://"); p != std::string_view::npos) {
        scheme = std::string(e.substr(0, p));
        e.remove_prefix(p + 3);
      }
      while (!e.empty() && e.back() == '/') e.remove_suffix(1);
      const size_t slash = e.find('/');
      t.host = std::string(e.substr(0, slash));
      const std::string base = slash == std::string_view::npos ? "" : std::string(e.substr(slash));
      t.canonical_uri = base + "/" + UriEncode(bucket, false) + (key.empty() && !query.empty() ? "" : "/" + UriEncode(key, true));
    }
    if (t.canonical_uri.empty()) t.canonical_uri = "/";
    t.url = scheme + "://" + t.host + t.canonical_uri;
    std::sort(query.begin(), query.end());
    for (size_t i = 0; i < query.size(); ++i)
      t.url += (i ? "&" : "?") + UriEncode(query[i].first, false) + "=" + UriEncode(query[i].second, false);
    t.query = std::move(query);
    return t;
  }

  static Authorizer Signer(const S3Config& c, const Target& t) {
    if (c.access_key.empty()) return {};  // anonymous: public buckets
    return [c, t](HttpRequest* req) -> Status {
      SigV4Request s{.method = req->method,
                     .host = t.host,
                     .canonical_uri = t.canonical_uri,
                     .query = t.query,
                     .payload_sha256 = Sha256Hex(""),
                     .amz_date = AmzDateNow(),
                     .region = c.region,
                     .access_key = c.access_key,
                     .secret_key = c.secret_key,
                     .session_token = c.session_token};
      const SigV4Signature sig = SignV4(s);
      req->headers.emplace_back("x-amz-date", s.amz_date);
      req->headers.emplace_back("x-amz-content-sha256", s.payload_sha256);
      if (!c.session_token.empty()) req->headers.emplace_back("x-amz-security-token", c.session_token);
      req->headers.emplace_back("Authorization", sig.authorization);
      return Status::OK();
    };
  }
};

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr);
  return Hex(out, len);
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || (c == '/' && keep_slash)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

SigV4Signature SignV4(const SigV4Request& r) {
  SigV4Signature s;
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& [k, v] : r.query) q.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(q.begin(), q.end());
  std::string query;
  for (size_t i = 0; i < q.size(); ++i) query += (i ? "&" : "") + q[i].first + "=" + q[i].second;
  std::string headers = "host:" + r.host + "\nx-amz-content-sha256:" + r.payload_sha256 + "\nx-amz-date:" + r.amz_date + "\n";
  s.signed_headers = "host;x-amz-content-sha256;x-amz-date";
  if (!r.session_token.empty()) {
    headers += "x-amz-security-token:" + r.session_token + "\n";
    s.signed_headers += ";x-amz-security-token";
  }
  s.canonical_request =
      r.method + "\n" + r.canonical_uri + "\n" + query + "\n" + headers + "\n" + s.signed_headers + "\n" + r.payload_sha256;
  const std::string day = r.amz_date.substr(0, 8);
  const std::string scope = day + "/" + r.region + "/" + r.service + "/aws4_request";
  s.string_to_sign = "AWS4-HMAC-SHA256\n" + r.amz_date + "\n" + scope + "\n" + Sha256Hex(s.canonical_request);
  const std::string key = Hmac(Hmac(Hmac(Hmac("AWS4" + r.secret_key, day), r.region), r.service), "aws4_request");
  const std::string sig = Hmac(key, s.string_to_sign);
  s.signature = Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
  s.authorization = "AWS4-HMAC-SHA256 Credential=" + r.access_key + "/" + scope + ", SignedHeaders=" + s.signed_headers +
                    ", Signature=" + s.signature;
  return s;
}

S3Config S3Config::FromEnv() {
  S3Config c;
  c.access_key = Env("AWS_ACCESS_KEY_ID");
  c.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  c.session_token = Env("AWS_SESSION_TOKEN");
  if (c.access_key.empty()) ReadCredentialsFile(&c);
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"})
    if (!Env(name).empty()) {
      c.region = Env(name);
      break;
    }
  for (const char* name : {"STRATA_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"})
    if (!Env(name).empty()) {
      c.endpoint = Env(name);
      break;
    }
  return c;
}

std::unique_ptr<FileSystem> NewS3FileSystem() { return std::make_unique<S3FileSystem>(); }

}  // namespace strata::io
