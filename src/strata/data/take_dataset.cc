// take(count): the first count elements (-1: all). State: how many were taken.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class TakeIterator : public StageIterator {
 public:
  TakeIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t count)
      : StageIterator(ctx, "take"), input_(std::move(input)), count_(count) {}

  Status GetNext(Element* out, bool* end) override {
    if (count_ >= 0 && taken_ >= count_) {
      *end = true;
      input_.reset();  // release what the input holds (threads, files)
      return Status::OK();
    }
    StageTimer timer(stats_.get());
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
    if (!*end) {
      ++taken_;
      stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    }
    return Status::OK();
  }
  Status Save(IteratorState* st) override {
    st->SetInt(Key("taken"), taken_);
    return input_ ? input_->Save(st) : Status::OK();
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(taken_, st.GetInt(Key("taken")));
    if (count_ >= 0 && taken_ >= count_) return Status::OK();
    return input_->Restore(st);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  const int64_t count_;
  int64_t taken_ = 0;
};

class TakeNode : public DatasetNode {
 public:
  TakeNode(NodePtr input, int64_t count)
      : DatasetNode("take", {std::move(input)},
                    count >= -1 ? Status::OK() : InvalidArgument("take: count must be >= -1, got " + std::to_string(count))),
        count_(count) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    return std::unique_ptr<IteratorBase>(new TakeIterator(ctx, std::move(in), count_));
  }

 private:
  int64_t count_;
};

}  // namespace

NodePtr MakeTakeNode(NodePtr input, int64_t count) { return std::make_shared<TakeNode>(std::move(input), count); }

}  // namespace strata::data
