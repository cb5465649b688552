// Element types of tensors, and bf16 <-> f32 conversion.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <cstring>
#include <string_view>

namespace strata {

enum class DType : uint8_t { kF32, kBF16, kI32, kI64, kU8 };

constexpr size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
  }
  return 0;
}

std::string_view DTypeName(DType t);  // "f32", "bf16", "i32", "i64", "u8"
bool ParseDType(std::string_view name, DType* out);

// bfloat16: the upper 16 bits of an IEEE f32. Conversion rounds to nearest even and keeps
// NaN a NaN (as TensorFlow and oneDNN do).
struct bf16 {
  uint16_t bits = 0;
};

inline bf16 ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline float ToF32(bf16 b) {
  uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T> constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kF32; }
template <> constexpr DType DTypeOf<bf16>() { return DType::kBF16; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kI32; }
template <> constexpr DType DTypeOf<int64_t>() { return DType::kI64; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kU8; }

}  // namespace strata

#pragma GCC visibility pop
