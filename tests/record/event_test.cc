#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "event.pb.h"
#include "strata/record/event.h"

namespace strata::record {
namespace {

TEST(EventTest, FileNameAsTensorFlowWritesIt) {
  EXPECT_EQ(EventFileName(1598485465, "penguin", ".1486.6519.v2"), "events.out.tfevents.1598485465.penguin.1486.6519.v2");
  EXPECT_EQ(EventFileName(5, "h"), "events.out.tfevents.0000000005.h");
  EXPECT_TRUE(IsEventFileName("events.out.tfevents.1.h"));
  EXPECT_FALSE(IsEventFileName("train.tfrecord"));
}

TEST(EventTest, EncodeMatchesProtobuf) {
  Event e;
  e.wall_time = 1234.5;
  e.step = 77;
  e.what = Event::What::kSummary;
  SummaryValue a;
  a.tag = "loss";
  a.kind = SummaryValue::Kind::kSimpleValue;
  a.simple_value = 0.25f;
  SummaryValue b;
  b.tag = "acc";
  b.plugin_name = "scalars";
  b.kind = SummaryValue::Kind::kTensor;
  b.tensor.dtype = kDtFloat;
  b.tensor.float_val = {0.75f};
  SummaryValue c;
  c.tag = "vec";
  c.kind = SummaryValue::Kind::kTensor;
  c.tensor.dtype = kDtInt64;
  c.tensor.shape = {3};
  c.tensor.int64_val = {1, -2, 3};
  e.summary = {a, b, c};
  std::string mine = EncodeEvent(e);
  tensorflow::Event pb;
  ASSERT_TRUE(pb.ParseFromString(mine));
  EXPECT_EQ(pb.wall_time(), 1234.5);
  EXPECT_EQ(pb.step(), 77);
  ASSERT_EQ(pb.summary().value_size(), 3);
  EXPECT_EQ(pb.summary().value(0).simple_value(), 0.25f);
  EXPECT_EQ(pb.summary().value(1).metadata().plugin_data().plugin_name(), "scalars");
  EXPECT_EQ(pb.summary().value(1).tensor().float_val(0), 0.75f);
  EXPECT_EQ(pb.summary().value(2).tensor().tensor_shape().dim(0).size(), 3);
  EXPECT_EQ(pb.summary().value(2).tensor().int64_val(1), -2);
  EXPECT_EQ(pb.SerializeAsString(), mine);  // same bytes as libprotobuf
  auto back = DecodeEvent(mine);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, e);
  double v;
  EXPECT_TRUE(back->summary[1].tensor.ScalarValue(&v));
  EXPECT_EQ(v, 0.75);
}

TEST(EventTest, DecodesProtobufTensorContent) {
  tensorflow::Event pb;
  pb.set_step(3);
  auto* v = pb.mutable_summary()->add_value();
  v->set_tag("t");
  v->mutable_tensor()->set_dtype(kDtDouble);
  double d = 2.5;
  v->mutable_tensor()->set_tensor_content(std::string(reinterpret_cast<char*>(&d), 8));
  auto e = DecodeEvent(pb.SerializeAsString());
  ASSERT_TRUE(e.ok());
  double got;
  ASSERT_TRUE(e->summary[0].tensor.ScalarValue(&got));
  EXPECT_EQ(got, 2.5);
  EXPECT_FALSE(DecodeEvent("\x2a\x05\x0a").ok());  // summary longer than the record
}

TEST(EventTest, WriterAppendsAndFlushesForTensorBoard) {
  auto dir = std::filesystem::temp_directory_path() / ("strata_event_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto w = EventWriter::Create(dir.string(), {.filename_suffix = ".v2", .wall_time = 1700000000.0, .hostname = "hostA"});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(std::filesystem::path((*w)->path()).filename(), "events.out.tfevents.1700000000.hostA.v2");
  ASSERT_TRUE((*w)->WriteScalar("loss", 1, 0.5f, 1700000001.0).ok());
  ASSERT_TRUE((*w)->WriteTensorScalar("acc", 1, 0.9f, 1700000001.0).ok());
  ASSERT_TRUE((*w)->Flush().ok());
  // Visible before Close, as TensorBoard needs.
  auto r = EventReader::Open((*w)->path());
  ASSERT_TRUE(r.ok());
  Event e;
  ASSERT_TRUE((*r)->Next(&e).ok());
  EXPECT_EQ(e.file_version, "brain.Event:2");
  EXPECT_EQ(e.wall_time, 1700000000.0);
  ASSERT_TRUE((*r)->Next(&e).ok());
  EXPECT_EQ(e.step, 1);
  EXPECT_EQ(e.summary[0].tag, "loss");
  EXPECT_EQ(e.summary[0].simple_value, 0.5f);
  ASSERT_TRUE((*r)->Next(&e).ok());
  EXPECT_EQ(e.summary[0].plugin_name, "scalars");
  EXPECT_TRUE((*r)->Next(&e).IsOutOfRange());
  ASSERT_TRUE((*w)->Close().ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::record
