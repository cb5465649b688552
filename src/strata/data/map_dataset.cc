// map(fn) with num_parallel_calls == 1: runs fn in the consumer's thread.
// State: the input's, and the element index (which seeds map_with_rng).
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class MapIterator : public StageIterator {
 public:
  MapIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, const MapFn* fn, const MapRngFn* rng_fn,
              uint64_t seed)
      : StageIterator(ctx, "map"), input_(std::move(input)), fn_(fn), rng_fn_(rng_fn),
        seed_(MixSeed(seed, ctx.epoch_seed)) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    Element in;
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), &in, end));
    if (*end) return Status::OK();
    const int64_t index = index_++;
    Result<Element> r = [&]() -> Result<Element> {
      if (*rng_fn_) {
        Rng rng(MixSeed(seed_, static_cast<uint64_t>(index)));
        return (*rng_fn_)(std::move(in), rng);
      }
      return (*fn_)(std::move(in));
    }();
    if (!r.ok()) return Annotate(r.status().WithContext("element " + std::to_string(index)));
    *out = std::move(r).value();
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }
  Status Save(IteratorState* st) override {
    st->SetInt(Key("index"), index_);
    return input_->Save(st);
  }
  Status Restore(const IteratorState& st) override {
    STRATA_ASSIGN_OR_RETURN(index_, st.GetInt(Key("index")));
    return input_->Restore(st);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  const MapFn* fn_;
  const MapRngFn* rng_fn_;
  const uint64_t seed_;
  int64_t index_ = 0;
};

class MapNode : public DatasetNode {
 public:
  MapNode(NodePtr input, MapFn fn, MapRngFn rng_fn, MapOptions o)
      : DatasetNode("map", {std::move(input)},
                    (!fn && !rng_fn) ? InvalidArgument("map: no function given") : Status::OK()),
        fn_(std::move(fn)), rng_fn_(std::move(rng_fn)), options_(o) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    return std::unique_ptr<IteratorBase>(new MapIterator(ctx, std::move(in), &fn_, &rng_fn_, options_.seed));
  }

 private:
  MapFn fn_;
  MapRngFn rng_fn_;
  MapOptions options_;
};

}  // namespace

NodePtr MakeMapNode(NodePtr input, MapFn fn, MapRngFn rng_fn, MapOptions options) {
  return std::make_shared<MapNode>(std::move(input), std::move(fn), std::move(rng_fn), options);
}

}  // namespace strata::data
