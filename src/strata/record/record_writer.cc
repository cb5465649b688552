#include "strata/record/record_writer.h"

#include "strata/record/output_stream.h"

namespace strata::record {

RecordWriter::RecordWriter(std::unique_ptr<OutputStream> out) : out_(std::move(out)) {}

RecordWriter::~RecordWriter() = default;  // unclosed atomic files leave nothing behind

Result<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path, RecordWriterOptions options) {
  if (options.compression == Compression::kAuto)
    return InvalidArgument("writing " + path + ": choose compression none, zlib or gzip (auto is for reading)");
  std::unique_ptr<WritableFile> file;
  if (options.atomic) {
    STRATA_ASSIGN_OR_RETURN(file, NewAtomicWritableFile(path));
  } else {
    STRATA_ASSIGN_OR_RETURN(file, NewAppendingFile(path));
  }
  return Open(std::move(file), options);
}

Result<std::unique_ptr<RecordWriter>> RecordWriter::Open(std::unique_ptr<WritableFile> file,
                                                         RecordWriterOptions options) {
  std::string name = file->name();
  auto out = NewOutputStream(std::move(file), options.compression, options.compression_level);
  if (!out.ok()) return out.status().WithContext("writing " + name);
  return std::unique_ptr<RecordWriter>(new RecordWriter(std::move(out).value()));
}

const std::string& RecordWriter::filename() const { return out_->name(); }

Status RecordWriter::WriteRecord(std::string_view data) {
  if (closed_) return Internal("WriteRecord after Close on " + filename());
  if (!sticky_.ok()) return sticky_;
  char header[kHeaderSize], footer[kFooterSize];
  EncodeHeader(data.size(), header);
  EncodeFooter(data, footer);
  Status s = out_->Append(std::string_view(header, kHeaderSize));
  if (s.ok()) s = out_->Append(data);
  if (s.ok()) s = out_->Append(std::string_view(footer, kFooterSize));
  if (!s.ok()) {
    sticky_ = s;
    return s;
  }
  ++records_;
  bytes_ += kHeaderSize + data.size() + kFooterSize;
  return Status::OK();
}

Status RecordWriter::Flush() {
  if (closed_) return Status::OK();
  if (!sticky_.ok()) return sticky_;
  return out_->Flush();
}

Status RecordWriter::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  if (!sticky_.ok()) return sticky_;  // the atomic temporary is dropped with out_
  return out_->Close();
}

}  // namespace strata::record
