// take(count): the first count elements (-1: all). State: how many were taken.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class TakeIterator : public UpToCountIterator {
 public:
  TakeIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t count)
      : UpToCountIterator(ctx, "take", "taken", std::move(input), count) {}

  Status GetNext(Element* out, bool* end) override {
    if (Finished()) {
      *end = true;
      input_.reset();  // release what the input holds (threads, files)
      return Status::OK();
    }
    StageTimer timer(stats_.get());
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
    if (!*end) {
      ++position_;
      stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    }
    return Status::OK();
  }

 protected:
  bool Finished() const override { return CountReached(); }
};

}  // namespace

NodePtr MakeTakeNode(NodePtr input, int64_t count) {
  return MakeOneInputNode<TakeIterator>("take", std::move(input), CheckCountOrAll("take", count), count);
}

}  // namespace strata::data
