// TFRecordDataset: the records of each file (record/record_reader.h reads the framing,
// checks CRCs, inflates GZIP/ZLIB), interleaved across files when num_parallel_reads != 1.
//
// A damaged record: every file is read with the reader's ignore_errors on, so the reader
// moves past a bad record (a bad data CRC skips that record; a bad header resynchronises on
// the next valid one) and reports each problem. Without skip_corrupt_records every reported
// problem becomes this iterator's error for one element (the file or URL and the byte offset
// in its message) and the next GetNext goes on with the record after it, so ignore_errors()
// downstream drops exactly the bad records and every other record still arrives; with
// skip_corrupt_records they are dropped here and counted in the stage's errors_ignored.
//
// State of one file: its name and the stream offset of the next record. A restore reopens
// the file and reads forward to that offset (framing and CRCs only, no parsing): offsets
// are in uncompressed bytes, so this works for compressed files too. Saved between the
// errors of one read (problems reported, not all handed out yet), the offset is where that
// read began, with the number of errors already handed out, so a restore neither repeats
// nor loses one.
#include <algorithm>
#include <deque>

#include "strata/core/log.h"
#include "strata/data/pipeline.h"
#include "strata/data/sources.h"
#include "strata/record/record_reader.h"

namespace strata::data {
namespace {

class TFRecordFileIterator : public StageIterator {
 public:
  TFRecordFileIterator(const IteratorContext& ctx, const std::string* path, const TFRecordOptions* o)
      : StageIterator(ctx, "tfrecord"), path_(path), o_(o) {}

  Status GetNext(Element* out, bool* end) override {
    if (!problems_.empty()) {  // a bad record this read passed over: its error first
      Status problem = std::move(problems_.front());
      problems_.pop_front();
      ++problems_handed_out_;
      *end = false;
      return problem;
    }
    if (done_) {
      *end = true;
      return Status::OK();
    }
    const int64_t t0 = NowNanos();
    Status s;
    std::string_view rec;
    if (has_pending_) {  // what the read behind those errors returned
      has_pending_ = false;
      s = std::move(pending_status_);
      rec = pending_record_;
    } else {
      s = Open();
      if (s.ok()) {
        read_start_ = reader_->offset();
        problems_handed_out_ = 0;
        s = reader_->ReadRecord(&rec);
        if (!problems_.empty()) {
          pending_status_ = std::move(s);
          pending_record_ = rec;  // valid until the reader's next ReadRecord
          has_pending_ = true;
          stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
          return GetNext(out, end);
        }
      }
    }
    if (s.IsOutOfRange()) {
      done_ = true;
      reader_.reset();
      *end = true;
      stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
      return Status::OK();
    }
    if (!s.ok()) {
      done_ = true;  // cannot open or read the file (sticky in the reader): report once, end it
      reader_.reset();
      stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
      return s;
    }
    *end = false;
    out->names.clear();
    out->tensors.resize(1);
    out->tensors[0] = StringTensor(rec);
    ++records_;
    stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
    stats_->AddElement(static_cast<int64_t>(rec.size()));
    return Status::OK();
  }

  Status Save(IteratorState* st) override {
    st->SetInt(Key("done"), done_);
    const bool mid_read = has_pending_ || !problems_.empty();
    st->SetInt(Key("offset"), !reader_ ? 0 : static_cast<int64_t>(mid_read ? read_start_ : reader_->offset()));
    st->SetInt(Key("errors_handed_out"), mid_read ? problems_handed_out_ : 0);
    st->SetInt(Key("records"), records_);
    st->SetString(Key("file"), *path_);
    return Status::OK();
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(int64_t done, st.GetInt(Key("done")));
    STRATA_ASSIGN_OR_RETURN(int64_t offset, st.GetInt(Key("offset")));
    STRATA_ASSIGN_OR_RETURN(records_, st.GetInt(Key("records")));
    STRATA_ASSIGN_OR_RETURN(std::string file, st.GetString(Key("file")));
    if (file != *path_) return InvalidArgument("saved state is for file " + file + ", this iterator reads " + *path_);
    auto handed_out = st.GetInt(Key("errors_handed_out"));  // absent in older states
    done_ = done != 0;
    reader_.reset();
    problems_.clear();
    has_pending_ = false;
    drop_reports_ = handed_out.ok() ? *handed_out : 0;
    if (done_ || offset == 0) return Status::OK();
    STRATA_RETURN_IF_ERROR(Open());
    std::string_view rec;
    while (reader_->offset() < static_cast<uint64_t>(offset)) {
      restoring_ = true;  // problems before the saved offset were handed out (or counted) before
      Status s = reader_->ReadRecord(&rec);
      restoring_ = false;
      if (!s.ok())
        return s.IsOutOfRange() ? Corruption(*path_ + " ends before the saved offset " + std::to_string(offset) +
                                             " (was the file changed?)")
                                : s;
    }
    if (reader_->offset() != static_cast<uint64_t>(offset))
      return Corruption(*path_ + ": no record starts at the saved offset " + std::to_string(offset) +
                        " (was the file changed?)");
    return Status::OK();
  }

 private:
  Status Open() {
    if (reader_) return Status::OK();
    record::RecordReaderOptions ro;
    ro.compression = o_->compression;
    ro.buffer_bytes = static_cast<size_t>(std::max<int64_t>(o_->buffer_size, 4096));
    ro.ignore_errors = true;  // move past bad records; Report decides what the pipeline sees
    ro.reporter = [this](const Status& problem) { Report(problem); };
    STRATA_ASSIGN_OR_RETURN(reader_, record::RecordReader::Open(*path_, ro));
    return Status::OK();
  }

  // A bad record the reader passed over (its message names the file and byte offset).
  void Report(const Status& problem) {
    if (restoring_) return;
    if (o_->skip_corrupt_records) {
      const int64_t n = stats_->errors_ignored.fetch_add(1, std::memory_order_relaxed);
      if (n < 5) {
        STRATA_LOG(kWarn) << "TFRecordDataset: skipped a corrupt record: " << problem.ToString();
      }
      return;
    }
    if (drop_reports_ > 0) {  // handed out before the state this iterator was restored from
      --drop_reports_;
      return;
    }
    problems_.push_back(problem);
  }

  const std::string* path_;
  const TFRecordOptions* o_;
  std::unique_ptr<record::RecordReader> reader_;
  bool done_ = false;
  int64_t records_ = 0;
  // Problems of the current read not handed out yet, then what that read returned.
  std::deque<Status> problems_;
  bool has_pending_ = false;
  Status pending_status_;
  std::string_view pending_record_;
  uint64_t read_start_ = 0;          // reader offset where the current read began
  int64_t problems_handed_out_ = 0;  // errors of the current read already returned
  int64_t drop_reports_ = 0;
  bool restoring_ = false;
};

class TFRecordFileNode : public DatasetNode {
 public:
  TFRecordFileNode(std::string path, TFRecordOptions o) : DatasetNode("tfrecord", {}), path_(std::move(path)), o_(o) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    return std::unique_ptr<IteratorBase>(new TFRecordFileIterator(ctx, &path_, &o_));
  }

 private:
  std::string path_;
  TFRecordOptions o_;
};

}  // namespace

Dataset TFRecordDataset(const Dataset& files, TFRecordOptions o) {
  InterleaveFn open = [o](const Element& e) -> Result<Dataset> {
    if (e.size() < 1) return InvalidArgument("TFRecordDataset: a file element has no components");
    STRATA_ASSIGN_OR_RETURN(std::string path, TensorToString(e[0]));
    return Dataset(std::make_shared<TFRecordFileNode>(std::move(path), o));
  };
  const int64_t cycle = o.cycle_length > 0 ? o.cycle_length : (o.num_parallel_reads > 0 ? o.num_parallel_reads : 8);
  int64_t threads = o.num_parallel_reads;
  if (threads > 0) threads = std::min(threads, cycle);
  return files.interleave(std::move(open), {.cycle_length = cycle, .block_length = 1, .num_parallel_calls = threads});
}

Dataset TFRecordDataset(std::vector<std::string> files, TFRecordOptions o) {
  return TFRecordDataset(from_strings(std::move(files)), o);
}

}  // namespace strata::data
