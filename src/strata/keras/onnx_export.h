// ONNX export: a model's inference graph as an ONNX ModelProto (docs/formats/onnx.md).
//
//   auto bytes = keras::ExportOnnx(*model);            // the serialized ModelProto
//   STRATA_RETURN_IF_ERROR(keras::SaveOnnx(*model, "model.onnx"));
//
// The graph is the one predict() runs (batch norm on its moving statistics, kept as
// BatchNormalization; dropout gone), translated op by op from Strata's graph ops, so every model
// a spec or an application builds exports the same way. Input "input": float32 [N, H, W, C]
// (Keras's NHWC, batch "N" symbolic), transposed to NCHW inside the graph; output
// "probabilities": float32 [N, K], the model's softmax (one is added when the model ends in
// logits), as `strata predict --probabilities` reports. An op with no ONNX mapping is an error
// naming its layer. The protobuf is written with record/wire.h; opset 13, IR version 7.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <string>

#include "strata/core/status.h"
#include "strata/graph/graph.h"
#include "strata/keras/model.h"

namespace strata::keras {

struct OnnxExportOptions {
  std::string producer_version;  // ModelProto.producer_version (the command passes Strata's version)
};

// The model (after compile: its weights are read from variables()) as a serialized ModelProto.
Result<std::string> ExportOnnx(const Model& model, const OnnxExportOptions& options = {});
// ExportOnnx written to `path` atomically (temporary, fsync, rename).
Status SaveOnnx(const Model& model, const std::string& path, const OnnxExportOptions& options = {});

// Whether ExportOnnx can translate an op kind, so that a test over every graph::OpKind tells an op
// left out on purpose from one forgotten.
enum class OnnxSupport {
  kTranslated,    // has a translation (leaves, Cast and Identity included, though they write no node)
  kTrainingOnly,  // in training graphs only (gradients, training batch norm, dropout, losses): never exported
  kMissing,       // neither: a kind added to the graph and not to the exporter
};
// `why`, when given: for kTrainingOnly, why the kind has no place in an inference graph; null otherwise.
// Either way a node of a kind other than kTranslated fails the export naming its layer.
OnnxSupport OnnxSupportOf(graph::OpKind kind, const char** why = nullptr);

}  // namespace strata::keras

#pragma GCC visibility pop
