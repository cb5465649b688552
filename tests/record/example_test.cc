// The Example/SequenceExample codec against libprotobuf (the oracle), and the spec parser.
#include <gtest/gtest.h>

#include <random>

#include "example.pb.h"
#include "strata/record/example.h"
#include "strata/record/example_parser.h"
#include "strata/record/wire.h"

namespace strata::record {
namespace {

Example Sample() {
  Example e;
  e.features["label"] = Feature::Int64s({7});
  e.features["neg"] = Feature::Int64s({-1, INT64_MIN, INT64_MAX, 0, 300});
  e.features["pixels"] = Feature::Floats({0.5f, -1.25f, 3e38f, 0.0f});
  e.features["name"] = Feature::Bytes({"hello", "", std::string("\0\xff", 2)});
  e.features["empty_floats"] = Feature::Floats({});
  e.features["nothing"] = Feature{};
  return e;
}

std::string OracleDeterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream sos(&out);
  google::protobuf::io::CodedOutputStream cos(&sos);
  cos.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&cos);
  cos.Trim();
  return out;
}

TEST(ExampleCodecTest, EncodeMatchesProtobufDeterministicBytes) {
  Example e = Sample();
  std::string mine = EncodeExample(e);
  tensorflow::Example pb;
  ASSERT_TRUE(pb.ParseFromString(mine));
  const auto& fm = pb.features().feature();
  ASSERT_EQ(fm.size(), 6u);
  EXPECT_EQ(fm.at("label").int64_list().value(0), 7);
  EXPECT_EQ(fm.at("neg").int64_list().value(1), INT64_MIN);
  EXPECT_EQ(fm.at("pixels").float_list().value(1), -1.25f);
  EXPECT_EQ(fm.at("name").bytes_list().value(2), std::string("\0\xff", 2));
  EXPECT_EQ(fm.at("empty_floats").kind_case(), tensorflow::Feature::kFloatList);
  EXPECT_EQ(fm.at("nothing").kind_case(), tensorflow::Feature::KIND_NOT_SET);
  EXPECT_EQ(OracleDeterministic(pb), mine);
}

TEST(ExampleCodecTest, DecodesWhatProtobufWrites) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    tensorflow::Example pb;
    auto* fm = pb.mutable_features()->mutable_feature();
    Example want;
    int n = static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      std::string key = "k" + std::to_string(rng() % 1000);
      tensorflow::Feature f;
      Feature mine;
      switch (rng() % 4) {
        case 0:
          mine.kind = FeatureKind::kBytes;
          for (int j = 0, m = rng() % 4; j < m; ++j) {
            std::string b(rng() % 20, static_cast<char>(rng()));
            f.mutable_bytes_list()->add_value(b);
            mine.bytes.push_back(b);
          }
          if (mine.bytes.empty()) f.mutable_bytes_list();
          break;
        case 1:
          mine.kind = FeatureKind::kFloat;
          f.mutable_float_list();
          for (int j = 0, m = rng() % 40; j < m; ++j) {
            float v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
            f.mutable_float_list()->add_value(v);
            mine.floats.push_back(v);
          }
          break;
        case 2:
          mine.kind = FeatureKind::kInt64;
          f.mutable_int64_list();
          for (int j = 0, m = rng() % 40; j < m; ++j) {
            int64_t v = static_cast<int64_t>((static_cast<uint64_t>(rng()) << 32) | rng()) >> (rng() % 64);
            f.mutable_int64_list()->add_value(v);
            mine.int64s.push_back(v);
          }
          break;
        default:
          break;  // empty Feature
      }
      (*fm)[key] = f;
      want.features[key] = mine;
    }
    std::string bytes = pb.SerializeAsString();
    auto got = DecodeExample(bytes);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, want);
    EXPECT_EQ(EncodeExample(*got), OracleDeterministic(pb));
  }
}

// Hand-built wire bytes: the forms protobuf accepts that its own writer never emits.
std::string Field(uint32_t field, std::string_view payload) {
  std::string s;
  wire::AppendBytesField(&s, field, payload);
  return s;
}
std::string Entry(std::string_view key, std::string_view feature) { return Field(1, Field(1, key) + Field(2, feature)); }

TEST(ExampleCodecTest, AcceptsUnpackedListsUnknownFieldsAndMerges) {
  // float_list with two unpacked values (wire type 5) and one packed run.
  std::string floats;
  floats += '\x0d';
  float a = 1.5f, b = -2.0f, c = 4.0f;
  floats.append(reinterpret_cast<char*>(&a), 4);
  floats += Field(1, std::string(reinterpret_cast<char*>(&b), 4));
  floats += '\x0d';
  floats.append(reinterpret_cast<char*>(&c), 4);
  // int64_list unpacked (wire type 0), with an unknown varint field 9 in between.
  std::string ints = "\x08\x05\x48\x01\x08\x7f";
  // Feature with an unknown field 15, and bytes_list then int64_list: the oneof keeps int64.
  std::string replaced = Field(1, Field(1, "gone")) + Field(3, "\x08\x02") + "\x78\x01";
  // float_list twice: merged.
  std::string merged = Field(2, floats) + Field(2, Field(1, std::string(reinterpret_cast<char*>(&a), 4)));
  std::string features = Entry("f", merged) + Entry("i", Field(3, ints)) + Entry("r", replaced) +
                         Entry("dup", Field(3, "\x08\x01")) + Entry("dup", Field(3, "\x08\x02"));
  std::string example = Field(1, features) + Field(5, "unknown top-level field");
  tensorflow::Example pb;
  ASSERT_TRUE(pb.ParseFromString(example));
  auto got = DecodeExample(example);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->features.at("f").floats, (std::vector<float>{1.5f, -2.0f, 4.0f, 1.5f}));
  EXPECT_EQ(got->features.at("i").int64s, (std::vector<int64_t>{5, 127}));
  EXPECT_EQ(got->features.at("r"), Feature::Int64s({2}));
  EXPECT_EQ(got->features.at("dup"), Feature::Int64s({2}));
  // The oracle agrees on every value.
  const auto& fm = pb.features().feature();
  EXPECT_EQ(fm.at("f").float_list().value_size(), 4);
  EXPECT_EQ(fm.at("i").int64_list().value(1), 127);
  EXPECT_EQ(fm.at("r").int64_list().value(0), 2);
  EXPECT_EQ(fm.at("dup").int64_list().value(0), 2);
}

TEST(ExampleCodecTest, RejectsMalformedBytesNamingTheFeature) {
  std::string bad_floats = Field(1, Entry("pix", Field(2, Field(1, "abc"))));  // 3 bytes of floats
  auto r = DecodeExample(bad_floats);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("feature 'pix'"), std::string::npos) << r.status().message();
  std::string truncated = Field(1, Entry("x", Field(3, Field(1, "\x80"))));
  EXPECT_FALSE(DecodeExample(truncated).ok());
  EXPECT_FALSE(DecodeExample("\x0a\x05\x01").ok());   // length past the end
  EXPECT_FALSE(DecodeExample("\x0f").ok());           // wire type 7
  EXPECT_TRUE(DecodeExample("").ok());                // empty Example is valid
}

TEST(ExampleCodecTest, SequenceExampleMatchesProtobuf) {
  SequenceExample se;
  se.context["id"] = Feature::Int64s({42});
  se.context["gone"] = Feature{};
  se.feature_lists["tokens"] = {Feature::Bytes({"a"}), Feature::Bytes({"bb", "c"}), Feature{}};
  se.feature_lists["frames"] = {Feature::Floats({1, 2}), Feature::Floats({3, 4})};
  std::string mine = EncodeSequenceExample(se);
  tensorflow::SequenceExample pb;
  ASSERT_TRUE(pb.ParseFromString(mine));
  EXPECT_EQ(pb.context().feature().at("id").int64_list().value(0), 42);
  EXPECT_EQ(pb.feature_lists().feature_list().at("tokens").feature_size(), 3);
  EXPECT_EQ(pb.feature_lists().feature_list().at("tokens").feature(1).bytes_list().value(0), "bb");
  EXPECT_EQ(OracleDeterministic(pb), mine);
  auto back = DecodeSequenceExample(mine);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, se);
}

TEST(ExampleBuilderTest, BuildsTheSameBytesAsEncodeInKeyOrder) {
  ExampleBuilder b;
  std::vector<float> fl = {1, 2, 3};
  std::vector<int64_t> in = {-5, 6};
  std::vector<std::string_view> bs = {"x", "yz"};
  b.AddBytes("a", bs);
  b.AddFloats("b", fl);
  b.AddInt64s("c", in);
  b.AddFloats("d", {});
  Example e;
  e.features["a"] = Feature::Bytes({"x", "yz"});
  e.features["b"] = Feature::Floats(fl);
  e.features["c"] = Feature::Int64s(in);
  e.features["d"] = Feature::Floats({});
  EXPECT_EQ(b.Finish(), EncodeExample(e));
  b.Clear();
  b.AddBytes("only", "v");
  auto d = DecodeExample(b.Finish());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->features.at("only"), Feature::Bytes({"v"}));
}

// ---- ExampleParser ----------------------------------------------------------------------
TEST(ExampleParserTest, FixedVarLenDefaultsAndUnknownKeys) {
  auto parser = ExampleParser::Create({
      {.key = "label", .type = FeatureKind::kInt64},
      {.key = "pixels", .type = FeatureKind::kFloat, .shape = {2, 2}},
      {.key = "name", .type = FeatureKind::kBytes, .var_len = true},
      {.key = "weight", .type = FeatureKind::kFloat, .has_default = true, .default_floats = {0.25f}},
      {.key = "missing_var", .type = FeatureKind::kInt64, .var_len = true},
      {.key = "nothing", .type = FeatureKind::kInt64, .shape = {3}, .has_default = true, .default_int64s = {1, 2, 3}},
  });
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  Example e;
  e.features["label"] = Feature::Int64s({7});
  e.features["pixels"] = Feature::Floats({1, 2, 3, 4});
  e.features["name"] = Feature::Bytes({"a", "bc"});
  e.features["not_in_spec"] = Feature::Floats({9});
  e.features["nothing"] = Feature{};  // empty Feature: takes the default
  std::string bytes = EncodeExample(e);
  ParsedExample out;
  ASSERT_TRUE(parser->Parse(bytes, &out).ok());
  EXPECT_EQ(out[0].int64s, std::vector<int64_t>{7});
  EXPECT_EQ(out[1].floats, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(out[2].bytes, (std::vector<std::string_view>{"a", "bc"}));
  EXPECT_EQ(out[3].floats, std::vector<float>{0.25f});
  EXPECT_TRUE(out[3].from_default);
  EXPECT_TRUE(out[4].int64s.empty());
  EXPECT_EQ(out[5].int64s, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(parser->FeatureIndex("name"), 2);
  EXPECT_EQ(parser->FeatureIndex("zzz"), -1);

  // Reuse: a second record overwrites everything.
  e.features["label"] = Feature::Int64s({8});
  e.features["weight"] = Feature::Floats({2.0f});
  e.features.erase("name");
  ASSERT_TRUE(parser->Parse(EncodeExample(e), &out).ok());
  EXPECT_EQ(out[0].int64s, std::vector<int64_t>{8});
  EXPECT_EQ(out[3].floats, std::vector<float>{2.0f});
  EXPECT_FALSE(out[3].from_default);
  EXPECT_TRUE(out[2].bytes.empty());
}

TEST(ExampleParserTest, ErrorsNameTheFeature) {
  auto parser = *ExampleParser::Create({{.key = "pixels", .type = FeatureKind::kFloat, .shape = {3}}});
  ParsedExample out;
  Example e;
  Status st = parser.Parse(EncodeExample(e), &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("required feature 'pixels' is missing"), std::string::npos) << st.message();
  e.features["pixels"] = Feature::Floats({1, 2});
  st = parser.Parse(EncodeExample(e), &out);
  EXPECT_NE(st.message().find("feature 'pixels': shape [3] needs 3 float values, the record has 2"), std::string::npos)
      << st.message();
  e.features["pixels"] = Feature::Floats({1, 2, 3, 4, 5});
  st = parser.Parse(EncodeExample(e), &out);
  EXPECT_NE(st.message().find("the record has 5"), std::string::npos) << st.message();
  e.features["pixels"] = Feature::Int64s({1, 2, 3});
  st = parser.Parse(EncodeExample(e), &out);
  EXPECT_NE(st.message().find("spec says float but the record holds a int64_list"), std::string::npos) << st.message();
}

TEST(ExampleParserTest, RefusesBadSpecs) {
  EXPECT_FALSE(ExampleParser::Create({{.key = "a"}, {.key = "a"}}).ok());
  EXPECT_FALSE(ExampleParser::Create({{.key = "a", .shape = {-1}}}).ok());
  EXPECT_FALSE(ExampleParser::Create({{.key = "a", .shape = {2}, .has_default = true, .default_floats = {1, 2, 3}}}).ok());
  EXPECT_FALSE(ExampleParser::Create({{.key = "a", .type = FeatureKind::kInt64, .has_default = true, .default_floats = {1}}}).ok());
  EXPECT_FALSE(ExampleParser::Create({{.key = "a", .var_len = true, .shape = {2}}}).ok());
}

TEST(ExampleParserTest, ManyFeaturesUseTheHashIndex) {
  std::vector<FeatureSpec> spec;
  Example e;
  for (int i = 0; i < 40; ++i) {
    spec.push_back({.key = "f" + std::to_string(i), .type = FeatureKind::kInt64});
    e.features["f" + std::to_string(i)] = Feature::Int64s({i * 3});
  }
  auto parser = *ExampleParser::Create(spec);
  ExampleParser copy = parser;  // copies stay valid: the index holds no pointers
  ParsedExample out;
  ASSERT_TRUE(copy.Parse(EncodeExample(e), &out).ok());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(out[i].int64s[0], i * 3);
}

TEST(ExampleParserTest, ParsesSequenceExamples) {
  auto parser = ExampleParser::Create({{.key = "id", .type = FeatureKind::kInt64}},
                                      {{.key = "frames", .type = FeatureKind::kFloat, .shape = {2}},
                                       {.key = "tokens", .type = FeatureKind::kBytes, .var_len = true},
                                       {.key = "absent", .type = FeatureKind::kInt64, .var_len = true}});
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  SequenceExample se;
  se.context["id"] = Feature::Int64s({42});
  se.feature_lists["frames"] = {Feature::Floats({1, 2}), Feature::Floats({3, 4}), Feature::Floats({5, 6})};
  se.feature_lists["tokens"] = {Feature::Bytes({"a"}), Feature{}, Feature::Bytes({"b", "c"})};
  ParsedExample out;
  const std::string bytes = EncodeSequenceExample(se);  // bytes values are views into it
  ASSERT_TRUE(parser->ParseSequence(bytes, &out).ok());
  EXPECT_EQ(out[0].int64s, std::vector<int64_t>{42});
  EXPECT_EQ(out.sequences[0].steps, 3);
  EXPECT_EQ(out.sequences[0].floats, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(out.sequences[1].steps, 3);
  EXPECT_EQ(out.sequences[1].step_lengths, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(out.sequences[1].bytes, (std::vector<std::string_view>{"a", "b", "c"}));
  EXPECT_EQ(out.sequences[2].steps, 0);
  se.feature_lists["frames"][1] = Feature::Floats({3});
  Status st = parser->ParseSequence(EncodeSequenceExample(se), &out);
  EXPECT_NE(st.message().find("in step 1"), std::string::npos) << st.message();
}

TEST(ExampleParserTest, AgreesWithDecodeOnRandomExamples) {
  std::mt19937 rng(11);
  auto parser = *ExampleParser::Create({{.key = "a", .type = FeatureKind::kFloat, .var_len = true},
                                        {.key = "b", .type = FeatureKind::kInt64, .var_len = true},
                                        {.key = "c", .type = FeatureKind::kBytes, .var_len = true}});
  ParsedExample out;
  for (int it = 0; it < 100; ++it) {
    Example e;
    for (int j = 0, n = rng() % 5; j < n; ++j) e.features["a"].floats.push_back(static_cast<float>(rng() % 100));
    e.features["a"].kind = FeatureKind::kFloat;
    for (int j = 0, n = rng() % 5; j < n; ++j) e.features["b"].int64s.push_back(static_cast<int64_t>(rng()) - (1ll << 31));
    e.features["b"].kind = FeatureKind::kInt64;
    for (int j = 0, n = rng() % 5; j < n; ++j) e.features["c"].bytes.push_back(std::string(rng() % 9, 'x'));
    e.features["c"].kind = FeatureKind::kBytes;
    std::string bytes = EncodeExample(e);
    ASSERT_TRUE(parser.Parse(bytes, &out).ok());
    EXPECT_EQ(out[0].floats, e.features["a"].floats);
    EXPECT_EQ(out[1].int64s, e.features["b"].int64s);
    ASSERT_EQ(out[2].bytes.size(), e.features["c"].bytes.size());
    for (size_t k = 0; k < out[2].bytes.size(); ++k) EXPECT_EQ(out[2].bytes[k], e.features["c"].bytes[k]);
  }
}

}  // namespace
}  // namespace strata::record
