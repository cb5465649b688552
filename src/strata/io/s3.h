// S3 and S3-compatible stores: s3://bucket/key read by signed range requests, listed with
// ListObjectsV2 (prefix = the pattern up to its first wildcard, then matched like glob).
//
// Credentials, as the AWS tools take them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, else the [AWS_PROFILE or default] section of ~/.aws/credentials
// (AWS_SHARED_CREDENTIALS_FILE); none at all means anonymous requests (public buckets).
// Region: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1. Endpoint: STRATA_S3_ENDPOINT or
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (path-style: endpoint/bucket/key, for MinIO,
// s3rver, Ceph...), else https://bucket.s3.region.amazonaws.com/key.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/io/file_system.h"

namespace strata::io {

// AWS Signature Version 4 over one request (docs/remote.md walks through an example).
struct SigV4Request {
  std::string method = "GET";
  std::string host;            // as sent in the Host header: "bucket.s3.amazonaws.com", "127.0.0.1:4568"
  std::string canonical_uri;   // the URI-encoded path, "/bucket/key%20name"
  std::vector<std::pair<std::string, std::string>> query;  // unencoded; sorted and encoded when signing
  std::string payload_sha256;  // hex SHA-256 of the body (of "" for GET)
  std::string amz_date;        // "20261202T210000Z"
  std::string region = "us-east-1";
  std::string service = "s3";
  std::string access_key, secret_key, session_token;
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;x-amz-content-sha256;x-amz-date[;x-amz-security-token]"
  std::string signature;       // hex
  std::string authorization;   // the Authorization header's value
};

SigV4Signature SignV4(const SigV4Request& r);

// RFC 3986 unreserved characters kept, everything else %XX (upper case); '/' kept when
// `keep_slash` (paths), encoded otherwise (query values).
std::string UriEncode(std::string_view s, bool keep_slash);
std::string Sha256Hex(std::string_view data);

struct S3Config {
  std::string endpoint;  // "" = AWS, virtual-hosted style; else path style under this URL
  std::string region = "us-east-1";
  std::string access_key, secret_key, session_token;  // empty access_key = anonymous
  static S3Config FromEnv();
};

std::unique_ptr<FileSystem> NewS3FileSystem();

}  // namespace strata::io
