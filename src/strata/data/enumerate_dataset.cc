// enumerate(start): (i64 index, components...) — or, for a dict, adds an "index" key.
// State: the next index.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class EnumerateIterator : public StageIterator {
 public:
  EnumerateIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t start)
      : StageIterator(ctx, "enumerate"), input_(std::move(input)), next_(start) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
    if (*end) return Status::OK();
    out->tensors.insert(out->tensors.begin(), Scalar<int64_t>(next_++));
    if (out->is_dict()) out->names.insert(out->names.begin(), "index");
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }
  Status Save(IteratorState* st) override {
    st->SetInt(Key("next"), next_);
    return input_->Save(st);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(next_, st.GetInt(Key("next")));
    return input_->Restore(st);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  int64_t next_;
};

class EnumerateNode : public DatasetNode {
 public:
  EnumerateNode(NodePtr input, int64_t start) : DatasetNode("enumerate", {std::move(input)}), start_(start) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    return std::unique_ptr<IteratorBase>(new EnumerateIterator(ctx, std::move(in), start_));
  }

 private:
  int64_t start_;
};

}  // namespace

NodePtr MakeEnumerateNode(NodePtr input, int64_t start) {
  return std::make_shared<EnumerateNode>(std::move(input), start);
}

}  // namespace strata::data
