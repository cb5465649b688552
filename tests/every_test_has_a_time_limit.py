#!/usr/bin/python3
"""Every registered ctest test carries a TIMEOUT, so a hang fails with its own name instead of
using up CI's time. Registered as the test ctest.EveryTestHasATimeLimit:

    every_test_has_a_time_limit.py CTEST BUILD_DIR
"""
import json
import subprocess
import sys

ctest, build = sys.argv[1], sys.argv[2]
tests = json.loads(subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"], check=True,
                                  capture_output=True, text=True).stdout)["tests"]
# gtest_discover_tests registers "<target>_NOT_BUILT" for a binary this build type does not
# build (the Sanitize pass builds only the unit tests): a placeholder, not a test.
missing = [t["name"] for t in tests
           if not t["name"].endswith("_NOT_BUILT")
           and not any(p["name"] == "TIMEOUT" for p in t.get("properties", []))]
if missing:
    sys.exit("tests without a TIMEOUT: " + ", ".join(missing))
print(f"{len(tests)} tests, every one with a TIMEOUT")
