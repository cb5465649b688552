// skip(count): drops the first count elements (-1: all). State: how many were skipped.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class SkipIterator : public UpToCountIterator {
 public:
  SkipIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t count)
      : UpToCountIterator(ctx, "skip", "skipped", std::move(input), count) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (!CountReached()) {
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
      if (*end) return Status::OK();
      ++position_;
    }
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
    if (!*end) stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }
};

}  // namespace

NodePtr MakeSkipNode(NodePtr input, int64_t count) {
  return MakeOneInputNode<SkipIterator>("skip", std::move(input), CheckCountOrAll("skip", count), count);
}

}  // namespace strata::data
