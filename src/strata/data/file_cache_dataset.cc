// cache(path): the first complete pass is written to `path` (element_codec.h describes the
// file); any later pass, in this process or another, reads the file instead of running the
// input. The file appears atomically when the pass completes, so a crash leaves none.
//
// State: the mode and, when reading, the byte offset of the next frame. A state saved
// while writing restores the input's position; that pass then cannot finish the file (its
// first elements are not in this process), so the next pass writes it.
#include <sys/stat.h>
#include <zlib.h>

#include "strata/core/file.h"
#include "strata/data/element_codec.h"
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

uint32_t Crc(std::string_view b) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size())));
}

bool FileExists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

class FileCacheIterator : public StageIterator {
 public:
  FileCacheIterator(const IteratorContext& ctx, NodePtr input, const std::string* path)
      : StageIterator(ctx, "cache_file"), input_(std::move(input)), path_(path) {}

  Status Init() {
    if (FileExists(*path_)) return OpenForReading();
    return Status::OK();
  }

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    if (file_) return ReadFrame(out, end);
    if (!input_) {
      STRATA_RETURN_IF_ERROR(input_.Make(ctx_.Child(0)));
      if (writing_) {
        STRATA_ASSIGN_OR_RETURN(writer_, NewAtomicWritableFile(*path_));
        STRATA_RETURN_IF_ERROR(writer_->Append(std::string_view(kCacheMagic, 8)));
      }
    }
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
    if (*end) {
      if (writer_) {
        frame_.clear();
        PutFixed64(&frame_, kCacheTrailerMarker);
        PutFixed64(&frame_, static_cast<uint64_t>(count_));
        STRATA_RETURN_IF_ERROR(writer_->Append(frame_));
        STRATA_RETURN_IF_ERROR(Annotate(writer_->Close().WithContext("writing cache " + *path_)));
        writer_.reset();
      }
      return Status::OK();
    }
    if (writer_) {
      payload_.clear();
      EncodeElement(*out, &payload_);
      frame_.clear();
      PutFixed64(&frame_, payload_.size());
      PutFixed32(&frame_, Crc(payload_));
      STRATA_RETURN_IF_ERROR(writer_->Append(frame_));
      STRATA_RETURN_IF_ERROR(writer_->Append(payload_));
    }
    ++count_;
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

  Status Save(IteratorState* st) override {
    st->SetInt(Key("reading"), file_ != nullptr);
    st->SetInt(Key("offset"), static_cast<int64_t>(offset_));
    st->SetInt(Key("count"), count_);
    return input_.Save(st, ctx_.prefix);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(int64_t reading, st.GetInt(Key("reading")));
    STRATA_ASSIGN_OR_RETURN(int64_t offset, st.GetInt(Key("offset")));
    STRATA_ASSIGN_OR_RETURN(count_, st.GetInt(Key("count")));
    STRATA_ASSIGN_OR_RETURN(bool has_input, OnDemandInput::Saved(st, ctx_.prefix));
    if (reading) {
      if (!file_) STRATA_RETURN_IF_ERROR(OpenForReading());
      if (offset < 8 || static_cast<uint64_t>(offset) > size_)
        return Corruption("cache " + *path_ + ": saved offset " + std::to_string(offset) + " outside the file");
      offset_ = static_cast<uint64_t>(offset);
      return Status::OK();
    }
    file_.reset();
    writing_ = false;
    return input_.Restore(st, has_input, ctx_.Child(0));
  }

 private:
  Status OpenForReading() {
    STRATA_ASSIGN_OR_RETURN(file_, OpenRandomAccessFile(*path_));
    STRATA_ASSIGN_OR_RETURN(size_, file_->Size());
    char magic[8];
    STRATA_ASSIGN_OR_RETURN(size_t n, file_->Read(0, 8, magic));
    if (n != 8 || std::string_view(magic, 8) != std::string_view(kCacheMagic, 8))
      return Corruption("cache " + *path_ + ": not a Strata cache file (bad magic at byte 0)");
    offset_ = 8;
    return Status::OK();
  }

  Status ReadFrame(Element* out, bool* end) {
    auto where = [&](uint64_t at) { return "cache " + *path_ + " at byte " + std::to_string(at); };
    char head[16];
    STRATA_ASSIGN_OR_RETURN(size_t n, file_->Read(offset_, 12, head));
    if (n < 12) return Truncated(where(offset_) + ": file ends inside a frame header");
    std::string_view h(head, 12);
    uint64_t len = 0;
    uint32_t crc = 0;
    GetFixed64(&h, &len);
    GetFixed32(&h, &crc);
    if (len == kCacheTrailerMarker) {
      *end = true;
      return Status::OK();
    }
    if (len > size_ - offset_ - 12) return Corruption(where(offset_) + ": frame length " + std::to_string(len) + " runs past the end of the file");
    payload_.resize(len);
    STRATA_ASSIGN_OR_RETURN(n, file_->Read(offset_ + 12, len, payload_.data()));
    if (n != len) return Truncated(where(offset_) + ": short read");
    if (Crc(payload_) != crc) return Corruption(where(offset_) + ": frame CRC mismatch");
    std::string_view p = payload_;
    STRATA_RETURN_IF_ERROR(DecodeElement(&p, out, where(offset_ + 12)));
    offset_ += 12 + len;
    *end = false;
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

  OnDemandInput input_;
  const std::string* path_;
  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<WritableFile> writer_;
  bool writing_ = true;
  uint64_t offset_ = 0, size_ = 0;
  int64_t count_ = 0;
  std::string frame_, payload_;
};

class FileCacheNode : public DatasetNode {
 public:
  FileCacheNode(NodePtr input, std::string path) : DatasetNode("cache_file", {std::move(input)}), path_(std::move(path)) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    auto it = std::make_unique<FileCacheIterator>(ctx, inputs()[0], &path_);
    STRATA_RETURN_IF_ERROR(it->Init());
    return std::unique_ptr<IteratorBase>(std::move(it));
  }

 private:
  std::string path_;
};

}  // namespace

NodePtr MakeFileCacheNode(NodePtr input, std::string path) {
  return std::make_shared<FileCacheNode>(std::move(input), std::move(path));
}

}  // namespace strata::data
