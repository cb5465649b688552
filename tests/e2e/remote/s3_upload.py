#!/usr/bin/env python3
"""Uploads objects to an S3-compatible ENDPOINT with boto3 (an independent S3 client), for the
s3:// tests.

  s3_upload.py ENDPOINT BUCKET PREFIX DIR        every file of DIR as PREFIX/<name>
  s3_upload.py ENDPOINT BUCKET PREFIX --many N   N small objects PREFIX/part-00000.tfrecord ...
                                                 (body: the key) and, for every 50th, a
                                                 PREFIX/part-NNNNN.txt beside it, 16 uploads at
                                                 a time; prints "<tfrecords> <txts>"
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config

endpoint, bucket, prefix, what = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                  region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))


def put(key, body):
    s3.put_object(Bucket=bucket, Key=key, Body=body)


if what == "--many":
    n = int(sys.argv[5])
    keys = ["%s/part-%05d.tfrecord" % (prefix, i) for i in range(n)]
    keys += ["%s/part-%05d.txt" % (prefix, i) for i in range(0, n, 50)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: put(k, k.encode()), keys))  # list(): re-raises a failed upload
    print(n, len(keys) - n)
else:
    for name in sorted(os.listdir(what)):
        with open(os.path.join(what, name), "rb") as f:
            put(prefix + "/" + name, f.read())
    print(len(os.listdir(what)))
