// batch(n, {.drop_remainder}): stacks n consecutive elements along a new first dimension.
//
// Each element is copied into the batch tensors as it arrives (no per-element buffers);
// every element must have the first element's dtypes and shapes (padded_batch pads).
// Batch buffers are recycled: the stage remembers its last few batches, and once the
// consumer has dropped one (the stage holds the only reference) its memory is filled again
// instead of allocating, zeroing and first-touching tens of MB per batch.
// State: the input's (a batch is assembled within one GetNext).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

class BatchIterator : public PassThroughStateIterator {
 public:
  BatchIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t n, bool drop_remainder)
      : PassThroughStateIterator(ctx, "batch", std::move(input)), n_(n), drop_remainder_(drop_remainder) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    Element batch;
    int64_t rows = 0;
    for (; rows < n_; ++rows) {
      bool in_end = false;
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), &e_, &in_end));
      if (in_end) break;
      if (rows == 0) {
        batch = Recycled();
        if (batch.tensors.empty()) {
          batch.names = e_.names;
          batch.tensors.resize(e_.size());
          for (size_t c = 0; c < e_.size(); ++c) {
            std::vector<int64_t> dims{n_};
            dims.insert(dims.end(), e_[c].shape().dims().begin(), e_[c].shape().dims().end());
            batch.tensors[c] = Tensor::Empty(e_[c].dtype(), Shape(std::move(dims)));  // every row is written below
          }
        }
      } else {
        STRATA_RETURN_IF_ERROR(CheckLike(batch, rows));
      }
      for (size_t c = 0; c < e_.size(); ++c) {
        const Tensor src = e_[c].is_contiguous() ? e_[c] : e_[c].Contiguous();
        const size_t row_bytes = src.nbytes();
        std::memcpy(static_cast<char*>(batch.tensors[c].raw_data()) + rows * row_bytes, src.raw_data(), row_bytes);
      }
    }
    if (rows == 0 || (drop_remainder_ && rows < n_)) {
      *end = true;
      return Status::OK();
    }
    if (rows == n_) Remember(batch);
    if (rows < n_)
      for (auto& t : batch.tensors) {
        STRATA_ASSIGN_OR_RETURN(t, t.Slice(0, 0, rows));
      }
    *end = false;
    *out = std::move(batch);
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

 private:
  // A remembered batch the consumer has let go of whose components have this element's
  // names, dtypes and shapes; empty if there is none.
  Element Recycled() {
    for (Element& b : pool_) {
      if (b.tensors.empty() || b.names != e_.names || b.size() != e_.size()) continue;
      bool fits = true;
      for (size_t c = 0; c < e_.size() && fits; ++c) {
        const Tensor& t = b.tensors[c];
        fits = t.sole_owner() && t.dtype() == e_[c].dtype() && t.shape().dim(0) == n_ &&
               std::equal(t.shape().dims().begin() + 1, t.shape().dims().end(), e_[c].shape().dims().begin(),
                          e_[c].shape().dims().end());
      }
      if (fits) {
        // The consumer's last reads of this batch happen before it drops its reference (a
        // release decrement); use_count() is a relaxed load, so an acquire on that count is
        // needed before the buffer is written again. Copying the tensors is one (an acq_rel
        // increment of the same count, as map_and_batch_dataset.cc does); an acquire fence
        // is as correct but ThreadSanitizer does not model fences and reported every reuse
        // as a race with the consumer's reads (make test-thread, docs/testing.md).
        Element reused = b;
        b = Element{};
        return reused;
      }
    }
    return Element{};
  }
  void Remember(const Element& batch) {
    pool_[next_] = batch;  // shares the storage; replaces (and may free) the oldest
    next_ = (next_ + 1) % pool_.size();
  }

  Status CheckLike(const Element& batch, int64_t row) const {
    if (e_.size() != batch.size() || e_.names != batch.names)
      return Annotate(InvalidArgument("element " + std::to_string(row) + " of the batch is " + e_.DebugString() +
                                      " but element 0 had " + std::to_string(batch.size()) + " components"));
    for (size_t c = 0; c < e_.size(); ++c) {
      const Tensor& b = batch.tensors[c];
      std::vector<int64_t> want(b.shape().dims().begin() + 1, b.shape().dims().end());
      if (e_[c].dtype() != b.dtype() || e_[c].shape().dims() != want)
        return Annotate(InvalidArgument("element " + std::to_string(row) + " of the batch has component " +
                                        std::to_string(c) + " " + e_[c].DebugString() + " but element 0 had " +
                                        std::string(DTypeName(b.dtype())) + Shape(want).ToString() +
                                        "; use padded_batch for variable shapes"));
    }
    return Status::OK();
  }

  const int64_t n_;
  const bool drop_remainder_;
  Element e_;  // reused for each input element
  // The last few full batches handed out. Enough to cover a prefetch buffer's batches in
  // flight plus the one the consumer is using; a batch still referenced is never reused.
  std::array<Element, 4> pool_;
  size_t next_ = 0;
};

class BatchNode : public DatasetNode {
 public:
  BatchNode(NodePtr input, int64_t n, BatchOptions o)
      : DatasetNode("batch", {std::move(input)},
                    n > 0 ? Status::OK() : InvalidArgument("batch: batch_size must be > 0, got " + std::to_string(n))),
        n_(n), o_(o) {}

 protected:
  Result<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& ctx) const override {
    STRATA_ASSIGN_OR_RETURN(auto fused, MaybeMakeMapAndBatch(ctx, inputs()[0], n_, o_.drop_remainder));
    if (fused) return fused;
    STRATA_ASSIGN_OR_RETURN(auto in, inputs()[0]->Make(ctx.Child(0)));
    return std::unique_ptr<IteratorBase>(new BatchIterator(ctx, std::move(in), n_, o_.drop_remainder));
  }

 private:
  int64_t n_;
  BatchOptions o_;
};

}  // namespace

NodePtr MakeBatchNode(NodePtr input, int64_t n, BatchOptions o) { return std::make_shared<BatchNode>(std::move(input), n, o); }

}  // namespace strata::data
