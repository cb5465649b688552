// CRC32C (Castagnoli, polynomial 0x1EDC6F41 reflected = 0x82F63B78), as TFRecord uses it.
//
// Extend() picks its implementation once, at run time: the SSE4.2 `crc32` instruction over
// three interleaved streams (the instruction has a 3-cycle latency and a 1-cycle
// throughput, so three independent chains keep it busy; the partial CRCs are joined with a
// precomputed "shift by N zero bytes" table), or a portable slicing-by-8 table loop.
// Both give identical results; tests compare them and check the RFC 3720 vectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata::crc32c {

// The CRC of concat(A, data) where init_crc is the CRC of some string A.
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);
inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::string_view s) { return Extend(0, s.data(), s.size()); }

// The implementations behind Extend(), exposed for tests and benchmarks.
uint32_t ExtendPortable(uint32_t init_crc, const char* data, size_t n);
// Only call when HardwareAccelerated() is true.
uint32_t ExtendSse42(uint32_t init_crc, const char* data, size_t n);
// True when Extend() uses the SSE4.2 instruction on this host.
bool HardwareAccelerated();

// TFRecord stores masked CRCs: computing the CRC of a string that itself contains CRCs is
// weak, so the stored value is rotated and offset.
constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace strata::crc32c
