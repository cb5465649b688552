// from_tensor_slices(components): element i is (c0[i], c1[i], ...), views of the inputs.
// State: the next index.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

Status Check(const Element& c) {
  if (c.size() == 0) return InvalidArgument("from_tensor_slices: no components");
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].defined() || c[i].rank() == 0)
      return InvalidArgument("from_tensor_slices: component " + std::to_string(i) + " is " + c[i].DebugString() +
                             ", needs rank >= 1 to be sliced");
    if (c[i].shape().dim(0) != c[0].shape().dim(0))
      return InvalidArgument("from_tensor_slices: component " + std::to_string(i) + " has " +
                             std::to_string(c[i].shape().dim(0)) + " rows, component 0 has " +
                             std::to_string(c[0].shape().dim(0)));
  }
  if (c.is_dict() && c.names.size() != c.size()) return InvalidArgument("from_tensor_slices: names and components differ in count");
  return Status::OK();
}

class TensorSlicesIterator : public CountingIterator {
 public:
  TensorSlicesIterator(const IteratorContext& ctx, const Element* c)
      : CountingIterator(ctx, "tensor_slices", "next", 0), c_(c) {}

  Status GetNext(Element* out, bool* end) override {
    if (position_ >= c_->tensors[0].shape().dim(0)) {
      *end = true;
      return Status::OK();
    }
    *end = false;
    out->names = c_->names;
    out->tensors.resize(c_->size());
    size_t bytes = 0;
    for (size_t i = 0; i < c_->size(); ++i) {
      const Tensor& t = c_->tensors[i];
      STRATA_ASSIGN_OR_RETURN(Tensor row, t.Slice(0, position_, position_ + 1));
      std::vector<int64_t> dims(t.shape().dims().begin() + 1, t.shape().dims().end());
      if (row.is_contiguous()) {
        STRATA_ASSIGN_OR_RETURN(out->tensors[i], row.Reshape(Shape(std::move(dims))));
      } else {
        STRATA_ASSIGN_OR_RETURN(out->tensors[i], row.Contiguous().Reshape(Shape(std::move(dims))));
      }
      bytes += out->tensors[i].nbytes();
    }
    ++position_;
    stats_->AddElement(static_cast<int64_t>(bytes));
    return Status::OK();
  }

 private:
  const Element* c_;  // owned by the node, which outlives its iterators
};

class TensorSlicesNode : public DatasetNode {
 public:
  explicit TensorSlicesNode(Element c) : DatasetNode("tensor_slices", {}, Check(c)), c_(std::move(c)) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    return std::unique_ptr<IteratorBase>(new TensorSlicesIterator(ctx, &c_));
  }

 private:
  Element c_;
};

}  // namespace

NodePtr MakeTensorSlicesNode(Element components) { return std::make_shared<TensorSlicesNode>(std::move(components)); }

}  // namespace strata::data
