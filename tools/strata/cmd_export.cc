// strata export: a saved model's inference graph as an ONNX file (docs/formats/onnx.md).
#include <cstdio>

#include "command.h"
#include "model_io.h"
#include "strata/core/version.h"
#include "strata/keras/onnx_export.h"

namespace strata::cli {
namespace {

int RunExport(const std::vector<std::string>& args) {
  std::string model_arg, format = "onnx", out;
  FlagParser flags("export", "--model CKPT --out FILE.onnx [--format onnx]",
                   "Writes the model's inference graph (batch norm on its moving statistics, no dropout) as ONNX\n"
                   "(opset 13): input `input` float32 [N, H, W, C] (NHWC, batch N symbolic), output `probabilities`\n"
                   "float32 [N, classes], what `strata predict --probabilities` reports. The file is written\n"
                   "atomically. A layer ONNX cannot express is an error naming the layer.");
  flags.String("model", &model_arg, "a checkpoint from strata train (a spec or application name: its initial weights)");
  flags.String("format", &format, "the interchange format: onnx (the only one)");
  flags.String("out", &out, "the file to write (e.g. model.onnx)");
  if (int rc = flags.Parse(args); rc >= 0) return rc;
  if (model_arg.empty() || out.empty()) return Fail("export", "--model and --out are required", kExitUsage);
  if (format != "onnx") return Fail("export", "--format must be onnx, got '" + format + "'", kExitUsage);
  auto loaded = LoadModelForInference(model_arg, "");
  if (!loaded.ok()) return Fail("export", loaded.status().ToString());
  if (Status s = keras::SaveOnnx(*loaded->model, out, {.producer_version = STRATA_VERSION}); !s.ok())
    return Fail("export", s.ToString());
  auto in = loaded->model->input_shape();
  auto o = loaded->model->output_shape();
  std::printf("wrote %s: ONNX opset 13, input `input` float32 [N, %s], output `probabilities` float32 [N, %s]\n",
              out.c_str(), in.ok() ? in->ToString().substr(1, in->ToString().size() - 2).c_str() : "?",
              o.ok() ? o->ToString().substr(1, o->ToString().size() - 2).c_str() : "?");
  return kExitOk;
}

const Registrar kExport({"export", "a saved model's inference graph as ONNX (--format onnx)", RunExport});

}  // namespace
}  // namespace strata::cli
