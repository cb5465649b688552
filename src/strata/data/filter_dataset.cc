// filter(predicate): keeps the elements for which predicate returns true.
// State: the input's.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class FilterIterator : public PassThroughStateIterator {
 public:
  FilterIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, const FilterFn& fn)
      : PassThroughStateIterator(ctx, "filter", std::move(input)), fn_(&fn) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (true) {
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
      if (*end) return Status::OK();
      Result<bool> keep = (*fn_)(*out);
      if (!keep.ok()) return Annotate(keep.status());
      if (*keep) {
        stats_->AddElement(static_cast<int64_t>(out->nbytes()));
        return Status::OK();
      }
    }
  }

 private:
  const FilterFn* fn_;
};

}  // namespace

NodePtr MakeFilterNode(NodePtr input, FilterFn fn) {
  Status error = fn ? Status::OK() : InvalidArgument("filter: no predicate given");
  return MakeOneInputNode<FilterIterator>("filter", std::move(input), std::move(error), std::move(fn));
}

}  // namespace strata::data
