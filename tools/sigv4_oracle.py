#!/usr/bin/env python3
"""AWS Signature V4 by botocore (the AWS SDK's own signer), the oracle for io/s3.cc's SignV4.

Reads a JSON list of requests on stdin: {method, url, region, access_key, secret_key,
session_token, amz_date}; writes a JSON list of {canonical_request, string_to_sign,
signature, authorization}. The timestamp is fixed by the caller, so the output is exact."""
import json
import sys

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

out = []
for case in json.load(sys.stdin):
    creds = Credentials(case["access_key"], case["secret_key"], case.get("session_token") or None)
    auth = S3SigV4Auth(creds, "s3", case["region"])
    req = AWSRequest(method=case["method"], url=case["url"], data=b"")
    req.context["timestamp"] = case["amz_date"]
    auth._modify_request_before_signing(req)  # X-Amz-Date, X-Amz-Content-SHA256, token
    canonical = auth.canonical_request(req)
    to_sign = auth.string_to_sign(req, canonical)
    signature = auth.signature(to_sign, req)
    # (add_auth is not called: it would stamp the clock's time)
    out.append({"canonical_request": canonical, "string_to_sign": to_sign, "signature": signature,
                "authorization": "AWS4-HMAC-SHA256 Credential=%s, SignedHeaders=%s, Signature=%s" % (
                    auth.scope(req), auth.signed_headers(auth.headers_to_sign(req)), signature)})
json.dump(out, sys.stdout, indent=1)
