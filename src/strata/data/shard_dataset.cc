// shard(num_shards, index): every num_shards-th element starting at index (a worker's
// share of a multi-worker job). State: the position within the current group.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class ShardIterator : public StageIterator {
 public:
  ShardIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t num, int64_t index)
      : StageIterator(ctx, "shard"), input_(std::move(input)), num_(num), index_(index) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (true) {
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
      if (*end) return Status::OK();
      const int64_t pos = pos_;
      pos_ = (pos_ + 1) % num_;
      if (pos == index_) {
        stats_->AddElement(static_cast<int64_t>(out->nbytes()));
        return Status::OK();
      }
    }
  }
  Status Save(IteratorState* st) override {
    st->SetInt(Key("pos"), pos_);
    return input_->Save(st);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(pos_, st.GetInt(Key("pos")));
    if (pos_ < 0 || pos_ >= num_) return Corruption("shard state position " + std::to_string(pos_) + " out of range");
    return input_->Restore(st);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  const int64_t num_, index_;
  int64_t pos_ = 0;
};

Status CheckShard(int64_t num, int64_t index) {
  if (num <= 0) return InvalidArgument("shard: num_shards must be > 0, got " + std::to_string(num));
  if (index < 0 || index >= num)
    return InvalidArgument("shard: index " + std::to_string(index) + " not in [0, " + std::to_string(num) + ")");
  return Status::OK();
}

class ShardNode : public DatasetNode {
 public:
  ShardNode(NodePtr input, int64_t num, int64_t index)
      : DatasetNode("shard", {std::move(input)}, CheckShard(num, index)), num_(num), index_(index) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    return std::unique_ptr<IteratorBase>(new ShardIterator(ctx, std::move(in), num_, index_));
  }

 private:
  int64_t num_, index_;
};

}  // namespace

NodePtr MakeShardNode(NodePtr input, int64_t num, int64_t index) {
  return std::make_shared<ShardNode>(std::move(input), num, index);
}

}  // namespace strata::data
