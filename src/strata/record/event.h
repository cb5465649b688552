// TensorBoard event files: a TFRecord file (tfrecord_format.h, uncompressed) of serialized
// tensorflow.Event messages (tensorflow/core/util/event.proto, framework/summary.proto):
//
//   Event   { double wall_time = 1; int64 step = 2;
//             oneof what { string file_version = 3; bytes graph_def = 4; Summary summary = 5;
//                          bytes meta_graph_def = 9; ... } }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; SummaryMetadata metadata = 9;
//             oneof value { float simple_value = 2; TensorProto tensor = 8; ... } }
//   SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1; bytes content = 2; } }
//   TensorProto { DataType dtype = 1; TensorShapeProto tensor_shape = 2 { repeated Dim dim = 2
//                 { int64 size = 1; } }; bytes tensor_content = 4; repeated float float_val = 5;
//                 repeated double double_val = 6; repeated int32 int_val = 7;
//                 repeated bytes string_val = 8; repeated int64 int64_val = 10; }
//
// The first record is Event{wall_time, file_version: "brain.Event:2"}. Files are named
// events.out.tfevents.<unix seconds, 10 digits>.<hostname><suffix>, as TensorFlow names
// them. TensorBoard reads the file while it grows, so the writer appends (not atomic) and
// Flush() makes whole records visible. docs/formats/event.md has a worked example.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/status.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"

namespace strata::record {

constexpr std::string_view kEventFileVersion = "brain.Event:2";

// TensorFlow DataType values used in summaries.
enum TfDataType : int { kDtFloat = 1, kDtDouble = 2, kDtInt32 = 3, kDtString = 7, kDtInt64 = 9 };

struct SummaryTensor {
  int dtype = 0;
  std::vector<int64_t> shape;       // dims; {} = scalar
  std::string tensor_content;       // raw little-endian values, when the writer used it
  std::vector<float> float_val;
  std::vector<double> double_val;
  std::vector<int32_t> int_val;
  std::vector<int64_t> int64_val;
  std::vector<std::string> string_val;
  // The first value as a double, from whichever field holds it (tensor_content included);
  // false when there is none (empty or a string tensor).
  bool ScalarValue(double* out) const;
  bool operator==(const SummaryTensor&) const = default;
};

struct SummaryValue {
  enum class Kind { kNone, kSimpleValue, kTensor, kOther };  // kOther: image/histo/audio, kept undecoded
  std::string tag;
  std::string plugin_name;  // metadata.plugin_data.plugin_name ("scalars", "graph_keras_model", ...)
  std::string plugin_content;
  Kind kind = Kind::kNone;
  float simple_value = 0;
  SummaryTensor tensor;
  bool operator==(const SummaryValue&) const = default;
};

struct Event {
  enum class What { kNone, kFileVersion, kGraphDef, kSummary, kMetaGraphDef, kOther };
  double wall_time = 0;
  int64_t step = 0;
  What what = What::kNone;
  std::string file_version;      // what == kFileVersion
  std::string graph_def;         // kGraphDef (serialized GraphDef, kept as bytes)
  std::string meta_graph_def;    // kMetaGraphDef
  std::vector<SummaryValue> summary;  // kSummary
  bool operator==(const Event&) const = default;
};

Status DecodeEvent(std::string_view serialized, Event* out);
Result<Event> DecodeEvent(std::string_view serialized);
std::string EncodeEvent(const Event& event);

// "events.out.tfevents.1598485465.penguin" + suffix.
std::string EventFileName(int64_t unix_seconds, std::string_view hostname, std::string_view suffix = "");
// True for names TensorBoard picks up (they contain "tfevents").
bool IsEventFileName(std::string_view filename);

struct EventWriterOptions {
  std::string filename_suffix;  // appended to the name (TF2 adds ".v2"; profile files "profile-empty")
  double wall_time = 0;         // 0: now. Tests pin it for byte-exact files.
  std::string hostname;         // "": this host's name
};

class EventWriter {
 public:
  // Creates `dir`/events.out.tfevents.<secs>.<host><suffix> and writes the file_version
  // event. `dir` must exist.
  static Result<std::unique_ptr<EventWriter>> Create(const std::string& dir, EventWriterOptions options = {});
  ~EventWriter();  // closes (flushing) if Close() was not called

  // A scalar as TensorBoard's scalars plugin reads it from TF1 writers: simple_value.
  Status WriteScalar(std::string_view tag, int64_t step, float value, double wall_time = 0);
  // A scalar as TF2's tf.summary.scalar writes it: a DT_FLOAT tensor with plugin "scalars".
  Status WriteTensorScalar(std::string_view tag, int64_t step, float value, double wall_time = 0);
  Status WriteEvent(const Event& event);
  Status Flush();
  Status Close();
  const std::string& path() const { return path_; }

 private:
  EventWriter(std::string path, std::unique_ptr<RecordWriter> writer) : path_(std::move(path)), writer_(std::move(writer)) {}
  std::string path_;
  std::unique_ptr<RecordWriter> writer_;
  std::string scratch_;
  bool closed_ = false;
};

// Reads events one by one; a file being written is read up to its last whole record.
class EventReader {
 public:
  static Result<std::unique_ptr<EventReader>> Open(const std::string& path);
  // OK, OutOfRange at the end, or the reader's / decoder's error with the record's offset.
  Status Next(Event* event);

 private:
  explicit EventReader(std::unique_ptr<RecordReader> r) : reader_(std::move(r)) {}
  std::unique_ptr<RecordReader> reader_;
};

}  // namespace strata::record

#pragma GCC visibility pop
