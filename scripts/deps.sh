#!/usr/bin/env bash
# Installs the Debian packages Strata needs. Idempotent and silent when all are present.
# Every package is listed once, with the reason it is here.
#
#   scripts/deps.sh --demo    what building and running `strata` needs (make demo)
#   scripts/deps.sh           that, and every tool the tests use (make test)
#   scripts/deps.sh --bench   that, and the benchmarks' peers (make bench)
set -euo pipefail

# Building the library and the command, and running the main job.
PACKAGES=(
  "build-essential      compiler and make"
  "cmake                the build system (3.25 on Debian 12)"
  "pkg-config           locates libraries for CMake"
  "zlib1g-dev           GZIP and ZLIB TFRecord compression"
  "nlohmann-json3-dev   JSON for --json output, model specs and records write"
  "libturbojpeg0-dev    image: JPEG decode (DCT-scaled) and encode through TurboJPEG"
  "libjpeg62-turbo-dev  image: libjpeg-turbo headers behind TurboJPEG"
  "libspng-dev          image: PNG decode/encode (8/16-bit, gray, alpha, palette)"
  "dataset-fashion-mnist  make-records --from fashion-mnist: the IDX files (train's default dataset)"
  "libdnnl-dev          oneDNN: convolution, matmul, pooling, batch-norm kernels"
  "libopenmpi-dev       distribute: MultiWorkerMirroredStrategy all-reduces gradients across hosts over MPI"
  "libboost-dev         monitor: Boost.Beast (header-only HTTP) serves the live page, /metrics, /api/v1/monitor"
  "libcurl4-openssl-dev io: https://, s3://, gs:// reads (range requests, keep-alive, retries) through libcurl"
  "libssl-dev           io: SHA-256 and HMAC for AWS Signature V4 (s3://)"
  "libhdf5-dev          keras/h5_weights.cc: Keras .h5 / .weights.h5 weight files in and out (HDF5 C API)"
)
# The tests' tools and oracles (and the Python module, which make test builds and tests).
TEST_PACKAGES=(
  "clang                libFuzzer targets (make fuzz)"
  "libclang-rt-14-dev   libFuzzer and sanitizer runtimes for clang"
  "libgtest-dev         unit and end-to-end tests (GoogleTest)"
  "libbenchmark-dev     micro-benchmarks in bench/ (Google Benchmark)"
  "libprotobuf-dev      oracle for the Example/Event codec in tests and benchmarks"
  "protobuf-compiler    generates the oracle's protobuf classes"
  "python3-pil          bench/image_pillow_peer.py: the Pillow decode peer"
  "plasma-workspace-wallpapers  bench/image_bench: real photographs cut into benchmark tiles"
  "openmpi-bin          mpirun for multi-worker training and its e2e test"
  "chromium             monitor e2e test: drives the live page headless and keeps a screenshot"
  "nginx-light          remote e2e tests and bench/remote_bench.sh: the reference HTTP server on loopback"
  "python3-boto3        tools/sigv4_oracle.py: botocore signs the same requests as io/s3.cc (unit test); s3 test uploads"
  "nodejs               s3:// e2e test: runs s3rver (npm, pinned in tests/e2e/remote/s3rver/package-lock.json); the npm TFRecord reader oracle"
  "openssl              https:// e2e test: makes its CA and the nginx server certificate"
  "python3-keras-applications  applications structure test: Keras's own model source, traced layer by layer"
  "python3-torchvision  the applications' oracle tests (tests/python/test_applications_{torchvision,convnext,efficientnet_v2,mobilenet_v3,vit}.py): torchvision 0.14's models, weights copied in by name; also bench/applications_vs_torch.sh"
  "python3-torch        applications oracle test: an independent PyTorch forward of the same weights; tests/python/test_optimizers.py: PyTorch's Adam, AdamW, RMSprop check the Keras-rule oracle"
  "python3-h5py         Keras weights tests: write files in Keras's layouts and read Strata's back"
  "python3-onnx         ONNX export test: onnx.checker.check_model accepts every exported file"
  "python3-dev          import strata: the Python module's headers (Debian's Python 3.11)"
  "pybind11-dev         import strata: the C++ <-> Python bindings (python/src/)"
  "python3-numpy        import strata: arrays in and out through the buffer protocol"
  "python3-pytest       the Python module's tests (tests/python/, run by make test)"
  "python3-protobuf     tests/python/test_io.py: protobuf decodes the records strata.io parses (the oracle)"
  "prometheus           monitor tests: promtool check metrics lints /metrics against Prometheus's own rules"
)
if [ "${1:-}" != "--demo" ]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
  # npm installs s3rver for the s3:// test; nodesource's nodejs bundles it, Debian's does not.
  command -v npm >/dev/null 2>&1 || PACKAGES+=("npm                  s3:// e2e test: installs s3rver")
fi
# `scripts/deps.sh --bench` (make bench) adds the benchmarks' peers, which the tests do not need.
if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(
    "libtorch-dev         bench/libtorch_step.cc: LibTorch 1.13, the C++ peer of the training step"
    "libopenblas0-pthread PyTorch's peers at their best: OpenBLAS under torch instead of the reference BLAS"
    "libsimgrid-dev       bench/smpi/: SimGrid 3.32's SMPI (smpicxx, smpirun) runs Strata's all-reduce on simulated clusters"
  )
fi

missing=()
for line in "${PACKAGES[@]}"; do
  pkg=${line%% *}
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
