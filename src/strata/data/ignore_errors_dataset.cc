// ignore_errors(): drops elements whose production failed (a corrupt record, a JPEG that
// does not decode) and counts them in the stage's errors_ignored statistic; the first few
// are logged with their message. End of sequence and success pass through.
// State: the input's.
#include "strata/core/log.h"
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class IgnoreErrorsIterator : public PassThroughStateIterator {
 public:
  IgnoreErrorsIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input)
      : PassThroughStateIterator(ctx, "ignore_errors", std::move(input)) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (true) {
      Status s = timer.Input(input_.get(), out, end);
      if (s.ok()) {
        if (!*end) stats_->AddElement(static_cast<int64_t>(out->nbytes()));
        return s;
      }
      const int64_t n = stats_->errors_ignored.fetch_add(1, std::memory_order_relaxed);
      if (n < 5) {
        STRATA_LOG(kWarn) << "ignore_errors: dropped an element: " << s.ToString();
      }
    }
  }
};

}  // namespace

NodePtr MakeIgnoreErrorsNode(NodePtr input) {
  return MakeOneInputNode<IgnoreErrorsIterator>("ignore_errors", std::move(input), Status::OK());
}

}  // namespace strata::data
