#include "strata/record/crc32c.h"

#include <array>
#include <cstring>

#include "strata/core/cpu.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace strata::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

// Slicing-by-8 tables: kTables[k][b] is the CRC state after byte b followed by k zeros.
struct Tables {
  uint32_t t[8][256];
};

constexpr Tables MakeTables() {
  Tables tb{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    tb.t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) tb.t[k][b] = (tb.t[k - 1][b] >> 8) ^ tb.t[0][tb.t[k - 1][b] & 0xff];
  return tb;
}
constexpr Tables kTables = MakeTables();

inline uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian host (x86-64, aarch64)
}

// The raw (un-inverted) state update over n bytes, portable.
uint32_t RawPortable(uint32_t crc, const char* p, size_t n) {
  const auto& t = kTables.t;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    crc = t[0][(crc ^ static_cast<uint8_t>(*p++)) & 0xff] ^ (crc >> 8);
    --n;
  }
  while (n >= 8) {
    uint32_t lo = Load32(p) ^ crc, hi = Load32(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = t[0][(crc ^ static_cast<uint8_t>(*p++)) & 0xff] ^ (crc >> 8);
  return crc;
}

// ---- joining interleaved streams ------------------------------------------------------
// Processing n zero bytes is a linear map on the 32-bit state. ZeroShift holds it as four
// byte tables (apply = 4 lookups), built once by repeated squaring of the one-zero-bit
// operator (a 32x32 matrix over GF(2), one column per uint32_t).
using Matrix = std::array<uint32_t, 32>;

uint32_t MatTimes(const Matrix& m, uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; v != 0; ++i, v >>= 1)
    if (v & 1) r ^= m[i];
  return r;
}
Matrix MatSquare(const Matrix& m) {
  Matrix r{};
  for (int i = 0; i < 32; ++i) r[i] = MatTimes(m, m[i]);
  return r;
}

struct ZeroShift {
  uint32_t t[4][256];
  explicit ZeroShift(size_t nbytes) {
    Matrix op{};  // one zero bit
    op[0] = kPoly;
    for (int i = 1; i < 32; ++i) op[i] = 1u << (i - 1);
    Matrix acc{};  // identity
    for (int i = 0; i < 32; ++i) acc[i] = 1u << i;
    // op^(8 * nbytes) by square-and-multiply.
    size_t bits = nbytes * 8;
    Matrix pw = op;
    while (bits != 0) {
      if (bits & 1) {
        Matrix r{};
        for (int i = 0; i < 32; ++i) r[i] = MatTimes(pw, acc[i]);
        acc = r;
      }
      bits >>= 1;
      if (bits) pw = MatSquare(pw);
    }
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) t[k][b] = MatTimes(acc, b << (8 * k));
  }
  uint32_t Apply(uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

constexpr size_t kLongBlock = 8192;  // bytes per stream per round, large inputs
constexpr size_t kShortBlock = 256;  // bytes per stream per round, the rest

const ZeroShift& LongShift() {
  static const ZeroShift s(kLongBlock);
  return s;
}
const ZeroShift& ShortShift() {
  static const ZeroShift s(kShortBlock);
  return s;
}

#if defined(__x86_64__)
// Three independent chains over three adjacent blocks of `block` bytes, joined by shifting.
__attribute__((target("sse4.2"))) inline void Sse42Rounds(uint64_t& c0, const char*& p, size_t& n, size_t block,
                                                          const ZeroShift& shift) {
  while (n >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    const char* end = p + block;
    while (p < end) {
      uint64_t a, b, d;
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + block, 8);
      std::memcpy(&d, p + 2 * block, 8);
      c0 = _mm_crc32_u64(c0, a);
      c1 = _mm_crc32_u64(c1, b);
      c2 = _mm_crc32_u64(c2, d);
      p += 8;
    }
    c0 = shift.Apply(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    c0 = shift.Apply(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c2);
    p += 2 * block;
    n -= 3 * block;
  }
}

__attribute__((target("sse4.2"))) uint32_t RawSse42(uint32_t crc, const char* p, size_t n) {
  uint64_t c0 = crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), static_cast<uint8_t>(*p++));
    --n;
  }
  Sse42Rounds(c0, p, n, kLongBlock, LongShift());
  Sse42Rounds(c0, p, n, kShortBlock, ShortShift());
  while (n >= 8) {
    uint64_t a;
    std::memcpy(&a, p, 8);
    c0 = _mm_crc32_u64(c0, a);
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), static_cast<uint8_t>(*p++));
  return static_cast<uint32_t>(c0);
}
#endif

bool DetectHardware() {
#if defined(__x86_64__)
  if (!HostIsa().sse42) return false;
  LongShift();  // build the tables before any hot loop needs them
  ShortShift();
  return true;
#else
  return false;
#endif
}

const bool kHardware = DetectHardware();

}  // namespace

uint32_t ExtendPortable(uint32_t init_crc, const char* data, size_t n) {
  return ~RawPortable(~init_crc, data, n);
}

uint32_t ExtendSse42(uint32_t init_crc, const char* data, size_t n) {
#if defined(__x86_64__)
  return ~RawSse42(~init_crc, data, n);
#else
  return ExtendPortable(init_crc, data, n);
#endif
}

bool HardwareAccelerated() { return kHardware; }

uint32_t Extend(uint32_t init_crc, const char* data, size_t n) {
  return kHardware ? ExtendSse42(init_crc, data, n) : ExtendPortable(init_crc, data, n);
}

}  // namespace strata::crc32c
