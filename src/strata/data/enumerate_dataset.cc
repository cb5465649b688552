// enumerate(start): (i64 index, components...) — or, for a dict, adds an "index" key.
// State: the next index.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class EnumerateIterator : public CountingIterator {
 public:
  EnumerateIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t start)
      : CountingIterator(ctx, "enumerate", "next", start, std::move(input)) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
    if (*end) return Status::OK();
    out->tensors.insert(out->tensors.begin(), Scalar<int64_t>(position_++));
    if (out->is_dict()) out->names.insert(out->names.begin(), "index");
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }
};

}  // namespace

NodePtr MakeEnumerateNode(NodePtr input, int64_t start) {
  return MakeOneInputNode<EnumerateIterator>("enumerate", std::move(input), Status::OK(), start);
}

}  // namespace strata::data
