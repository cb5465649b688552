#!/usr/bin/env bash
# Strata as a dependency, checked the way a user meets it (tests/install/CMakeLists.txt runs
# each check as its own ctest test):
#
#   install_test.sh headers BUILD SOURCE CXX VERSION static|shared
#     `cmake --install BUILD --prefix P`, then: every installed header compiles on its own with
#     only -I P/include, and every Strata header it reaches is one installed under P (so no
#     internal header is reachable from the public ones); no internal folder is installed.
#   install_test.sh cmake ...
#     the same install; examples/consumer configures with find_package(Strata 0.1) against P,
#     builds, reads testdata/real/tfx_mnist.tfrecord (1000 records), trains a few steps and its
#     loss goes down; `P/bin/strata --version`, StrataConfigVersion.cmake and strata.pc carry
#     VERSION; no -march reaches the library's sources, the exported target or strata.pc.
#   install_test.sh deb ...
#     cpack builds strata_VERSION_amd64.deb and strata-dev_VERSION_amd64.deb from BUILD; their
#     Depends name installed Debian run-time packages (no -dev) and strata-dev the -dev ones;
#     both unpack (dpkg-deb -x) into a scratch root where `usr/bin/strata devices` runs and the
#     consumer builds through `pkg-config --cflags --libs strata` (strata.pc relocates itself).
set -euo pipefail
check=$1 build=$2 source=$3 cxx=$4 version=$5 linkage=$6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp/home  # the command caches its peak FLOP/s under ~/.cache: keep the user's clean
mkdir -p "$HOME"
data=$source/testdata/real/tfx_mnist.tfrecord

fail() { echo "FAIL: $*" >&2; exit 1; }
install_prefix() {
  cmake --install "$build" --prefix "$1" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
}
# Runs the consumer and checks what it says: the version, 1000 records, a loss that went down.
run_consumer() {
  local out
  out=$("$1" "$data" 1000 2>&1) || { echo "$out"; fail "$1 exited with an error"; }
  echo "$out" | tail -n 6
  grep -qx "strata $version" <<<"$out" || fail "consumer did not print 'strata $version'"
  grep -qx "records: 1000" <<<"$out" || fail "consumer did not read the 1000 records"
  grep -q "^loss: " <<<"$out" || fail "consumer did not train"
}

case $check in
headers)
  p=$tmp/prefix
  install_prefix "$p"
  cd "$p/include"
  mapfile -t headers < <(find strata -name '*.h' | sort)
  echo "${#headers[@]} installed headers"
  [ "${#headers[@]}" -ge 30 ] || fail "only ${#headers[@]} headers installed"
  for want in strata/keras/model.h strata/data/dataset.h strata/data/sources.h strata/record/record_reader.h \
              strata/distribute/strategy.h strata/core/version.h; do
    [ -f "$want" ] || fail "$want is not installed"
  done
  internal=$(find strata -path 'strata/image' -o -path 'strata/monitor' -o -path 'strata/backend/cpu' \
                 -o -path 'strata/backend/reference' -o -name '*_internal.h' -o -name 'builtin_specs.h')
  [ -z "$internal" ] || fail "internal headers installed: $internal"
  grep -qx "#define STRATA_VERSION \"$version\"" strata/core/version.h || fail "version.h does not say $version"
  # Each installed header marks its declarations as the shared library's exports (the rest of
  # the library is compiled -fvisibility=hidden): push at the top, pop at the end.
  for h in "${headers[@]}"; do
    [ "$h" = strata/core/version.h ] && continue
    grep -qx '#pragma GCC visibility push(default).*' "$h" && [ "$(tail -n 1 "$h")" = '#pragma GCC visibility pop' ] ||
      fail "$h does not wrap its declarations in #pragma GCC visibility push(default) ... pop"
  done
  for h in "${headers[@]}"; do
    # -H lists every header the compiler opens: a Strata one must come from this prefix.
    if ! echo "#include \"$h\"" | "$cxx" -std=c++20 -fsyntax-only -H -I "$p/include" -x c++ - 2>"$tmp/h.log"; then
      cat "$tmp/h.log"; fail "$h does not compile on its own against the installed headers"
    fi
    outside=$(grep -E '^\.+ ' "$tmp/h.log" | sed -E 's/^\.+ //' | grep '/strata/' | grep -v "^$p/include/" || true)
    [ -z "$outside" ] || fail "$h reaches headers outside the prefix: $outside"
  done
  echo "every installed header compiles alone against $p/include"
  ;;
cmake)
  p=$tmp/prefix
  install_prefix "$p"
  [ "$("$p/bin/strata" --version)" = "strata $version" ] || fail "strata --version is not 'strata $version'"
  grep -q "set(PACKAGE_VERSION \"$version\")" "$p"/lib*/cmake/Strata/StrataConfigVersion.cmake ||
    fail "StrataConfigVersion.cmake is not $version"
  if [ "$linkage" = shared ]; then
    so=$(ls "$p"/lib*/libstrata.so.*.* | head -n 1)
    readelf -d "$so" | grep -q "SONAME.*libstrata.so.${version%.*}" || fail "$so has no SONAME libstrata.so.${version%.*}"
    readelf -d "$so" | grep SONAME
    # Hidden: everything not declared in an installed header (strong text symbols; inline
    # functions are weak copies, not the API). Strata names namespaces in lower case and
    # classes and functions in CamelCase, so the first CamelCase part of an exported name is
    # the namespace-scope class or function it belongs to; that name must be declared in an
    # installed header. An internal class (data::WorkerPool, keras::OptimizerState, a graph
    # pass) or a folder with no installed header (image/, monitor/, backend/cpu/) fails this.
    nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | c++filt >"$tmp/exported.txt"
    echo "$(wc -l <"$tmp/exported.txt") functions exported by $(basename "$so")"
    grep -c '^strata::' "$tmp/exported.txt" >/dev/null || fail "$so exports no strata:: function"
    grep -rhoE '\b[A-Z][A-Za-z0-9_]*\b' "$p/include/strata" | sort -u >"$tmp/public_names.txt"
    sed -nE 's/^strata::(([a-z_][a-z0-9_]*::)*)([A-Z][A-Za-z0-9_]*).*/\3/p' "$tmp/exported.txt" | sort -u >"$tmp/exported_names.txt"
    leaked=$(comm -23 "$tmp/exported_names.txt" "$tmp/public_names.txt" | head -n 10 | tr '\n' ' ')
    [ -z "$leaked" ] || fail "$so exports names no installed header declares: $leaked"
    for internal in 'strata::data::WorkerPool::' 'strata::keras::OptimizerState::' 'strata::image::' \
                    'strata::monitor::' 'strata::backend::cpu::'; do
      ! grep -q "^$internal" "$tmp/exported.txt" || fail "$so exports $internal: $(grep -m1 "^$internal" "$tmp/exported.txt")"
    done
    echo "$(wc -l <"$tmp/exported_names.txt") exported names, each declared in an installed header"
    grep -q '^strata::keras::Model::fit(' "$tmp/exported.txt" || fail "$so does not export keras::Model::fit"
    grep -q '^strata::data::TFRecordDataset(' "$tmp/exported.txt" || fail "$so does not export data::TFRecordDataset"
  else
    ls "$p"/lib*/libstrata.a >/dev/null || fail "libstrata.a is not installed"
  fi
  # Portability: the run-time ISA dispatch is the only way to AVX-512; nothing built or
  # exported carries -march (a consumer inheriting -march=native would not run elsewhere).
  grep -q '"file": ".*/src/strata/' "$build/compile_commands.json" || fail "no library sources in compile_commands.json"
  ! grep -q -- '-march' "$build/compile_commands.json" || fail "a -march flag is in the build's compile commands"
  ! grep -rq -- '-march' "$p"/lib*/cmake/Strata "$p"/lib*/pkgconfig || fail "-march leaks into the installed CMake or pkg-config files"
  cmake -S "$source/examples/consumer" -B "$tmp/consumer" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_PREFIX_PATH="$p" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "consumer configure"; }
  grep -q "Strata" "$tmp/consumer/CMakeCache.txt" || fail "find_package(Strata) left no trace"
  grep -q "^Strata_DIR:PATH=$p/" "$tmp/consumer/CMakeCache.txt" || fail "Strata was not found under $p"
  cmake --build "$tmp/consumer" -j 2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "consumer build"; }
  run_consumer "$tmp/consumer/strata_consumer"
  if [ "$linkage" = shared ]; then
    ldd "$tmp/consumer/strata_consumer" | grep -q "libstrata.so.${version%.*} => $p/" ||
      fail "the consumer does not load libstrata.so.${version%.*} from $p"
  fi
  # A version outside 0.1.x is refused.
  mkdir -p "$tmp/wrong"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(w CXX)\nfind_package(Strata 0.2 REQUIRED)\n' >"$tmp/wrong/CMakeLists.txt"
  if cmake -S "$tmp/wrong" -B "$tmp/wrong/b" -DCMAKE_PREFIX_PATH="$p" >"$tmp/wrong.log" 2>&1; then
    fail "find_package(Strata 0.2) accepted version $version"
  fi
  grep -q "$version" "$tmp/wrong.log" || { cat "$tmp/wrong.log"; fail "the refusal does not name $version"; }
  ;;
deb)
  cpack --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; fail "cpack"; }
  arch=$(dpkg --print-architecture)
  deb=$tmp/pkg/strata_${version}_${arch}.deb dev=$tmp/pkg/strata-dev_${version}_${arch}.deb
  [ -f "$deb" ] && [ -f "$dev" ] || { ls "$tmp/pkg"; fail "no strata_${version}_${arch}.deb and strata-dev_${version}_${arch}.deb"; }
  depends=$(dpkg-deb -f "$deb" Depends)
  echo "strata Depends: $depends"
  echo "strata-dev Depends: $(dpkg-deb -f "$dev" Depends)"
  ! grep -q -- '-dev' <<<"$depends" || fail "strata's Depends names a -dev package"
  # The run-time package of each library the command links, as dpkg knows it here.
  for lib in libdnnl.so libmpi.so libturbojpeg.so libspng.so libcurl.so libcrypto.so libz.so; do
    file=$(ldd "$build/tools/strata/strata" | awk -v l="$lib" 'index($1, l) == 1 {print $3; exit}')
    [ -n "$file" ] || fail "the command does not link $lib"
    real=$(readlink -f "$file")  # usrmerge: dpkg may know it as /lib/... instead of /usr/lib/...
    pkg=$( (dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}") | head -n 1 | cut -d: -f1)
    grep -qE "(^|, )$pkg( |,|$)" <<<"$depends" || fail "Depends lacks $pkg (for $lib)"
  done
  # Every package named is one Debian knows (installed here, where the package was built).
  for pkg in $(sed -E 's/\([^)]*\)//g; s/[|,]/ /g' <<<"$depends"); do
    dpkg-query -W "$pkg" >/dev/null 2>&1 || fail "Depends names $pkg, which dpkg does not know"
  done
  grep -q "strata (= $version)" <<<"$(dpkg-deb -f "$dev" Depends)" || fail "strata-dev does not depend on strata (= $version)"
  # What `apt-get install ./strata_*.deb ./strata-dev_*.deb` would do, simulated (no root, no
  # change): apt resolves every Depends against the archive it knows, or refuses.
  apt-get install -s "$deb" "$dev" >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log"; fail "apt-get cannot install the packages"; }
  grep -q "^Inst strata " "$tmp/apt.log" && grep -q "^Inst strata-dev " "$tmp/apt.log" ||
    { cat "$tmp/apt.log"; fail "apt-get would not install strata and strata-dev"; }
  dpkg-deb -c "$dev" >"$tmp/dev.list"
  dpkg-deb -c "$deb" >"$tmp/deb.list"
  grep -q './usr/include/strata/keras/model.h' "$tmp/dev.list" || fail "strata-dev has no headers"
  grep -q './usr/lib/cmake/Strata/StrataConfig.cmake' "$tmp/dev.list" || fail "strata-dev has no StrataConfig.cmake"
  grep -q './usr/lib/pkgconfig/strata.pc' "$tmp/dev.list" || fail "strata-dev has no strata.pc"
  grep -q './usr/bin/strata$' "$tmp/deb.list" || fail "strata has no /usr/bin/strata"
  grep -q './usr/share/doc/strata/install.md' "$tmp/deb.list" || fail "strata has no docs"
  ! grep -q './usr/include/' "$tmp/deb.list" || fail "the run-time package holds headers"
  root=$tmp/root
  dpkg-deb -x "$deb" "$root"
  dpkg-deb -x "$dev" "$root"
  out=$("$root/usr/bin/strata" devices) || fail "strata devices from the package failed"
  echo "$out" | head -n 4
  grep -q "^cores" <<<"$out" || fail "strata devices printed no cores line"
  [ "$("$root/usr/bin/strata" --version)" = "strata $version" ] || fail "the packaged strata --version is not $version"
  export PKG_CONFIG_PATH=$root/usr/lib/pkgconfig
  [ "$(pkg-config --modversion strata)" = "$version" ] || fail "strata.pc is not version $version"
  flags=$(pkg-config --cflags --libs strata)
  echo "pkg-config --cflags --libs strata: $flags"
  grep -q -- "-I$root/usr/include" <<<"$(pkg-config --cflags strata | sed 's|/lib/pkgconfig/\.\./\.\./|/|')" ||
    fail "strata.pc does not point into the unpacked tree"
  # shellcheck disable=SC2086  # the flags are words
  "$cxx" -std=c++20 -O1 "$source/examples/consumer/main.cpp" -o "$tmp/consumer" $flags -Wl,-rpath,"$root/usr/lib" ||
    fail "the consumer does not build with pkg-config --cflags --libs strata"
  run_consumer "$tmp/consumer"
  ;;
*)
  fail "unknown check '$check' (headers, cmake or deb)"
  ;;
esac
echo "PASS install_test.sh $check"
