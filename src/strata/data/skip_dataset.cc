// skip(count): drops the first count elements (-1: all). State: how many were skipped.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class SkipIterator : public StageIterator {
 public:
  SkipIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t count)
      : StageIterator(ctx, "skip"), input_(std::move(input)), count_(count) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (count_ < 0 || skipped_ < count_) {
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
      if (*end) return Status::OK();
      ++skipped_;
    }
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
    if (!*end) stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }
  Status Save(IteratorState* st) override {
    st->SetInt(Key("skipped"), skipped_);
    return input_->Save(st);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(skipped_, st.GetInt(Key("skipped")));
    return input_->Restore(st);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  const int64_t count_;
  int64_t skipped_ = 0;
};

class SkipNode : public DatasetNode {
 public:
  SkipNode(NodePtr input, int64_t count)
      : DatasetNode("skip", {std::move(input)},
                    count >= -1 ? Status::OK() : InvalidArgument("skip: count must be >= -1, got " + std::to_string(count))),
        count_(count) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    return std::unique_ptr<IteratorBase>(new SkipIterator(ctx, std::move(in), count_));
  }

 private:
  int64_t count_;
};

}  // namespace

NodePtr MakeSkipNode(NodePtr input, int64_t count) { return std::make_shared<SkipNode>(std::move(input), count); }

}  // namespace strata::data
