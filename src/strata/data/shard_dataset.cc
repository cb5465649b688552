// shard(num_shards, index): every num_shards-th element starting at index (a worker's
// share of a multi-worker job). State: the position within the current group.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class ShardIterator : public CountingIterator {
 public:
  ShardIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t num, int64_t index)
      : CountingIterator(ctx, "shard", "pos", 0, std::move(input)), num_(num), index_(index) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (true) {
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
      if (*end) return Status::OK();
      const int64_t pos = position_;
      position_ = (position_ + 1) % num_;
      if (pos == index_) {
        stats_->AddElement(static_cast<int64_t>(out->nbytes()));
        return Status::OK();
      }
    }
  }

 protected:
  Status CheckPosition() const override {
    if (position_ < 0 || position_ >= num_)
      return Corruption("shard state position " + std::to_string(position_) + " out of range");
    return Status::OK();
  }

 private:
  const int64_t num_, index_;
};

Status CheckShard(int64_t num, int64_t index) {
  if (num <= 0) return InvalidArgument("shard: num_shards must be > 0, got " + std::to_string(num));
  if (index < 0 || index >= num)
    return InvalidArgument("shard: index " + std::to_string(index) + " not in [0, " + std::to_string(num) + ")");
  return Status::OK();
}

}  // namespace

NodePtr MakeShardNode(NodePtr input, int64_t num, int64_t index) {
  return MakeOneInputNode<ShardIterator>("shard", std::move(input), CheckShard(num, index), num, index);
}

}  // namespace strata::data
