// TFRecordDataset: the records of each file (record/record_reader.h reads the framing,
// checks CRCs, inflates GZIP/ZLIB), interleaved across files when num_parallel_reads != 1.
//
// State of one file: its name and the stream offset of the next record. A restore reopens
// the file and reads forward to that offset (framing and CRCs only, no parsing): offsets
// are in uncompressed bytes, so this works for compressed files too.
#include <algorithm>

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
    if (done_) {
      *end = true;
      return Status::OK();
    }
    const int64_t t0 = NowNanos();
    Status s = Open();
    std::string_view rec;
    if (s.ok()) s = reader_->ReadRecord(&rec);
    if (s.IsOutOfRange()) {
      done_ = true;
      reader_.reset();
      *end = true;
      stats_->busy_ns.fetch_add(NowNanos() - t0, std::memory_order_relaxed);
      return Status::OK();
    }
    if (!s.ok()) {
      done_ = true;  // errors are sticky in the reader: report once, then end this file
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
    st->SetInt(Key("offset"), reader_ ? static_cast<int64_t>(reader_->offset()) : 0);
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
    done_ = done != 0;
    if (done_ || offset == 0) return Status::OK();
    STRATA_RETURN_IF_ERROR(Open());
    std::string_view rec;
    while (reader_->offset() < static_cast<uint64_t>(offset)) {
      Status s = reader_->ReadRecord(&rec);
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
    ro.ignore_errors = o_->skip_corrupt_records;
    STRATA_ASSIGN_OR_RETURN(reader_, record::RecordReader::Open(*path_, ro));
    return Status::OK();
  }

  const std::string* path_;
  const TFRecordOptions* o_;
  std::unique_ptr<record::RecordReader> reader_;
  bool done_ = false;
  int64_t records_ = 0;
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
