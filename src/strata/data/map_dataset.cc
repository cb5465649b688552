// map(fn) with num_parallel_calls == 1: runs fn in the consumer's thread.
// State: the input's, and the element index (which seeds map_with_rng).
#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class MapIterator : public CountingIterator {
 public:
  MapIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, const MapFunction& fn,
              const MapOptions& o)
      : CountingIterator(ctx, "map", "index", 0, std::move(input)), fn_(&fn), seed_(MixSeed(o.seed, ctx.epoch_seed)) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    Element in;
    STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), &in, end));
    if (*end) return Status::OK();
    const int64_t index = position_++;
    Result<Element> r = (*fn_)(std::move(in), seed_, index);
    if (!r.ok()) return Annotate(r.status().WithContext("element " + std::to_string(index)));
    *out = std::move(r).value();
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

 private:
  const MapFunction* fn_;
  const uint64_t seed_;
};

}  // namespace

NodePtr MakeMapNode(NodePtr input, MapFn fn, MapRngFn rng_fn, MapOptions options) {
  MapFunction f{std::move(fn), std::move(rng_fn)};
  Status error = f.given() ? Status::OK() : InvalidArgument("map: no function given");
  return MakeOneInputNode<MapIterator>("map", std::move(input), std::move(error), std::move(f), options);
}

}  // namespace strata::data
