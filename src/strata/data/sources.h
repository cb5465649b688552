// File sources: list_files, TFRecordDataset, and the Example parse stage.
//
//   STRATA_ASSIGN_OR_RETURN(Dataset files, data::list_files("/data/flowers/*.tfrec", {.shuffle = true, .seed = 1}));
//   Dataset records = data::TFRecordDataset(files, {.num_parallel_reads = data::AUTOTUNE});
//   STRATA_ASSIGN_OR_RETURN(MapFn parse, data::ParseExampleFn({
//       {.key = "image", .type = record::FeatureKind::kBytes},
//       {.key = "class", .type = record::FeatureKind::kInt64}}));
//   Dataset examples = records.map(parse, {.num_parallel_calls = data::AUTOTUNE});
//
// A file name travels as a u8 string tensor; a record as a u8[n] tensor of its bytes.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/record/example_parser.h"
#include "strata/record/tfrecord_format.h"

namespace strata::data {

struct ListFilesOptions {
  bool shuffle = false;          // tf.data shuffles by default; Strata prefers a stable order
  std::optional<uint64_t> seed;  // with shuffle: the order's seed (reshuffled each epoch)
};
// The files matching `pattern` (glob(7): *, ?, [...]; several patterns separated by ','),
// sorted by name. NotFound when nothing matches.
Result<Dataset> list_files(const std::string& pattern, ListFilesOptions options = {});
// A dataset of the given strings (file names), in order.
Dataset from_strings(std::vector<std::string> strings);

struct TFRecordOptions {
  record::Compression compression = record::Compression::kAuto;  // per file; kAuto sniffs
  int64_t buffer_size = 1 << 20;        // read-ahead bytes per open file
  int64_t num_parallel_reads = 1;       // reader threads: 1 = the consumer reads; N or AUTOTUNE
  // Files open at once, read round-robin one record each. It fixes the record order, so it
  // does not follow the thread count: 0 = num_parallel_reads when that is a number (as in
  // tf.data), 8 for AUTOTUNE (not the core count: the order must not depend on the machine).
  int64_t cycle_length = 0;
  // Skip corrupt records (resynchronising on the next valid header) instead of failing;
  // each one is counted in the tfrecord stage's errors_ignored statistic.
  bool skip_corrupt_records = false;
};
// The records of `files` (a dataset of file names), one u8[n] element each. With
// cycle_length > 1 the files are interleaved (block_length 1) and read by
// num_parallel_reads threads; the order is fixed by cycle_length unless deterministic = false.
// A corrupt record is one error element naming the file (or URL) and byte offset; the file
// then goes on after it (after a bad header, at the next valid one), so ignore_errors()
// drops exactly the corrupt records. A truncated tail or a corrupt compressed stream is one
// error, then that file ends; a file that cannot be opened or read is one error.
Dataset TFRecordDataset(const Dataset& files, TFRecordOptions options = {});
Dataset TFRecordDataset(std::vector<std::string> files, TFRecordOptions options = {});

// A map function parsing a serialized tf.train.Example (component 0, a u8 tensor) into a
// dict named by the spec's keys: kFloat -> f32, kInt64 -> i64, each of the spec's shape
// ([n] for var_len); kBytes -> u8[n] (one value: a fixed scalar or a var_len feature with
// exactly one value). Errors name the feature.
Result<MapFn> ParseExampleFn(std::vector<record::FeatureSpec> spec);

}  // namespace strata::data

#pragma GCC visibility pop
