#!/usr/bin/env python3
"""Uploads every file of DIR to s3://BUCKET/PREFIX/<name> at ENDPOINT with boto3 (an
independent S3 client), for the s3:// tests. Usage: s3_upload.py ENDPOINT BUCKET PREFIX DIR"""
import os
import sys

import boto3
from botocore.config import Config

endpoint, bucket, prefix, folder = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                  region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), "rb") as f:
        s3.put_object(Bucket=bucket, Key=prefix + "/" + name, Body=f.read())
print(len(os.listdir(folder)))
