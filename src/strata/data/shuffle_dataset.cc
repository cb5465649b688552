// shuffle(buffer_size, {.seed, .reshuffle_each_iteration}): a uniform choice from a
// buffer of the next buffer_size input elements (tf.data's algorithm).
//
// The generator is seeded from the seed (drawn once if none is given) mixed with the epoch
// of an enclosing repeat when reshuffling, so a seeded pipeline repeats its order exactly.
//
// State: the generator's word and the buffer, saved one of two ways.
//  - By position, when the input replays from its start (a cache, a range: ReplaysFromStart):
//    how many elements were taken from the input and, for each buffer slot, the position of
//    its element in that order (8 bytes a slot). Restore takes that many elements from the
//    fresh input again and keeps the buffered ones. A shuffle(60000) over cached 28x28 floats
//    saves 480 KB instead of 188 MB.
//  - By content otherwise: the buffer's elements and the input's own position.
#include <cstring>
#include <random>
#include <unordered_map>

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
      position_.push_back(taken_++);
    }
    stats_->buffer_fill.store(static_cast<int64_t>(buffer_.size()), std::memory_order_relaxed);
    if (buffer_.empty()) {
      *end = true;
      return Status::OK();
    }
    const size_t i = rng_.Below(buffer_.size());
    *out = std::move(buffer_[i]);
    if (i != buffer_.size() - 1) {
      buffer_[i] = std::move(buffer_.back());
      position_[i] = position_.back();
    }
    buffer_.pop_back();
    position_.pop_back();
    *end = false;
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

  Status Save(IteratorState* st) override {
    st->SetInt(Key("rng"), static_cast<int64_t>(rng_.state()));
    st->SetInt(Key("input_end"), input_end_);
    st->SetInt(Key("buffer_size"), static_cast<int64_t>(buffer_.size()));
    if (positions_valid_ && input_->ReplaysFromStart()) {
      st->SetInt(Key("taken"), taken_);
      std::string positions(position_.size() * sizeof(int64_t), '\0');
      if (!position_.empty()) std::memcpy(positions.data(), position_.data(), positions.size());
      st->SetString(Key("positions"), std::move(positions));
      return Status::OK();
    }
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
    position_.clear();
    if (st.Has(Key("taken"))) return RestoreByPosition(st, size);
    for (int64_t i = 0; i < size; ++i) {
      STRATA_ASSIGN_OR_RETURN(Element el, st.GetElement(Key("buffer/" + std::to_string(i))));
      buffer_.push_back(std::move(el));
      position_.push_back(taken_++);
    }
    positions_valid_ = false;  // the input resumes mid-way: its order no longer starts here
    return input_->Restore(st);
  }

 private:
  // Takes the saved number of elements from the fresh input again; each buffered one goes
  // back to its slot, the others were handed out before the save.
  Status RestoreByPosition(const IteratorState& st, int64_t size) {
    STRATA_ASSIGN_OR_RETURN(int64_t taken, st.GetInt(Key("taken")));
    STRATA_ASSIGN_OR_RETURN(std::string bytes, st.GetString(Key("positions")));
    if (taken < size || bytes.size() != static_cast<size_t>(size) * sizeof(int64_t))
      return Corruption("shuffle state: " + std::to_string(bytes.size()) + " bytes of positions for " + std::to_string(size) +
                        " buffered elements of " + std::to_string(taken) + " taken");
    position_.resize(static_cast<size_t>(size));
    if (size > 0) std::memcpy(position_.data(), bytes.data(), bytes.size());
    std::unordered_map<int64_t, size_t> slot;
    slot.reserve(position_.size());
    for (size_t i = 0; i < position_.size(); ++i) {
      const int64_t p = position_[i];
      if (p < 0 || p >= taken || !slot.emplace(p, i).second)
        return Corruption("shuffle state: buffered position " + std::to_string(p) + " is repeated or outside the " +
                          std::to_string(taken) + " elements taken");
    }
    buffer_.resize(position_.size());
    for (taken_ = 0; taken_ < taken; ++taken_) {
      Element el;
      bool in_end = false;
      STRATA_RETURN_IF_ERROR(input_->GetNext(&el, &in_end));
      if (in_end)
        return InvalidArgument("shuffle state: the input ended after " + std::to_string(taken_) + " elements, but " +
                                  std::to_string(taken) + " were taken before the save (is it the same data?)");
      auto it = slot.find(taken_);
      if (it != slot.end()) buffer_[it->second] = std::move(el);
    }
    if (input_end_) {  // see the end again, so a cache below completes
      Element el;
      bool in_end = false;
      STRATA_RETURN_IF_ERROR(input_->GetNext(&el, &in_end));
      if (!in_end)
        return InvalidArgument("shuffle state: the input had ended after " + std::to_string(taken) +
                                  " elements before the save, but has more now (is it the same data?)");
    }
    return Status::OK();
  }

  std::unique_ptr<IteratorBase> input_;
  const int64_t n_;
  Rng rng_;
  std::vector<Element> buffer_;
  std::vector<int64_t> position_;  // position_[i]: where buffer_[i] came in the input's order
  int64_t taken_ = 0;              // elements taken from the input
  bool positions_valid_ = true;    // false after a restore by content
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
