// shuffle(buffer_size, {.seed, .reshuffle_each_iteration}): a uniform choice from a
// buffer of the next buffer_size input elements (tf.data's algorithm).
//
// The generator is seeded from the seed (drawn once if none is given) mixed with the epoch
// of an enclosing repeat when reshuffling, so a seeded pipeline repeats its order exactly.
// State: the generator's word, the buffer's elements, and the input's position.
#include <random>

#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class ShuffleIterator : public StageIterator {
 public:
  ShuffleIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t n, uint64_t seed)
      : StageIterator(ctx, "shuffle"), input_(std::move(input)), n_(n), rng_(seed) {
    stats_->buffer_capacity.store(n, std::memory_order_relaxed);
  }

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    while (!input_end_ && static_cast<int64_t>(buffer_.size()) < n_) {
      Element e;
      bool in_end = false;
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), &e, &in_end));
      if (in_end) {
        input_end_ = true;
        break;
      }
      buffer_.push_back(std::move(e));
    }
    stats_->buffer_fill.store(static_cast<int64_t>(buffer_.size()), std::memory_order_relaxed);
    if (buffer_.empty()) {
      *end = true;
      return Status::OK();
    }
    const size_t i = rng_.Below(buffer_.size());
    *out = std::move(buffer_[i]);
    if (i != buffer_.size() - 1) buffer_[i] = std::move(buffer_.back());
    buffer_.pop_back();
    *end = false;
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

  Status Save(IteratorState* st) override {
    st->SetInt(Key("rng"), static_cast<int64_t>(rng_.state()));
    st->SetInt(Key("input_end"), input_end_);
    st->SetInt(Key("buffer_size"), static_cast<int64_t>(buffer_.size()));
    for (size_t i = 0; i < buffer_.size(); ++i) st->SetElement(Key("buffer/" + std::to_string(i)), buffer_[i]);
    return input_->Save(st);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(int64_t r, st.GetInt(Key("rng")));
    rng_.set_state(static_cast<uint64_t>(r));
    STRATA_ASSIGN_OR_RETURN(int64_t e, st.GetInt(Key("input_end")));
    input_end_ = e != 0;
    STRATA_ASSIGN_OR_RETURN(int64_t size, st.GetInt(Key("buffer_size")));
    if (size < 0 || size > n_)
      return Corruption("shuffle state holds " + std::to_string(size) + " elements for a buffer of " + std::to_string(n_));
    buffer_.clear();
    for (int64_t i = 0; i < size; ++i) {
      STRATA_ASSIGN_OR_RETURN(Element el, st.GetElement(Key("buffer/" + std::to_string(i))));
      buffer_.push_back(std::move(el));
    }
    return input_->Restore(st);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  const int64_t n_;
  Rng rng_;
  std::vector<Element> buffer_;
  bool input_end_ = false;
};

class ShuffleNode : public DatasetNode {
 public:
  ShuffleNode(NodePtr input, int64_t n, ShuffleOptions o)
      : DatasetNode("shuffle", {std::move(input)},
                    n > 0 ? Status::OK() : InvalidArgument("shuffle: buffer_size must be > 0, got " + std::to_string(n))),
        n_(n), o_(o), unseeded_(std::random_device{}() * 0x100000001ull ^ std::random_device{}()) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    // Unseeded: one draw per dataset description, so the epochs of one run still differ
    // (reshuffle) and a saved state restores onto the same sequence within this process.
    const uint64_t base = o_.seed.value_or(unseeded_);
    const uint64_t seed = o_.reshuffle_each_iteration ? MixSeed(base, ctx.epoch_seed) : base;
    return std::unique_ptr<IteratorBase>(new ShuffleIterator(ctx, std::move(in), n_, MixSeed(seed, 0x5348)));
  }

 private:
  int64_t n_;
  ShuffleOptions o_;
  uint64_t unseeded_;
};

}  // namespace

NodePtr MakeShuffleNode(NodePtr input, int64_t n, ShuffleOptions o) {
  return std::make_shared<ShuffleNode>(std::move(input), n, o);
}

}  // namespace strata::data
