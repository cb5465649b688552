// AWS Signature V4 checked against botocore (tools/sigv4_oracle.py: the AWS SDK's own
// signer) with fixed credentials and a fixed timestamp: canonical request, string to sign,
// signature and Authorization header must be identical, for object reads and listings,
// path-style and virtual-hosted, with and without a session token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "strata/io/s3.h"

namespace strata::io {
namespace {

struct Case {
  std::string scheme, host, uri;
  std::vector<std::pair<std::string, std::string>> query;
  std::string region, token;
};

std::string Url(const Case& c) {
  std::string url = c.scheme + "://" + c.host + c.uri;
  auto q = c.query;
  std::sort(q.begin(), q.end());
  for (size_t i = 0; i < q.size(); ++i) url += (i ? "&" : "?") + UriEncode(q[i].first, false) + "=" + UriEncode(q[i].second, false);
  return url;
}

TEST(SigV4, EqualsBotocoreForReadsAndListings) {
  const std::vector<Case> cases = {
      {"http", "127.0.0.1:4568", "/bkt/data/train-00000-of-00016.tfrecord", {}, "us-east-1", ""},
      {"http", "127.0.0.1:4568", "/bkt/" + UriEncode("odd key/with space+plus=é.tfrecord", true), {}, "us-east-1", ""},
      {"https", "bkt.s3.eu-west-1.amazonaws.com", "/shard-7.tfrecord", {}, "eu-west-1", "FwoGZXIvYXdzE/+token=="},
      {"http", "127.0.0.1:4568", "/bkt", {{"list-type", "2"}, {"prefix", "data/real/tfx_"}}, "us-east-1", ""},
      {"https",
       "bkt.s3.ap-southeast-2.amazonaws.com",
       "/",
       {{"prefix", "a b/c"}, {"list-type", "2"}, {"continuation-token", "1/ab+c=="}},
       "ap-southeast-2",
       ""},
  };
  const std::string date = "20261202T210000Z";
  nlohmann::json in = nlohmann::json::array();
  for (const auto& c : cases)
    in.push_back({{"method", "GET"}, {"url", Url(c)}, {"region", c.region}, {"access_key", "AKIDEXAMPLE"},
                  {"secret_key", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, {"session_token", c.token},
                  {"amz_date", date}});
  char tmpl[] = "/tmp/strata-sigv4-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(tmpl) << in.dump();
  const std::string cmd = "python3 " + std::string(STRATA_SOURCE_DIR) + "/tools/sigv4_oracle.py < " + tmpl;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  const int rc = ::pclose(p);
  std::remove(tmpl);
  ASSERT_EQ(rc, 0) << "tools/sigv4_oracle.py failed (needs python3-botocore, installed by scripts/deps.sh)";
  const nlohmann::json want = nlohmann::json::parse(text);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const SigV4Signature got = SignV4({.method = "GET",
                                       .host = c.host,
                                       .canonical_uri = c.uri,
                                       .query = c.query,
                                       .payload_sha256 = Sha256Hex(""),
                                       .amz_date = date,
                                       .region = c.region,
                                       .access_key = "AKIDEXAMPLE",
                                       .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                       .session_token = c.token});
    EXPECT_EQ(got.canonical_request, want[i]["canonical_request"].get<std::string>()) << Url(c);
    EXPECT_EQ(got.string_to_sign, want[i]["string_to_sign"].get<std::string>()) << Url(c);
    EXPECT_EQ(got.signature, want[i]["signature"].get<std::string>()) << Url(c);
    EXPECT_EQ(got.authorization, want[i]["authorization"].get<std::string>()) << Url(c);
  }
}

TEST(SigV4, Sha256AndUriEncodingFollowTheSpec) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // FIPS 180-2
  EXPECT_EQ(UriEncode("a b/c~d_e-f.g", true), "a%20b/c~d_e-f.g");
  EXPECT_EQ(UriEncode("a b/c+=", false), "a%20b%2Fc%2B%3D");
  EXPECT_EQ(UriEncode("\xc3\xa9", false), "%C3%A9");
}

TEST(S3Config, CredentialsFileProfileWhenTheEnvironmentHasNone) {
  char tmpl[] = "/tmp/strata-aws-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(tmpl) << "[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n\n"
                         "# a comment\n[train]\naws_access_key_id=TRAINKEY\naws_secret_access_key = train/secret+\n"
                         "aws_session_token = tok\n";
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("AWS_SESSION_TOKEN");
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", tmpl, 1);
  ::setenv("AWS_PROFILE", "train", 1);
  ::setenv("AWS_REGION", "eu-central-1", 1);
  S3Config c = S3Config::FromEnv();
  EXPECT_EQ(c.access_key, "TRAINKEY");
  EXPECT_EQ(c.secret_key, "train/secret+");
  EXPECT_EQ(c.session_token, "tok");
  EXPECT_EQ(c.region, "eu-central-1");
  ::unsetenv("AWS_PROFILE");
  c = S3Config::FromEnv();
  EXPECT_EQ(c.access_key, "DEF");
  EXPECT_EQ(c.session_token, "");
  ::setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);  // the environment wins over the file
  ::setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
  c = S3Config::FromEnv();
  EXPECT_EQ(c.access_key, "ENVKEY");
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("AWS_SHARED_CREDENTIALS_FILE");
  ::unsetenv("AWS_REGION");
  std::remove(tmpl);
}

}  // namespace
}  // namespace strata::io
