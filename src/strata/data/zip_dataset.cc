// zip(datasets): element i is the concatenation of the inputs' elements i (a tuple, or a
// dict when every input is a dict); ends with the shortest input. State: each input's.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class ZipIterator : public StageIterator {
 public:
  ZipIterator(const IteratorContext& ctx, std::vector<std::unique_ptr<IteratorBase>> inputs)
      : StageIterator(ctx, "zip"), inputs_(std::move(inputs)) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    Element result;
    bool all_dicts = true;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      STRATA_RETURN_IF_ERROR(timer.Input(inputs_[i].get(), &part_, end));
      if (*end) return Status::OK();
      all_dicts = all_dicts && part_.is_dict();
      for (size_t c = 0; c < part_.size(); ++c) {
        result.tensors.push_back(std::move(part_.tensors[c]));
        if (part_.is_dict()) result.names.push_back(part_.names[c]);
      }
    }
    if (!all_dicts) result.names.clear();
    for (size_t a = 0; a < result.names.size(); ++a)
      for (size_t b = a + 1; b < result.names.size(); ++b)
        if (result.names[a] == result.names[b])
          return Annotate(InvalidArgument("zipped dicts share the key '" + result.names[a] + "'"));
    *out = std::move(result);
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }
  Status Save(IteratorState* st) override {
    for (auto& in : inputs_) STRATA_RETURN_IF_ERROR(in->Save(st));
    return Status::OK();
  }
  Status Restore(const IteratorState& st) override {
    for (auto& in : inputs_) STRATA_RETURN_IF_ERROR(in->Restore(st));
    return Status::OK();
  }

 private:
  std::vector<std::unique_ptr<IteratorBase>> inputs_;
  Element part_;
};

class ZipNode : public DatasetNode {
 public:
  explicit ZipNode(std::vector<NodePtr> inputs)
      : DatasetNode("zip", inputs, inputs.empty() ? InvalidArgument("zip: no datasets given") : Status::OK()) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    std::vector<std::unique_ptr<IteratorBase>> its;
    for (size_t i = 0; i < inputs().size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(auto in, inputs()[i]->Make(ctx.Child(static_cast<int>(i))));
      its.push_back(std::move(in));
    }
    return std::unique_ptr<IteratorBase>(new ZipIterator(ctx, std::move(its)));
  }
};

}  // namespace

NodePtr MakeZipNode(std::vector<NodePtr> inputs) { return std::make_shared<ZipNode>(std::move(inputs)); }

}  // namespace strata::data
