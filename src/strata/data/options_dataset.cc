// with_options(options): carries pipeline-wide Options. make_iterator() gathers every
// options stage in the description (the one nearest the consumer wins, field by field);
// the stage itself passes elements through unchanged and keeps no statistics.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class OptionsNode : public DatasetNode {
 public:
  OptionsNode(NodePtr input, Options o) : DatasetNode("options", {std::move(input)}), o_(std::move(o)) {}
  const Options* options() const override { return &o_; }

 protected:
  // The options stage is transparent: its input takes its place (same path, same prefix).
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    return inputs()[0]->Make(ctx);
  }

 private:
  Options o_;
};

}  // namespace

NodePtr MakeOptionsNode(NodePtr input, Options o) { return std::make_shared<OptionsNode>(std::move(input), std::move(o)); }

}  // namespace strata::data
