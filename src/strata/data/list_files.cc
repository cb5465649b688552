// list_files(pattern) and from_strings(names): a source of string elements.
// State: the next index.
#include <algorithm>

#include "strata/data/pipeline.h"
#include "strata/data/sources.h"
#include "strata/io/file_system.h"

namespace strata::data {
namespace {

class StringsIterator : public StageIterator {
 public:
  StringsIterator(const IteratorContext& ctx, const std::vector<std::string>* s) : StageIterator(ctx, "files"), s_(s) {
    if (const auto& shard = ctx.pipeline->options().shard_files; shard && shard->num_shards > 1) {
      stride_ = static_cast<size_t>(shard->num_shards);
      next_ = static_cast<size_t>(shard->index);
    }
  }
  Status GetNext(Element* out, bool* end) override {
    if (next_ >= s_->size()) {
      *end = true;
      return Status::OK();
    }
    *end = false;
    *out = Element({StringTensor((*s_)[next_])});
    next_ += stride_;
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }
  Status Save(IteratorState* st) override {
    st->SetInt(Key("next"), static_cast<int64_t>(next_));
    return Status::OK();
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(int64_t n, st.GetInt(Key("next")));
    if (n < 0 || static_cast<size_t>(n) > s_->size() + stride_) return Corruption("files state index out of range");
    next_ = static_cast<size_t>(n);
    return Status::OK();
  }

 private:
  const std::vector<std::string>* s_;
  size_t next_ = 0;
  size_t stride_ = 1;  // > 1 when auto-sharded by file: this worker's names only
};

class StringsNode : public DatasetNode {
 public:
  explicit StringsNode(std::vector<std::string> s) : DatasetNode("files", {}), s_(std::move(s)) {}
  const std::vector<std::string>* file_names() const override { return &s_; }

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    return std::unique_ptr<IteratorBase>(new StringsIterator(ctx, &s_));
  }

 private:
  std::vector<std::string> s_;
};

}  // namespace

Dataset from_strings(std::vector<std::string> strings) { return Dataset(std::make_shared<StringsNode>(std::move(strings))); }

Result<Dataset> list_files(const std::string& pattern, ListFilesOptions options) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= pattern.size()) {
    size_t comma = pattern.find(',', start);
    if (comma == std::string::npos) comma = pattern.size();
    const std::string one = pattern.substr(start, comma - start);
    start = comma + 1;
    if (one.empty()) continue;
    // Local glob, or an object-store listing for s3:// and gs:// (io/file_system.h).
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> matched, io::Glob(one));
    names.insert(names.end(), matched.begin(), matched.end());
  }
  if (names.empty()) return NotFound("list_files: no files match '" + pattern + "'");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const int64_t n = static_cast<int64_t>(names.size());
  Dataset ds = from_strings(std::move(names));
  if (options.shuffle) ds = ds.shuffle(n, {.seed = options.seed, .reshuffle_each_iteration = true});
  return ds;
}

}  // namespace strata::data
