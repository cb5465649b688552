// Feeding a batch into a compiled program: inputs converted to the program's dtypes, labels
// checked and converted (sparse class ids or one-hot), short batches padded with zeros.
#include <cstring>

#include "strata/keras/feed.h"

namespace strata::keras {
namespace {

// Copies rows [row0, row0 + rows) of a batch component into a program input buffer,
// converting integer/u8/bf16 data to the buffer's dtype. Rows beyond `rows` are zeroed.
Status CopyInto(const Tensor& src, Tensor& dst, int64_t row0, int64_t rows, const std::string& what) {
  const int64_t per_row_dst = dst.shape()[0] ? dst.num_elements() / dst.shape()[0] : 0;
  const int64_t per_row_src = src.rank() ? (src.shape()[0] ? src.num_elements() / src.shape()[0] : 0) : 1;
  if (per_row_src != per_row_dst)
    return InvalidArgument(what + ": the batch " + src.shape().ToString() + " does not fit the model's input " +
                           dst.shape().ToString() + " (batch dimension first; the examples' shapes differ)");
  if (src.rank() == 0 || row0 + rows > src.shape()[0] || rows > dst.shape()[0])
    return InvalidArgument(what + ": rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) +
                           ") are outside the batch " + src.shape().ToString() + " or the buffer " + dst.shape().ToString());
  STRATA_ASSIGN_OR_RETURN(Tensor view, src.Slice(0, row0, row0 + rows));
  Tensor s = view.Contiguous();
  const int64_t n = rows * per_row_dst;
  auto convert = [&](auto* out) {
    using Out = std::remove_pointer_t<decltype(out)>;
    switch (s.dtype()) {
      case DType::kF32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<float>()[i]); break;
      case DType::kBF16: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(ToF32(s.data<bf16>()[i])); break;
      case DType::kI32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<int32_t>()[i]); break;
      case DType::kI64: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<int64_t>()[i]); break;
      case DType::kU8: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(s.data<uint8_t>()[i]); break;
    }
  };
  if (dst.dtype() == s.dtype()) {
    std::memcpy(dst.raw_data(), s.raw_data(), static_cast<size_t>(n) * DTypeSize(s.dtype()));
  } else if (dst.dtype() == DType::kF32) {
    convert(dst.data<float>());
  } else if (dst.dtype() == DType::kI32) {
    convert(dst.data<int32_t>());
  } else if (dst.dtype() == DType::kI64) {
    convert(dst.data<int64_t>());
  } else {
    return InvalidArgument(what + ": cannot feed " + std::string(DTypeName(s.dtype())) + " into a " +
                           std::string(DTypeName(dst.dtype())) + " input");
  }
  const size_t tail = static_cast<size_t>(dst.num_elements() - n) * DTypeSize(dst.dtype());
  if (tail) std::memset(static_cast<char*>(dst.raw_data()) + (dst.nbytes() - tail), 0, tail);
  return Status::OK();
}

}  // namespace

Status ClassIndicesOf(const Loss& loss, const data::Element& batch, int64_t rows, int64_t k, size_t label_index,
                      const std::string& model, std::vector<int64_t>* labels) {
  if (batch.size() <= label_index)
    return InvalidArgument("model " + model + ": a dataset element " + batch.DebugString() + " has no labels (expected (x, y))");
  return loss.ClassIndices(batch[label_index], rows, k, labels);
}

Status FeedInputs(CompiledProgram& c, const data::Element& batch, int64_t row0, int64_t rows,
                  const std::vector<int64_t>* labels, const std::string& model) {
  const bool with_labels = labels != nullptr;
  const size_t nx = c.inputs.size();
  if (batch.size() < nx + (with_labels ? 1 : 0))
    return InvalidArgument("model " + model + ": a dataset element " + batch.DebugString() + " has " +
                           std::to_string(batch.size()) + " components; expected " + std::to_string(nx) +
                           (with_labels ? " input(s) and the labels" : " input(s)"));
  for (size_t i = 0; i < nx; ++i) {
    STRATA_RETURN_IF_ERROR(CopyInto(batch[i], c.program->input(c.inputs[i]), row0, rows,
                                    "model " + model + " input " + std::to_string(i)));
  }
  if (!with_labels || !c.labels.valid()) return Status::OK();
  if (c.labels.dtype() == DType::kI32) {  // class indices (K per row for binary_crossentropy)
    Tensor& in = c.program->input(c.labels);
    int32_t* dst = in.data<int32_t>();
    const int64_t per_row = in.num_elements() / c.batch;
    for (int64_t i = 0; i < in.num_elements(); ++i)
      dst[i] = i < rows * per_row ? static_cast<int32_t>((*labels)[static_cast<size_t>(row0 * per_row + i)]) : 0;
    return Status::OK();
  }
  return CopyInto(batch[nx], c.program->input(c.labels), row0, rows, "labels");
}

}  // namespace strata::keras
