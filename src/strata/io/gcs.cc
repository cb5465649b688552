#include "strata/io/gcs.h"

#include <algorithm>
#include <cstdlib>

#include "strata/io/http.h"
#include "strata/io/responses.h"
#include "strata/io/s3.h"  // UriEncode

namespace strata::io {
namespace {

std::string Endpoint() {
  const char* e = std::getenv("STRATA_GCS_ENDPOINT");
  std::string s = (e && *e) ? e : "https://storage.googleapis.com";
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

Authorizer Bearer() {
  const char* t = std::getenv("GOOGLE_OAUTH_ACCESS_TOKEN");
  if (!t || !*t) return {};  // anonymous: public buckets
  const std::string token = t;
  return [token](HttpRequest* req) {
    req->headers.emplace_back("Authorization", "Bearer " + token);
    return Status::OK();
  };
}

class GcsFileSystem : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path) override {
    STRATA_ASSIGN_OR_RETURN(auto loc, Parse(path));
    if (loc.second.empty()) return InvalidArgument("'" + path + "' names a bucket, not an object");
    const std::string url = Endpoint() + "/" + UriEncode(loc.first, false) + "/" + UriEncode(loc.second, true);
    return OpenHttpFile(path, url, Bearer(), HttpOptions::FromEnv());
  }

  Result<std::vector<std::string>> Glob(const std::string& pattern) override {
    STRATA_ASSIGN_OR_RETURN(auto loc, Parse(pattern));
    const auto& [bucket, key_pattern] = loc;
    const HttpOptions o = HttpOptions::FromEnv();
    const Authorizer auth = Bearer();
    std::vector<std::string> names;
    std::string token;
    do {
      std::string url = Endpoint() + "/storage/v1/b/" + UriEncode(bucket, false) +
                        "/o?fields=items(name),nextPageToken&prefix=" + UriEncode(LiteralPrefix(key_pattern), false);
      if (!token.empty()) url += "&pageToken=" + UriEncode(token, false);
      HttpRequest req{.url = url};
      STRATA_ASSIGN_OR_RETURN(HttpResponse r, Fetch(req, o, auth));
      if (r.status != 200) return HttpError(req, r, "listing " + pattern);
      STRATA_ASSIGN_OR_RETURN(ListingPage page, ParseGcsListing(r.body, "of " + pattern + " (" + url + ")"));
      for (const std::string& name : page.names)
        if (GlobMatch(key_pattern, name)) names.push_back("gs://" + bucket + "/" + name);
      // A server that hands back the token it was given would be listed forever.
      if (!page.next_token.empty() && page.next_token == token)
        return Corruption("listing " + pattern + ": the server returned page token '" + token + "' twice (" + url + ")");
      token = std::move(page.next_token);
    } while (!token.empty());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  static Result<std::pair<std::string, std::string>> Parse(const std::string& path) {
    std::string_view rest(path);
    rest.remove_prefix(5);  // "gs://"
    const size_t slash = rest.find('/');
    std::pair<std::string, std::string> loc{std::string(rest.substr(0, slash)),
                                            slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1))};
    if (loc.first.empty()) return InvalidArgument("'" + path + "' names no bucket (expected gs://bucket/object)");
    return loc;
  }
};

}  // namespace

std::unique_ptr<FileSystem> NewGcsFileSystem() { return std::make_unique<GcsFileSystem>(); }

}  // namespace strata::io
