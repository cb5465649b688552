// padded_batch(n, {.padded_shapes, .padding_value, .drop_remainder}): like batch, for
// components whose shapes vary (token sequences, variable boxes). Each component is padded
// to its padded shape (or, where that says -1 or none is given, the batch's longest).
// Ranks and dtypes must agree across the batch. State: the input's.
#include <cstring>

#include "strata/data/pipeline.h"

namespace strata::data {
namespace {

template <typename T>
void FillValue(Tensor& t, double v) {
  T* p = t.data<T>();
  const T x = static_cast<T>(v);
  for (int64_t i = 0, n = t.num_elements(); i < n; ++i) p[i] = x;
}

void Fill(Tensor& t, double v) {
  if (v == 0) return;  // storage starts zeroed
  switch (t.dtype()) {
    case DType::kF32: FillValue<float>(t, v); break;
    case DType::kI32: FillValue<int32_t>(t, v); break;
    case DType::kI64: FillValue<int64_t>(t, v); break;
    case DType::kU8: FillValue<uint8_t>(t, v); break;
    case DType::kBF16: {
      bf16* p = t.data<bf16>();
      for (int64_t i = 0, n = t.num_elements(); i < n; ++i) p[i] = ToBF16(static_cast<float>(v));
      break;
    }
  }
}

// Copies `src` (shape s) into row `row` of `dst` ([B, p...], p >= s per dim).
void CopyPadded(const Tensor& src, Tensor& dst, int64_t row) {
  const size_t es = DTypeSize(src.dtype());
  const int r = src.rank();
  const char* s = static_cast<const char*>(src.raw_data());
  char* d = static_cast<char*>(dst.raw_data()) + row * dst.strides()[0] * es;
  if (r == 0) {
    std::memcpy(d, s, es);
    return;
  }
  // Iterate over all but the last dimension; copy innermost runs.
  const int64_t inner = src.shape().dim(r - 1);
  const int64_t outer = src.num_elements() / std::max<int64_t>(inner, 1);
  if (inner == 0) return;
  std::vector<int64_t> idx(r - 1, 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t doff = 0;
    for (int k = 0; k < r - 1; ++k) doff += idx[k] * dst.strides()[k + 1];
    std::memcpy(d + doff * es, s + o * inner * es, inner * es);
    for (int k = r - 2; k >= 0; --k) {
      if (++idx[k] < src.shape().dim(k)) break;
      idx[k] = 0;
    }
  }
}

class PaddedBatchIterator : public PassThroughStateIterator {
 public:
  PaddedBatchIterator(const IteratorContext& ctx, std::unique_ptr<IteratorBase> input, int64_t n,
                      const PaddedBatchOptions& o)
      : PassThroughStateIterator(ctx, "padded_batch", std::move(input)), n_(n), o_(&o) {}

  Status GetNext(Element* out, bool* end) override {
    StageTimer timer(stats_.get());
    rows_.resize(n_);
    int64_t rows = 0;
    for (; rows < n_; ++rows) {
      bool in_end = false;
      STRATA_RETURN_IF_ERROR(timer.Input(input_.get(), &rows_[rows], &in_end));
      if (in_end) break;
    }
    if (rows == 0 || (o_->drop_remainder && rows < n_)) {
      *end = true;
      return Status::OK();
    }
    const Element& first = rows_[0];
    if (!o_->padded_shapes.empty() && o_->padded_shapes.size() != first.size())
      return Annotate(InvalidArgument("padded_shapes has " + std::to_string(o_->padded_shapes.size()) +
                                      " entries for elements of " + std::to_string(first.size()) + " components"));
    Element batch;
    batch.names = first.names;
    for (size_t c = 0; c < first.size(); ++c) {
      const int rank = first[c].rank();
      std::vector<int64_t> longest(rank, 0);
      for (int64_t r = 0; r < rows; ++r) {
        const Tensor& t = rows_[r][c];
        if (rows_[r].size() != first.size() || t.rank() != rank || t.dtype() != first[c].dtype())
          return Annotate(InvalidArgument("element " + std::to_string(r) + " of the batch has component " +
                                          std::to_string(c) + " " + t.DebugString() + " but element 0 has " +
                                          first[c].DebugString() + " (ranks and dtypes must match)"));
        for (int k = 0; k < rank; ++k) longest[k] = std::max(longest[k], t.shape().dim(k));
      }
      std::vector<int64_t> dims{rows};
      for (int k = 0; k < rank; ++k) {
        int64_t want = longest[k];
        if (!o_->padded_shapes.empty()) {
          const auto& ps = o_->padded_shapes[c];
          if (static_cast<int>(ps.size()) != rank)
            return Annotate(InvalidArgument("padded_shapes[" + std::to_string(c) + "] has rank " +
                                            std::to_string(ps.size()) + " for component of rank " +
                                            std::to_string(rank)));
          if (ps[k] >= 0) {
            if (ps[k] < longest[k])
              return Annotate(InvalidArgument("component " + std::to_string(c) + " dimension " + std::to_string(k) +
                                              " is " + std::to_string(longest[k]) + " in this batch, longer than its padded size " +
                                              std::to_string(ps[k])));
            want = ps[k];
          }
        }
        dims.push_back(want);
      }
      Tensor bt(first[c].dtype(), Shape(std::move(dims)));
      Fill(bt, o_->padding_value);
      for (int64_t r = 0; r < rows; ++r) CopyPadded(rows_[r][c].Contiguous(), bt, r);
      batch.tensors.push_back(std::move(bt));
    }
    for (auto& e : rows_) e = Element();
    *end = false;
    *out = std::move(batch);
    stats_->AddElement(static_cast<int64_t>(out->nbytes()));
    return Status::OK();
  }

 private:
  const int64_t n_;
  const PaddedBatchOptions* o_;
  std::vector<Element> rows_;
};

}  // namespace

NodePtr MakePaddedBatchNode(NodePtr input, int64_t n, PaddedBatchOptions o) {
  Status error = n > 0 ? Status::OK() : InvalidArgument("padded_batch: batch_size must be > 0, got " + std::to_string(n));
  return MakeOneInputNode<PaddedBatchIterator>("padded_batch", std::move(input), std::move(error), n, std::move(o));
}

}  // namespace strata::data
