// filter(predicate): keeps the elements for which predicate returns true.
// State: the input's.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class FilterIterator : public PassThroughStateIterator {
 public:
  FilterIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, const FilterFn* fn)
      : PassThroughStateIterator(ctx, "filter", std::move(input)), fn_(fn) {}

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

class FilterNode : public DatasetNode {
 public:
  FilterNode(NodePtr input, FilterFn fn)
      : DatasetNode("filter", {std::move(input)}, fn ? Status::OK() : InvalidArgument("filter: no predicate given")),
        fn_(std::move(fn)) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    return std::unique_ptr<IteratorBase>(new FilterIterator(ctx, std::move(in), &fn_));
  }

 private:
  FilterFn fn_;
};

}  // namespace

NodePtr MakeFilterNode(NodePtr input, FilterFn fn) { return std::make_shared<FilterNode>(std::move(input), std::move(fn)); }

}  // namespace strata::data
