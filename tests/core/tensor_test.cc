#include "strata/core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

TEST(Tensor, AllocatesAlignedZeroedStorage) {
  Tensor t(DType::kF32, {2, 3, 5});
  EXPECT_EQ(t.num_elements(), 30);
  EXPECT_EQ(t.nbytes(), 120u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{15, 5, 1}));
}

TEST(Tensor, SliceIsAViewSharingStorage) {
  Tensor t(DType::kI32, {4, 3});
  for (int i = 0; i < 12; ++i) t.data<int32_t>()[i] = i;
  auto s = t.Slice(0, 1, 3);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shape(), Shape({2, 3}));
  EXPECT_EQ((s->at<int32_t>({0, 0})), 3);
  s->at<int32_t>({1, 2}) = 100;
  EXPECT_EQ(t.data<int32_t>()[8], 100);
  auto col = t.Slice(1, 2, 3);
  ASSERT_TRUE(col.ok());
  EXPECT_FALSE(col->is_contiguous());
  Tensor c = col->Contiguous();
  EXPECT_EQ(c.data<int32_t>()[0], 2);
  EXPECT_EQ(c.data<int32_t>()[3], 11);
}

TEST(Tensor, SliceOutOfRangeNamesTheShape) {
  Tensor t(DType::kF32, {4, 3});
  auto s = t.Slice(1, 0, 5);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("[4, 3]"), std::string::npos);
}

TEST(Tensor, PermuteThenContiguousTransposes) {
  Tensor t(DType::kF32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = static_cast<float>(i);
  t.set_dim_names({"N", "C"});
  auto p = t.Permute({1, 0});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->shape(), Shape({3, 2}));
  EXPECT_EQ(p->DebugString(), "f32[C=3, N=2]");
  Tensor c = p->Contiguous();
  EXPECT_EQ(c.data<float>()[1], 3.0f);
  EXPECT_EQ(c.data<float>()[2], 1.0f);
  EXPECT_FALSE(t.Permute({0, 0}).ok());
}

TEST(Tensor, ReshapeChecksElementCount) {
  Tensor t(DType::kU8, {2, 6});
  EXPECT_TRUE(t.Reshape({3, 4}).ok());
  auto bad = t.Reshape({5, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[5, 2]"), std::string::npos);
}

TEST(Tensor, DebugStringShowsNamedDimsAndValues) {
  Tensor t(DType::kF32, {128, 28, 28, 1});
  t.set_dim_names({"B", "H", "W", "C"});
  EXPECT_EQ(t.DebugString(), "f32[B=128, H=28, W=28, C=1]");
  Tensor v(DType::kI64, {3});
  v.data<int64_t>()[2] = 9;
  EXPECT_EQ(v.DebugString(5), "i64[3] {0, 0, 9}");
}

TEST(BF16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(ToBF16(1.0f).bits, 0x3f80);
  EXPECT_EQ(ToF32(ToBF16(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(ToF32(ToBF16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(ToF32(ToBF16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(ToF32(ToBF16(std::nanf("")))));
  EXPECT_EQ(ToF32(ToBF16(-2.5f)), -2.5f);
}

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU8}) {
    DType back;
    ASSERT_TRUE(ParseDType(DTypeName(t), &back));
    EXPECT_EQ(back, t);
  }
  DType x;
  EXPECT_FALSE(ParseDType("f16", &x));
}

}  // namespace
}  // namespace strata
