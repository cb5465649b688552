#!/usr/bin/env python3
"""A loopback HTTP server for Strata's remote-data tests (Python stdlib only).

It is a fault injector and a stand-in for the GCS JSON API, not a reference: nginx is the
HTTP reference and s3rver the S3 one (tests/e2e/remote_*_test.cc).

  --root DIR            serve DIR's files: GET/HEAD with Range (206 + Content-Range), keep-alive
  --fail-503 N          answer the first N GETs with 503 Service Unavailable
  --drop-mid-body N     for the first N GETs send the headers and half the body, then close
  --stall-mid-body N    for the first N GETs send the headers and the first 1,000 bytes of the
                        body, then nothing more while keeping the connection open (a stalled
                        server; little enough that the client's speed check fires at once)
  --no-range            ignore Range headers: 200 and the whole file (servers that do)
  --gcs BUCKET          also answer GET /storage/v1/b/BUCKET/o?prefix=&pageToken= (JSON, two
                        items a page, so paging is exercised) and GET /BUCKET/OBJECT (media)
  --token T             with --gcs: require "Authorization: Bearer T" (401 otherwise)
  --port-file F         bind port 0 and write the chosen port to F when ready
"""
import argparse
import json
import os
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = None
STALL_SECONDS = 600  # far longer than any client's stall timeout in the tests
lock = threading.Lock()
faults = {"503": 0, "drop": 0, "stall": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_plain(self, status, body, ctype="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        if args.gcs:
            if args.token and self.headers.get("Authorization") != "Bearer " + args.token:
                return self.send_plain(401, b'{"error": {"code": 401, "message": "Anonymous caller"}}', "application/json")
            list_path = "/storage/v1/b/%s/o" % args.gcs
            if path == list_path:
                return self.list_objects(urllib.parse.parse_qs(url.query))
            if not path.startswith("/%s/" % args.gcs):
                return self.send_plain(404, b"No such bucket")
            path = path[len(args.gcs) + 1:]
        with lock:
            if faults["503"] < args.fail_503:
                faults["503"] += 1
                return self.send_plain(503, b"Service Unavailable (injected)")
            drop = faults["drop"] < args.drop_mid_body
            if drop:
                faults["drop"] += 1
            stall = not drop and faults["stall"] < args.stall_mid_body
            if stall:
                faults["stall"] += 1
        full = os.path.realpath(os.path.join(args.root, path.lstrip("/")))
        if not full.startswith(os.path.realpath(args.root) + os.sep) or not os.path.isfile(full):
            return self.send_plain(404, b"Not Found: " + path.encode())
        size = os.path.getsize(full)
        begin, end, status = 0, size - 1, 200
        rng = None if args.no_range else self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            begin = int(a)
            end = min(int(b), size - 1) if b else size - 1
            if begin >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        length = end - begin + 1
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (begin, end, size))
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(full, "rb") as f:
            f.seek(begin)
            body = f.read(length)
        if stall:  # part of the promised body, then silence on an open connection
            self.wfile.write(body[: min(1000, length // 2)])
            self.wfile.flush()
            time.sleep(STALL_SECONDS)
            self.close_connection = True
            return
        if drop:  # half the promised body, then the connection goes away
            self.wfile.write(body[: length // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)

    def list_objects(self, q):
        prefix = q.get("prefix", [""])[0]
        names = []
        for dirpath, _, files in os.walk(args.root):
            for f in files:
                rel = os.path.relpath(os.path.join(dirpath, f), args.root)
                if rel.startswith(prefix):
                    names.append(rel)
        names.sort()
        start = int(q.get("pageToken", ["0"])[0])
        page = names[start:start + 2]
        out = {"kind": "storage#objects", "items": [{"name": n} for n in page]}
        if start + 2 < len(names):
            out["nextPageToken"] = str(start + 2)
        self.send_plain(200, json.dumps(out).encode(), "application/json")


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--fail-503", type=int, default=0)
    p.add_argument("--drop-mid-body", type=int, default=0)
    p.add_argument("--stall-mid-body", type=int, default=0)
    p.add_argument("--no-range", action="store_true")
    p.add_argument("--gcs", default="")
    p.add_argument("--token", default="")
    p.add_argument("--port-file", required=True)
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
