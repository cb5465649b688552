// range(start, stop, step): i64 scalars. State: the next value.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class RangeIterator : public CountingIterator {
 public:
  RangeIterator(const IteratorContext& ctx, int64_t start, int64_t stop, int64_t step)
      : CountingIterator(ctx, "range", "next", start), stop_(stop), step_(step) {}

  Status GetNext(Element* out, bool* end) override {
    if (step_ > 0 ? position_ >= stop_ : position_ <= stop_) {
      *end = true;
      return Status::OK();
    }
    *end = false;
    out->names.clear();
    out->tensors.resize(1);
    out->tensors[0] = Scalar<int64_t>(position_);
    position_ += step_;
    stats_->AddElement(8);
    return Status::OK();
  }
  bool ReplaysFromStart() const override { return true; }

 private:
  const int64_t stop_, step_;
};

class RangeNode : public DatasetNode {
 public:
  RangeNode(int64_t start, int64_t stop, int64_t step)
      : DatasetNode("range", {}, step == 0 ? InvalidArgument("range: step must not be 0") : Status::OK()),
        start_(start), stop_(stop), step_(step) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    return std::unique_ptr<IteratorBase>(new RangeIterator(ctx, start_, stop_, step_));
  }

 private:
  int64_t start_, stop_, step_;
};

}  // namespace

NodePtr MakeRangeNode(int64_t start, int64_t stop, int64_t step) {
  return std::make_shared<RangeNode>(start, stop, step);
}

}  // namespace strata::data
