// cache(): the first complete pass over the input is kept in memory; later passes (the
// epochs of an enclosing repeat) read the memory instead of running the input again.
//
// A pass that stops early (take, an error, a restore into the middle of the first pass)
// does not complete the cache; the next pass fills it. State: the mode and index. A state
// saved while reading from memory restores in a new process by re-running the input to
// that index (the input of a cache is expected to be deterministic), filling the cache.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

struct MemoryCache {
  std::mutex mu;
  bool complete = false;
  std::vector<Element> elements;
};

class MemoryCacheIterator : public StageIterator {
 public:
  MemoryCacheIterator(const IteratorContext& ctx, NodePtr input, std::shared_ptr<MemoryCache> cache)
      : StageIterator(ctx, "cache"), input_(std::move(input)), cache_(std::move(cache)) {
    std::lock_guard<std::mutex> l(cache_->mu);
    reading_ = cache_->complete;
  }

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    if (reading_) {
      std::lock_guard<std::mutex> l(cache_->mu);
      if (index_ >= static_cast<int64_t>(cache_->elements.size())) {
        *end = true;
        return Status::OK();
      }
      *out = cache_->elements[index_++];
      *end = false;
      stats_->AddElement(static_cast<int64_t>(out->nbytes()));
      return Status::OK();
    }
    if (!input_) STRATA_RETURN_IF_ERROR(input_.Make(ctx_.Child(0)));
    while (true) {
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
      if (*end) {
        if (filling_) {
          std::lock_guard<std::mutex> l(cache_->mu);
          if (!cache_->complete) {
            cache_->elements = std::move(pending_);
            cache_->complete = true;
          }
        }
        pending_.clear();
        return Status::OK();
      }
      if (filling_) pending_.push_back(*out);
      if (index_++ >= replay_until_) break;  // replayed elements after a restore are not handed out
    }
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

  // Reading memory, a fresh iterator reads the same memory (and a new process re-runs the
  // input, which a cache expects to be deterministic); filling, only a deterministic pipeline
  // gives the same elements again.
  bool ReplaysFromStart() const override { return reading_ || ctx_.deterministic; }

  Status Save(IteratorState* st) override {
    st->SetInt(Key("reading"), reading_);
    st->SetInt(Key("index"), index_);
    return input_.Save(st, ctx_.prefix);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(int64_t reading, st.GetInt(Key("reading")));
    STRATA_ASSIGN_OR_RETURN(int64_t index, st.GetInt(Key("index")));
    STRATA_ASSIGN_OR_RETURN(bool has_input, OnDemandInput::Saved(st, ctx_.prefix));
    bool complete;
    {
      std::lock_guard<std::mutex> l(cache_->mu);
      complete = cache_->complete;
    }
    if (reading) {
      if (complete) {  // same process: the memory is still there
        reading_ = true;
        index_ = index;
        return Status::OK();
      }
      reading_ = false;  // a new process: re-run the input up to `index`, filling the cache
      filling_ = true;
      index_ = 0;
      replay_until_ = index;
      return Status::OK();
    }
    reading_ = false;
    filling_ = false;  // the elements before the saved position are gone: this pass cannot complete it
    index_ = index;
    return input_.Restore(st, has_input, ctx_.Child(0));
  }

 private:
  OnDemandInput input_;
  std::shared_ptr<MemoryCache> cache_;
  bool reading_ = false;
  bool filling_ = true;
  int64_t index_ = 0;
  int64_t replay_until_ = 0;
  std::vector<Element> pending_;
};

class MemoryCacheNode : public DatasetNode {
 public:
  explicit MemoryCacheNode(NodePtr input) : DatasetNode("cache", {std::move(input)}) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    char id[32];
    std::snprintf(id, sizeof id, "@%p", static_cast<const void*>(this));
    auto cache = ctx.pipeline->Resource<MemoryCache>("memory_cache:" + ctx.path + id);
    return std::unique_ptr<IteratorBase>(new MemoryCacheIterator(ctx, inputs()[0], std::move(cache)));
  }
};

}  // namespace

NodePtr MakeMemoryCacheNode(NodePtr input) { return std::make_shared<MemoryCacheNode>(std::move(input)); }

}  // namespace strata::data
