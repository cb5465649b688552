// Reads every file TensorFlow and its tools wrote (testdata/real, see PROVENANCE.md there)
// and checks the documented counts, keys and values.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "event.pb.h"
#include "example.pb.h"
#include "strata/record/event.h"
#include "strata/record/example.h"
#include "strata/record/example_parser.h"
#include "strata/record/record_reader.h"

namespace strata::record {
namespace {

std::string Real(const std::string& name) { return std::string(STRATA_TESTDATA) + "/real/" + name; }

// All records of a file, failing the test on any error.
std::vector<std::string> ReadRecords(const std::string& name, Compression want) {
  auto r = RecordReader::Open(Real(name));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  EXPECT_EQ((*r)->compression(), want) << name;
  std::vector<std::string> out;
  std::string_view v;
  Status st;
  while ((st = (*r)->ReadRecord(&v)).ok()) out.emplace_back(v);
  EXPECT_TRUE(st.IsOutOfRange()) << st.ToString();
  return out;
}

std::vector<Example> Examples(const std::vector<std::string>& recs) {
  std::vector<Example> out;
  for (size_t i = 0; i < recs.size(); ++i) {
    auto e = DecodeExample(recs[i]);
    EXPECT_TRUE(e.ok()) << "record " << i << ": " << e.status().ToString();
    if (e.ok()) out.push_back(*e);
    // The oracle parses the same bytes to the same values.
    tensorflow::Example pb;
    EXPECT_TRUE(pb.ParseFromString(recs[i]));
    EXPECT_EQ(pb.features().feature_size(), static_cast<int>(e->features.size()));
  }
  return out;
}

TEST(RealFilesTest, PytorchDataExample) {
  auto ex = Examples(ReadRecords("pytorch-data_example.tfrecord", Compression::kNone));
  ASSERT_EQ(ex.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    std::vector<float> xf;
    std::vector<int64_t> xi;
    for (int k = 0; k < 10; ++k) {
      xf.push_back(static_cast<float>(10 * i + k));
      xi.push_back(100 * i + 10 * k);
    }
    EXPECT_EQ(ex[i].features.at("x_float"), Feature::Floats(xf));
    EXPECT_EQ(ex[i].features.at("x_int"), Feature::Int64s(xi));
    EXPECT_EQ(ex[i].features.at("x_byte"), Feature::Bytes({"test str"}));
    EXPECT_EQ(ex[i].features.size(), 3u);
  }
}

TEST(RealFilesTest, MagentaRawRecords) {
  EXPECT_EQ(ReadRecords("magenta_tfrecord_iterator_test.tfrecord", Compression::kNone),
            (std::vector<std::string>{"hello world", "12345", "success"}));
}

TEST(RealFilesTest, HadoopPlainAndGzipNegativeInt64s) {
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, -6519408338692630574},
                                                         {1, -897291810407650440},
                                                         {2, -2627029093267243214},
                                                         {3, 8452912497529882771},
                                                         {4, 6197228047171027195}};
  auto plain = ReadRecords("tf-ecosystem-hadoop_tf-records_part-m-00000", Compression::kNone);
  auto zipped = ReadRecords("tf-ecosystem-hadoop_zipped-tf-records_part-m-00000.gz", Compression::kGzip);
  EXPECT_EQ(plain, zipped);
  auto ex = Examples(plain);
  ASSERT_EQ(ex.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(ex[i].features.at("data"), Feature::Int64s({want[i].first, want[i].second}));
}

TEST(RealFilesTest, PenguinWithTheFastParser) {
  auto recs = ReadRecords("tfx_penguin_Split-train_data_tfrecord-00000-of-00001.gz", Compression::kGzip);
  ASSERT_EQ(recs.size(), 234u);
  auto parser = *ExampleParser::Create({{.key = "species", .type = FeatureKind::kInt64},
                                        {.key = "culmen_length_mm"},
                                        {.key = "culmen_depth_mm"},
                                        {.key = "flipper_length_mm"},
                                        {.key = "body_mass_g"}});
  const double first[3][5] = {{0, 0.2545454545454545, 0.6666666666666666, 0.15254237288135594, 0.2916666666666667},
                              {0, 0.26909090909090905, 0.5119047619047618, 0.23728813559322035, 0.3055555555555556},
                              {0, 0.29818181818181805, 0.5833333333333334, 0.3898305084745763, 0.1527777777777778}};
  ParsedExample out;
  for (size_t i = 0; i < recs.size(); ++i) {
    ASSERT_TRUE(parser.Parse(recs[i], &out).ok()) << "record " << i;
    if (i < 3) {
      EXPECT_EQ(out[0].int64s[0], static_cast<int64_t>(first[i][0]));
      for (int k = 1; k < 5; ++k) EXPECT_EQ(out[k].floats[0], static_cast<float>(first[i][k])) << i << "," << k;
    }
  }
}

TEST(RealFilesTest, TfjsNextPageGzipWithFnameHeader) {
  auto ex = Examples(ReadRecords("tfx_tfjs_next_page_data.tfrecord.gz", Compression::kGzip));
  ASSERT_EQ(ex.size(), 100u);
  EXPECT_EQ(ex[0].features.at("session_index"), Feature::Int64s({1}));
  EXPECT_EQ(ex[0].features.at("cur_page"), Feature::Bytes({"page2"}));
  EXPECT_EQ(ex[0].features.at("label"), Feature::Bytes({"page3"}));
}

TEST(RealFilesTest, IrisGzip) {
  auto ex = Examples(ReadRecords("tfx_iris_training_data_tfrecord-00000-of-00004.gz", Compression::kGzip));
  ASSERT_EQ(ex.size(), 16u);
  EXPECT_EQ(ex[0].features.at("sepal_length"), Feature::Floats({5.5f}));
  EXPECT_EQ(ex[0].features.at("sepal_width"), Feature::Floats({2.6f}));
  EXPECT_EQ(ex[0].features.at("petal_length"), Feature::Floats({4.4f}));
  EXPECT_EQ(ex[0].features.at("petal_width"), Feature::Floats({1.2f}));
  EXPECT_EQ(ex[0].features.at("variety"), Feature::Int64s({1}));
}

TEST(RealFilesTest, ChicagoTaxiEmptyFeatures) {
  auto ex = Examples(ReadRecords("tfx_chicago-taxi_csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz",
                                 Compression::kGzip));
  ASSERT_EQ(ex.size(), 424u);
  const auto& f = ex[0].features;
  EXPECT_EQ(f.at("trip_start_timestamp"), Feature::Int64s({1432075500}));
  EXPECT_EQ(f.at("fare"), Feature::Floats({12.25f}));
  EXPECT_EQ(f.at("tips"), Feature::Floats({2.65f}));
  EXPECT_EQ(f.at("trip_miles"), Feature::Floats({4.2f}));
  EXPECT_EQ(f.at("payment_type"), Feature::Bytes({"Credit Card"}));
  EXPECT_EQ(f.at("company").kind, FeatureKind::kNone);
  for (const auto& e : ex) EXPECT_EQ(e.features.at("pickup_census_tract").kind, FeatureKind::kNone);
  // The fast parser treats the empty Feature as missing: default or zero var-len values.
  auto parser = *ExampleParser::Create({{.key = "company", .type = FeatureKind::kBytes, .has_default = true,
                                         .default_bytes = {"unknown"}},
                                        {.key = "pickup_census_tract", .type = FeatureKind::kInt64, .var_len = true}});
  ParsedExample out;
  auto recs = ReadRecords("tfx_chicago-taxi_csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz",
                          Compression::kGzip);
  ASSERT_TRUE(parser.Parse(recs[0], &out).ok());
  EXPECT_EQ(out[0].bytes[0], "unknown");
  EXPECT_TRUE(out[1].int64s.empty());
}

TEST(RealFilesTest, SequenceExamplesPattern) {
  auto recs = ReadRecords("tfx_tfrecord_sequence_Split-eval_data_tfrecord_eval.gz", Compression::kGzip);
  ASSERT_EQ(recs.size(), 4500u);
  auto parser = *ExampleParser::Create(
      {{.key = "i", .type = FeatureKind::kInt64, .has_default = true, .default_int64s = {-1}},
       {.key = "f", .type = FeatureKind::kFloat, .has_default = true, .default_floats = {-1}}},
      {{.key = "s", .type = FeatureKind::kBytes}});
  ParsedExample out;
  for (size_t k = 0; k < recs.size(); ++k) {
    int64_t n = 10500 + static_cast<int64_t>(k);
    ASSERT_TRUE(parser.ParseSequence(recs[k], &out).ok()) << k;
    EXPECT_EQ(out[0].int64s[0], n % 10 == 0 ? -1 : n) << k;
    EXPECT_EQ(out[1].floats[0], n % 10 == 0 ? -1.0f : static_cast<float>(n)) << k;
    ASSERT_EQ(out.sequences[0].steps, 2);
    EXPECT_EQ(out.sequences[0].bytes[0], std::to_string(n));
    EXPECT_EQ(out.sequences[0].bytes[1], std::to_string(n + 1));
  }
  auto se = DecodeSequenceExample(recs[0]);  // n = 10500: empty context features
  ASSERT_TRUE(se.ok());
  EXPECT_EQ(se->context.at("i").kind, FeatureKind::kNone);
  EXPECT_EQ(se->feature_lists.at("s").size(), 2u);
}

TEST(RealFilesTest, Cifar10) {
  auto ex = Examples(ReadRecords("tfx_cifar10_test.tfrecord", Compression::kNone));
  ASSERT_EQ(ex.size(), 128u);
  const std::vector<std::pair<std::string, int64_t>> first = {
      {"test_09933", 7}, {"test_05669", 0}, {"test_00163", 6}, {"test_06686", 9}, {"test_04747", 5}};
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(ex[i].features.at("id"), Feature::Bytes({first[i].first}));
    EXPECT_EQ(ex[i].features.at("label"), Feature::Int64s({first[i].second}));
  }
  std::vector<int> counts(10);
  for (const auto& e : ex) {
    counts[e.features.at("label").int64s[0]]++;
    const std::string& png = e.features.at("image").bytes[0];
    ASSERT_GE(png.size(), 24u);
    EXPECT_EQ(png.substr(1, 3), "PNG");
    EXPECT_EQ(png.substr(16, 8), std::string("\0\0\0\x20\0\0\0\x20", 8));  // IHDR 32 x 32
  }
  EXPECT_EQ(counts, (std::vector<int>{17, 15, 18, 12, 11, 16, 5, 11, 17, 6}));
}

TEST(RealFilesTest, Mnist) {
  auto recs = ReadRecords("tfx_mnist.tfrecord", Compression::kNone);
  ASSERT_EQ(recs.size(), 1000u);
  auto parser = *ExampleParser::Create({{.key = "image_floats", .shape = {28, 28}},
                                        {.key = "image_class", .type = FeatureKind::kInt64}});
  ParsedExample out;
  for (size_t i = 0; i < recs.size(); ++i) {
    ASSERT_TRUE(parser.Parse(recs[i], &out).ok()) << i;
    for (float v : out[0].floats) ASSERT_TRUE(v >= -0.5f && v <= 0.5f);
    ASSERT_GE(out[1].int64s[0], 0);
    ASSERT_LE(out[1].int64s[0], 9);
    if (i == 0) EXPECT_EQ(out[1].int64s[0], 9);
    if (i == 1) EXPECT_EQ(out[1].int64s[0], 3);
  }
}

TEST(RealFilesTest, DeeplabPascalVoc) {
  auto ex = Examples(ReadRecords("tf-models_deeplab_pascal_voc_seg_val-00000-of-00001.tfrecord", Compression::kNone));
  ASSERT_EQ(ex.size(), 3u);
  const std::vector<std::tuple<int64_t, int64_t, std::string>> want = {
      {366, 500, "2007_000033"}, {335, 500, "2007_000042"}, {333, 500, "2007_000061"}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ex[i].features.at("image/height"), Feature::Int64s({std::get<0>(want[i])}));
    EXPECT_EQ(ex[i].features.at("image/width"), Feature::Int64s({std::get<1>(want[i])}));
    EXPECT_EQ(ex[i].features.at("image/filename"), Feature::Bytes({std::get<2>(want[i])}));
    EXPECT_EQ(ex[i].features.at("image/channels"), Feature::Int64s({3}));
    EXPECT_EQ(ex[i].features.at("image/format"), Feature::Bytes({"jpeg"}));
    EXPECT_EQ(ex[i].features.at("image/segmentation/class/format"), Feature::Bytes({"png"}));
    EXPECT_EQ(ex[i].features.size(), 8u);
  }
}

TEST(RealFilesTest, SpotifyTaxi) {
  auto ex = Examples(ReadRecords("spotify-tfreader_part-00000-of-00004.tfrecords", Compression::kNone));
  ASSERT_EQ(ex.size(), 3750u);
  int without_company = 0;
  for (const auto& e : ex) without_company += e.features.count("company") == 0;
  EXPECT_GT(without_company, 0);
  EXPECT_EQ(ex[0].features.at("trip_seconds").kind, FeatureKind::kInt64);
  EXPECT_EQ(ex[0].features.at("fare").kind, FeatureKind::kFloat);
  EXPECT_EQ(ex[0].features.at("trip_id").kind, FeatureKind::kBytes);
}

TEST(RealFilesTest, CorruptSerengetiIsTruncatedAtOffsetZero) {
  const std::string name = "CORRUPT_tf-models_snapshot_serengeti_sequence_examples.record";
  auto r = RecordReader::Open(Real(name));
  ASSERT_TRUE(r.ok());
  std::string_view v;
  Status st = (*r)->ReadRecord(&v);
  EXPECT_EQ(st.code(), StatusCode::kTruncated) << st.ToString();
  EXPECT_NE(st.message().find(name + " at byte 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("820669 data bytes"), std::string::npos) << st.message();
  EXPECT_EQ((*r)->stats().records, 0);
  // Quietly: no records, clean end.
  auto q = RecordReader::Open(Real(name), {.stop_at_truncated_tail = true});
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE((*q)->ReadRecord(&v).IsOutOfRange());
  EXPECT_EQ((*q)->stats().truncated_tails, 1);
}

std::vector<Event> Events(const std::string& name) {
  auto r = EventReader::Open(Real(name));
  EXPECT_TRUE(r.ok());
  std::vector<Event> out;
  Event e;
  Status st;
  while ((st = (*r)->Next(&e)).ok()) out.push_back(e);
  EXPECT_TRUE(st.IsOutOfRange()) << st.ToString();
  return out;
}

TEST(RealFilesTest, KerasEventFile) {
  auto ev = Events("tfx_iris-keras_train_events.out.tfevents.1598485465.penguin.1486.6519.v2");
  ASSERT_EQ(ev.size(), 244u);
  EXPECT_EQ(ev[0].what, Event::What::kFileVersion);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  std::map<std::string, int> simple, tensor;
  std::map<std::string, std::string> plugin;
  int graph = 0, with_step = 0, summaries = 0;
  const SummaryValue* first_loss = nullptr;
  int64_t first_loss_step = -1;
  for (const auto& e : ev) {
    graph += e.what == Event::What::kGraphDef;
    with_step += e.step != 0;
    summaries += e.what == Event::What::kSummary;
    for (const auto& v : e.summary) {
      if (v.kind == SummaryValue::Kind::kSimpleValue) simple[v.tag]++;
      if (v.kind == SummaryValue::Kind::kTensor) tensor[v.tag]++, plugin[v.tag] = v.plugin_name;
      if (v.tag == "batch_loss" && !first_loss) first_loss = &v, first_loss_step = e.step;
    }
  }
  EXPECT_EQ(graph, 1);
  EXPECT_EQ(summaries, 242);
  EXPECT_EQ(with_step, 239);
  EXPECT_EQ(simple, (std::map<std::string, int>{{"batch_loss", 100},
                                                 {"batch_sparse_categorical_accuracy", 100},
                                                 {"epoch_loss", 20},
                                                 {"epoch_sparse_categorical_accuracy", 20}}));
  EXPECT_EQ(plugin, (std::map<std::string, std::string>{{"keras", "graph_keras_model"},
                                                         {"batch_2", "graph_run_metadata_graph"}}));
  ASSERT_NE(first_loss, nullptr);
  EXPECT_EQ(first_loss_step, 1);
  EXPECT_EQ(first_loss->simple_value, 0.8581574559211731f);
}

TEST(RealFilesTest, ProfileEmptyEventFile) {
  auto ev = Events("tfx_iris-keras_train_events.out.tfevents.1598485465.penguin.profile-empty");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].wall_time, 1598485465.0);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  // Our encoder writes the same 40-byte file.
  auto bytes = ReadFileToString(Real("tfx_iris-keras_train_events.out.tfevents.1598485465.penguin.profile-empty"));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->substr(12, bytes->size() - 16), EncodeEvent(ev[0]));
}

TEST(RealFilesTest, EstimatorEventFile) {
  auto ev = Events("tfx_estimator_eval_events.out.tfevents.1646034751.jiyongjung.c.googlers.com");
  ASSERT_EQ(ev.size(), 7u);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  EXPECT_EQ(ev[1].what, Event::What::kGraphDef);
  EXPECT_EQ(ev[1].graph_def.size(), 608682u);
  EXPECT_EQ(ev[2].what, Event::What::kMetaGraphDef);
  EXPECT_EQ(ev[2].meta_graph_def.size(), 636007u);
  auto scalar = [](const Event& e, const std::string& tag) {
    for (const auto& v : e.summary)
      if (v.tag == tag && v.kind == SummaryValue::Kind::kSimpleValue) return v.simple_value;
    return NAN;
  };
  EXPECT_EQ(ev[3].step, 999);
  EXPECT_EQ(scalar(ev[3], "accuracy"), 0.7770000100135803f);
  EXPECT_EQ(scalar(ev[3], "auc"), 0.9139660000801086f);
  EXPECT_EQ(scalar(ev[3], "loss"), 0.4389618933200836f);
  EXPECT_EQ(ev[3].summary.size(), 10u);
  EXPECT_EQ(ev[4].step, 999);
  ASSERT_EQ(ev[4].summary.size(), 1u);
  EXPECT_EQ(ev[4].summary[0].tag, "checkpoint_path");
  EXPECT_EQ(ev[4].summary[0].tensor.dtype, kDtString);
  ASSERT_EQ(ev[4].summary[0].tensor.string_val.size(), 1u);
  EXPECT_NE(ev[4].summary[0].tensor.string_val[0].find("model.ckpt-999"), std::string::npos);
  EXPECT_EQ(ev[5].step, 1000);
  EXPECT_EQ(scalar(ev[5], "accuracy"), 0.7773500084877014f);
  EXPECT_EQ(scalar(ev[5], "auc"), 0.9128482341766357f);
}

}  // namespace
}  // namespace strata::record
