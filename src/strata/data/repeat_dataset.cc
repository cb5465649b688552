// repeat(count): runs its input count times (-1: forever), re-making the input iterator
// each epoch with a new epoch seed (shuffles with reshuffle_each_iteration change order).
// An epoch that yields nothing ends the repeat (no spinning on an empty input).
// State: the epoch number and the current input iterator's position.
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class RepeatIterator : public StageIterator {
 public:
  RepeatIterator(const IteratorContext& ctx, NodePtr input, int64_t count)
      : StageIterator(ctx, "repeat"), input_(std::move(input)), count_(count) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (true) {
      if (count_ >= 0 && epoch_ >= count_) {
        *end = true;
        return Status::OK();
      }
      if (!input_) STRATA_RETURN_IF_ERROR(input_.Make(EpochContext()));
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), out, end));
      if (!*end) {
        produced_in_epoch_ = true;
        stats_->AddElement(static_cast<int64_t>(out->nbytes()));
        return Status::OK();
      }
      input_.reset();
      ++epoch_;
      if (!produced_in_epoch_) {  // an empty input: stop rather than spin
        epoch_ = count_ >= 0 ? count_ : epoch_;
        *end = true;
        done_ = true;
        return Status::OK();
      }
      produced_in_epoch_ = false;
    }
  }

  Status Save(IteratorState* st) override {
    st->SetInt(Key("epoch"), epoch_);
    st->SetInt(Key("done"), done_);
    st->SetInt(Key("produced"), produced_in_epoch_);
    return input_.Save(st, ctx_.prefix);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(epoch_, st.GetInt(Key("epoch")));
    STRATA_ASSIGN_OR_RETURN(int64_t done, st.GetInt(Key("done")));
    STRATA_ASSIGN_OR_RETURN(int64_t produced, st.GetInt(Key("produced")));
    STRATA_ASSIGN_OR_RETURN(bool has_input, OnDemandInput::Saved(st, ctx_.prefix));
    done_ = done != 0;
    produced_in_epoch_ = produced != 0;
    input_.reset();
    if (done_) {
      count_ = 0;
      return Status::OK();
    }
    return input_.Restore(st, has_input, EpochContext());
  }

 private:
  // The input's context in the current epoch.
  IteratorContext EpochContext() const {
    IteratorContext c = ctx_.Child(0);
    c.epoch_seed = MixSeed(ctx_.epoch_seed, static_cast<uint64_t>(epoch_));
    return c;
  }

  OnDemandInput input_;
  int64_t count_;
  int64_t epoch_ = 0;
  bool produced_in_epoch_ = false;
  bool done_ = false;
};

class RepeatNode : public DatasetNode {
 public:
  RepeatNode(NodePtr input, int64_t count)
      : DatasetNode("repeat", {std::move(input)}, CheckCountOrAll("repeat", count)), count_(count) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    return std::unique_ptr<IteratorBase>(new RepeatIterator(ctx, inputs()[0], count_));
  }

 private:
  int64_t count_;
};

}  // namespace

NodePtr MakeRepeatNode(NodePtr input, int64_t count) { return std::make_shared<RepeatNode>(std::move(input), count); }

}  // namespace strata::data
