#include "strata/core/status.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(Status, OkIsDefaultAndCheap) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(sizeof(Status), sizeof(std::shared_ptr<int>));
}

TEST(Status, ErrorCarriesCodeAndMessage) {
  Status s = Corruption("bad data CRC in a.tfrecord at byte 12");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.ToString(), "Corruption: bad data CRC in a.tfrecord at byte 12");
  Status c = s.WithContext("shard 3");
  EXPECT_EQ(c.message(), "shard 3: bad data CRC in a.tfrecord at byte 12");
  EXPECT_EQ(c.code(), StatusCode::kCorruption);
}

TEST(Status, ErrnoErrorNamesPathAndMapsNotFound) {
  Status s = ErrnoError("open", "/no/such", ENOENT);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/no/such"), std::string::npos);
  EXPECT_EQ(ErrnoError("write", "f", EIO).code(), StatusCode::kIOError);
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  STRATA_ASSIGN_OR_RETURN(int h, Half(x));
  STRATA_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  STRATA_RETURN_IF_ERROR(Half(x).status());
  return Status::OK();
}

TEST(Result, ValueOrStatusAndMacrosPropagate) {
  auto r = Quarter(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  auto e = Quarter(6);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "odd: 3");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(Result, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace strata
