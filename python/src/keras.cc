// strata._strata.keras: layers, symbolic tensors, models (Sequential, functional, the
// applications), compile, weights and the custom-loop pieces. python/strata/keras/ gives them
// Keras's class names and keyword arguments; fit / evaluate / predict and the callbacks are in
// keras_fit.cc.
//
// Layers are built from their Keras class name and config (keras::LayerFromConfig, the model
// spec's parser), so every Keras constructor keyword the spec files take works from Python too,
// and an unknown one is an error naming the layer.
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "keras_bindings.h"
#include "strata/distribute/strategy.h"
#include "strata/io/get_file.h"
#include "strata/keras/applications/applications.h"
#include "strata/keras/h5_weights.h"
#include "strata/keras/layer_registry.h"
#include "strata/keras/metrics.h"
#include "strata/keras/model.h"
#include "strata/keras/schedules.h"
#include "strata/keras/spec.h"

namespace strata::python {
namespace {

using keras::LayerPtr;
using keras::Model;

DType ParseDType(const std::string& name) {
  if (name == "float32") return DType::kF32;
  if (name == "int32") return DType::kI32;
  if (name == "int64") return DType::kI64;
  if (name == "uint8") return DType::kU8;
  ThrowValueError("dtype must be float32, int32, int64 or uint8, got '" + name + "'");
}

Shape ShapeOf(const std::vector<int64_t>& dims, const char* arg) {
  for (int64_t d : dims)
    if (d < 1) ThrowValueError(std::string(arg) + ": every dimension must be a positive integer (no batch dimension, no None)");
  return Shape(dims);
}

std::vector<keras::KTensor> KTensors(py::handle obj, const char* arg) {
  if (py::isinstance<keras::KTensor>(obj)) return {obj.cast<keras::KTensor>()};
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj))
    ThrowTypeError(std::string(arg) + ": expected a symbolic tensor (strata.keras.Input or a layer's output) or a list of them, got " +
                   std::string(py::str(py::type::of(obj).attr("__name__"))));
  std::vector<keras::KTensor> out;
  for (py::handle item : obj) {
    if (!py::isinstance<keras::KTensor>(item))
      ThrowTypeError(std::string(arg) + ": every entry must be a symbolic tensor, got " +
                     std::string(py::str(py::type::of(item).attr("__name__"))));
    out.push_back(item.cast<keras::KTensor>());
  }
  return out;
}

// A learning rate: a number or a schedule described by python/strata/keras/optimizers.py.
keras::Schedule ScheduleOf(const py::handle& lr) {
  if (py::isinstance<py::float_>(lr) || py::isinstance<py::int_>(lr)) return keras::schedules::Constant(lr.cast<double>());
  if (py::isinstance<keras::Schedule>(lr)) return lr.cast<keras::Schedule>();  // made in C++: a recipe's
  if (!py::isinstance<py::dict>(lr)) ThrowTypeError("learning_rate: expected a number or a schedule");
  py::dict d = py::reinterpret_borrow<py::dict>(lr);
  const std::string kind = d["kind"].cast<std::string>();
  if (kind == "CosineDecay") {
    const double warmup_target = d["warmup_target"].is_none() ? -1 : d["warmup_target"].cast<double>();
    return keras::schedules::CosineDecay(d["initial_learning_rate"].cast<double>(), d["decay_steps"].cast<int64_t>(),
                                         {.alpha = d["alpha"].cast<double>(), .warmup_target = warmup_target,
                                          .warmup_steps = d["warmup_steps"].cast<int64_t>()});
  }
  if (kind == "ExponentialDecay")
    return keras::schedules::ExponentialDecay(d["initial_learning_rate"].cast<double>(), d["decay_steps"].cast<int64_t>(),
                                              d["decay_rate"].cast<double>(), d["staircase"].cast<bool>());
  if (kind == "PiecewiseConstantDecay")
    return keras::schedules::PiecewiseConstant(d["boundaries"].cast<std::vector<int64_t>>(),
                                               d["values"].cast<std::vector<double>>());
  ThrowValueError("learning_rate: unknown schedule '" + kind + "'");
}

keras::Optimizer OptimizerOf(const py::dict& d) {
  const std::string kind = d["kind"].cast<std::string>();
  keras::Optimizer o;
  if (kind == "SGD") o.kind = keras::Optimizer::Kind::kSGD;
  else if (kind == "Adam") o.kind = keras::Optimizer::Kind::kAdam;
  else if (kind == "AdamW") o.kind = keras::Optimizer::Kind::kAdamW;
  else if (kind == "RMSprop") o.kind = keras::Optimizer::Kind::kRMSprop;
  else ThrowValueError("optimizer: unknown optimizer '" + kind + "' (SGD, Adam, AdamW, RMSprop)");
  o.learning_rate = ScheduleOf(d["learning_rate"]);
  auto number = [&](const char* key, double fallback) {
    return d.contains(key) && !d[key].is_none() ? d[key].cast<double>() : fallback;
  };
  o.momentum = number("momentum", 0);
  o.nesterov = d.contains("nesterov") && d["nesterov"].cast<bool>();
  o.beta_1 = number("beta_1", 0.9);
  o.beta_2 = number("beta_2", 0.999);
  o.epsilon = number("epsilon", 1e-7);
  o.rho = number("rho", 0.9);
  o.weight_decay = number("weight_decay", 0);
  o.clipnorm = number("clipnorm", 0);
  o.global_clipnorm = number("global_clipnorm", 0);
  if (o.clipnorm > 0 && o.global_clipnorm > 0) ThrowValueError("optimizer: pass clipnorm or global_clipnorm, not both");
  o.use_ema = d.contains("use_ema") && d["use_ema"].cast<bool>();
  o.ema_momentum = number("ema_momentum", 0.99);
  o.ema_overwrite_frequency = static_cast<int64_t>(number("ema_overwrite_frequency", 0));
  return o;
}

data::Element BatchOf(const Model& model, py::handle x, py::handle y) {
  std::vector<Tensor> parts = ModelInputs(model, x, "x");
  Tensor labels = ModelLabels(y, "y");
  if (labels.rank() == 0 || labels.shape()[0] != parts[0].shape()[0])
    ThrowValueError("x and y: x has " + std::to_string(parts[0].shape()[0]) + " examples (shape " + ShapeText(parts[0].shape()) +
                    ") but y has shape " + ShapeText(labels.shape()));
  parts.push_back(std::move(labels));
  return data::Element(std::move(parts));
}

py::dict LogsDict(const keras::Logs& logs) {
  py::dict d;
  for (const auto& [k, v] : logs) d[py::str(k)] = v;
  return d;
}

}  // namespace

std::vector<Tensor> ModelInputs(const Model& model, py::handle x, const char* arg) {
  std::vector<py::handle> arrays;
  if (py::isinstance<py::list>(x) || py::isinstance<py::tuple>(x)) {
    for (py::handle a : x) arrays.push_back(a);
  } else {
    arrays.push_back(x);
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < arrays.size(); ++i) {
    auto expected = model.input_shape(i);
    if (!expected.ok())
      ThrowValueError(std::string(arg) + ": " + std::to_string(arrays.size()) + " arrays for model '" + model.name() + "': " +
                      expected.status().message());
    const std::string name = arrays.size() > 1 ? std::string(arg) + "[" + std::to_string(i) + "]" : std::string(arg);
    Tensor t = TensorFromArray(arrays[i], name, {.cast_to = DType::kF32});
    std::vector<int64_t> want = {-1};
    want.insert(want.end(), expected->dims().begin(), expected->dims().end());
    bool match = t.rank() == static_cast<int>(want.size());
    for (int d = 1; match && d < t.rank(); ++d) match = t.shape()[d] == want[static_cast<size_t>(d)];
    if (!match) {
      std::string text = "(None";
      for (size_t d = 1; d < want.size(); ++d) text += ", " + std::to_string(want[d]);
      ThrowValueError(name + ": model '" + model.name() + "' input " + std::to_string(i) + " takes arrays of shape " + text +
                      "), got an array of shape " + ShapeText(t.shape()));
    }
    out.push_back(std::move(t));
  }
  if (out.empty()) ThrowValueError(std::string(arg) + ": no arrays");
  if (!model.input_shape(out.size()).ok()) return out;
  ThrowValueError(std::string(arg) + ": model '" + model.name() + "' has more than " + std::to_string(out.size()) +
                  " input(s); pass one array per input as a list");
}

Tensor ModelLabels(py::handle y, const char* arg) {
  py::array a = py::array::ensure(y);
  if (!a) ThrowTypeError(std::string(arg) + ": expected a numpy array of labels");
  const char kind = a.dtype().kind();
  if (kind == 'f' && !DTypeOfArray(a)) return TensorFromArray(a, arg, {.cast_to = DType::kF32});
  if ((kind == 'i' || kind == 'u' || kind == 'b') && !DTypeOfArray(a)) return TensorFromArray(a, arg, {.cast_to = DType::kI64});
  return TensorFromArray(a, arg);
}

void RegisterKeras(py::module_& m) {
  py::module_ k = m.def_submodule("keras", "Keras models whose training step runs compiled in C++ (strata.keras wraps these).");

  py::class_<keras::Layer, LayerPtr>(k, "Layer", "A Keras layer (C++ side); strata.keras.layers builds them.")
      .def_property("name", &keras::Layer::name, [](keras::Layer& l, std::string n) { l.set_name(std::move(n)); })
      .def_property_readonly("class_name", &keras::Layer::class_name)
      .def_readwrite("trainable", &keras::Layer::trainable)
      .def_property_readonly("_address", [](const keras::Layer& l) { return reinterpret_cast<uintptr_t>(&l); });

  k.def("layer_from_config", [](const std::string& cls, const std::string& config_json, const std::string& name) {
    return Unwrap(keras::LayerFromConfig(cls, config_json, name));
  }, py::arg("class_name"), py::arg("config_json"), py::arg("name") = "");
  // The layer registry (keras/layer_registry.h): every class a config can name, with the config
  // keys it reads; tests/python/test_keras.py checks strata.keras.layers against it.
  k.def("layer_classes", [] {
    std::map<std::string, std::vector<std::string>> out;
    for (const keras::LayerClass& c : keras::LayerClasses()) out[c.name] = keras::ConfigKeys(c);
    return out;
  });
  k.def("ignored_config_keys", &keras::IgnoredConfigKeys);
  k.def("input_layer", [](const std::vector<int64_t>& shape, const std::string& dtype, const std::string& name) {
    return keras::layers::InputLayer(ShapeOf(shape, "shape"), ParseDType(dtype), name);
  }, py::arg("shape"), py::arg("dtype") = "float32", py::arg("name") = "");

  py::class_<keras::KTensor>(k, "KTensor", "A symbolic tensor: a model input, or a layer called on symbolic tensors.");
  k.def("Input", [](const std::vector<int64_t>& shape, const std::string& dtype, const std::string& name) {
    return keras::Input(ShapeOf(shape, "shape"), ParseDType(dtype), name);
  }, py::arg("shape"), py::arg("dtype") = "float32", py::arg("name") = "");
  k.def("call", [](const LayerPtr& layer, py::handle inputs) {
    if (py::isinstance<keras::KTensor>(inputs)) return keras::Call(layer, inputs.cast<keras::KTensor>());
    return keras::Call(layer, KTensors(inputs, "inputs"));
  }, py::arg("layer"), py::arg("inputs"));
  k.def("shape_of", [](const keras::KTensor& t) { return Unwrap(keras::ShapeOf(t)).dims(); }, py::arg("tensor"),
        "The per-example shape of a symbolic tensor (keras/model.h ShapeOf).");

  py::class_<keras::Schedule>(k, "Schedule", "A learning-rate schedule made in C++ (a recipe's): call it with a step.")
      .def("__call__", [](const keras::Schedule& s, int64_t step) { return s(step); }, py::arg("step"))
      .def_readonly("description", &keras::Schedule::description);

  py::class_<Model>(k, "Model", "A Keras model (C++ side); strata.keras.Model wraps it.")
      .def_static("functional", [](py::handle inputs, py::handle outputs, const std::string& name) {
        return Unwrap(Model::Functional(KTensors(inputs, "inputs"), KTensors(outputs, "outputs"), name));
      }, py::arg("inputs"), py::arg("outputs"), py::arg("name"))
      .def_static("sequential", [](const std::vector<LayerPtr>& layers, const std::string& name) {
        return Unwrap(keras::Sequential(layers, name));
      }, py::arg("layers"), py::arg("name"))
      .def_static("application", [](const std::string& app, bool include_top, py::object input_shape, int classes,
                                    const std::string& pooling, const std::string& classifier_activation,
                                    const std::string& name, double alpha, int depth_multiplier, double dropout,
                                    py::object input_tensor, bool include_preprocessing, bool minimalistic,
                                    double dropout_rate) {
        keras::applications::Options o;
        o.include_preprocessing = include_preprocessing;
        o.minimalistic = minimalistic;
        o.dropout_rate = dropout_rate;
        if (!input_tensor.is_none()) o.input_tensor = input_tensor.cast<keras::KTensor>();
        o.alpha = alpha;
        o.depth_multiplier = depth_multiplier;
        o.dropout = dropout;
        o.include_top = include_top;
        if (!input_shape.is_none()) o.input_shape = ShapeOf(input_shape.cast<std::vector<int64_t>>(), "input_shape");
        o.classes = classes;
        o.pooling = pooling;
        o.classifier_activation = classifier_activation;
        o.name = name;
        return Unwrap(keras::applications::ByName(app, o));
      }, py::arg("app"), py::arg("include_top"), py::arg("input_shape"), py::arg("classes"), py::arg("pooling"),
         py::arg("classifier_activation"), py::arg("name"), py::arg("alpha") = 1.0,
         py::arg("depth_multiplier") = 1, py::arg("dropout") = 1e-3, py::arg("input_tensor") = py::none(),
         py::arg("include_preprocessing") = true, py::arg("minimalistic") = false, py::arg("dropout_rate") = 0.2)
      .def_property_readonly("name", &Model::name)
      .def("summary_text", &Model::Summary, py::arg("line_length") = 65)
      .def("count_params", &Model::count_params)
      .def("layers", &Model::layers)
      .def("input_shape", [](const Model& m, size_t i) { return Unwrap(m.input_shape(i)).dims(); }, py::arg("i") = 0)
      .def("output_shape", [](const Model& m, size_t i) { return Unwrap(m.output_shape(i)).dims(); }, py::arg("i") = 0)
      .def("ends_in_softmax", &Model::ends_in_softmax)
      .def_property_readonly("compiled", [](const Model& m) { return m.variables() != nullptr; })
      .def("compile", [](Model& m, const py::dict& optimizer, const std::string& loss, bool from_logits,
                         double label_smoothing, const std::vector<std::string>& metrics, uint64_t seed,
                         const std::string& precision, int threads, py::object strategy, bool fold_batch_norm) {
        keras::CompileOptions o;
        o.optimizer = OptimizerOf(optimizer);
        o.loss = Unwrap(keras::losses::Get(loss, from_logits));
        o.loss.label_smoothing = static_cast<float>(label_smoothing);
        for (const std::string& name : metrics) Unwrap(keras::MakeMetric(name, o.loss));  // a bad name, here
        o.metrics = metrics;
        o.seed = seed;
        if (precision != "float32" && precision != "mixed_bfloat16")
          ThrowValueError("precision must be 'float32' or 'mixed_bfloat16', got '" + precision + "'");
        o.precision = precision;
        o.threads = threads;
        o.fold_batch_norm = fold_batch_norm;
        if (!strategy.is_none()) o.strategy = strategy.cast<distribute::Strategy*>();
        Check(m.compile(std::move(o)));
      }, py::arg("optimizer"), py::arg("loss"), py::arg("from_logits"), py::arg("label_smoothing"), py::arg("metrics"),
         py::arg("seed"), py::arg("precision"), py::arg("threads"), py::arg("strategy"), py::arg("fold_batch_norm"))
      .def("save_weights", [](const Model& m, const std::string& path) {
        py::gil_scoped_release release;
        Check(m.save_weights(path));
      }, py::arg("path"))
      .def("load_weights", [](Model& m, const std::string& path, bool by_name, bool skip_mismatch) {
        py::dict out;
        if (!keras::IsHdf5File(path)) {
          if (by_name || skip_mismatch)
            ThrowValueError("load_weights(" + path + "): by_name and skip_mismatch apply to Keras .h5 files; this is a Strata checkpoint");
          {
            py::gil_scoped_release release;
            Check(m.load_weights(path));
          }
          out["layout"] = "checkpoint";
          return out;
        }
        keras::KerasWeightsReport r;
        {
          py::gil_scoped_release release;
          r = Unwrap(keras::LoadKerasWeights(m, path, {.by_name = by_name, .skip_mismatch = skip_mismatch}));
        }
        out["layout"] = r.layout == keras::KerasWeightsLayout::kKeras3 ? "keras3" : "h5";
        // Lists built here: a vector<string> cast can resolve to another file's instantiation
        // (one without pybind11/stl.h) once LTO merges them.
        auto list = [](const std::vector<std::string>& v) {
          py::list l;
          for (const std::string& s : v) l.append(py::str(s));
          return l;
        };
        out["loaded"] = list(r.loaded);
        out["skipped"] = list(r.skipped);
        out["absent"] = list(r.absent);
        out["unused"] = list(r.unused);
        return out;
      }, py::arg("path"), py::arg("by_name") = false, py::arg("skip_mismatch") = false)
      .def_property("trainable", &Model::trainable, &Model::set_trainable)
      .def("freeze_until", [](Model& m, const std::string& name) { Check(m.freeze_until(name)); })
      .def_readwrite("stop_training", &Model::stop_training)
      .def_property_readonly("learning_rate", &Model::learning_rate)
      .def("set_learning_rate_override", &Model::set_learning_rate_override)
      .def_property("global_step", &Model::global_step, &Model::set_global_step)
      .def_property_readonly("num_replicas", &Model::num_replicas)
      .def("weights", [](const Model& m) {
        // (name, array over the model's storage, trainable) per variable, in the store's order.
        const backend::VariableStore* store = m.variables();
        if (!store) ThrowValueError("model '" + m.name() + "': not built yet (compile it first)");
        py::list out;
        for (const auto& e : store->entries())
          out.append(py::make_tuple(e.name, ArrayFromTensor(Unwrap(store->Value(e.name))), e.trainable));
        return out;
      })
      .def("train_on_batch", [](Model& m, py::handle x, py::handle y) {
        data::Element batch = BatchOf(m, x, y);
        keras::Logs logs;
        {
          py::gil_scoped_release release;
          logs = Unwrap(m.train_on_batch(std::vector<Tensor>(batch.tensors.begin(), batch.tensors.end() - 1), batch.tensors.back()));
        }
        return LogsDict(logs);
      }, py::arg("x"), py::arg("y"))
      .def("compute_gradients", [](Model& m, py::handle x, py::handle y) {
        data::Element batch = BatchOf(m, x, y);
        double loss = 0;
        {
          py::gil_scoped_release release;
          loss = Unwrap(m.compute_gradients(batch)).loss;
        }
        return loss;
      }, py::arg("x"), py::arg("y"),
         "Forward and backward of the global batch (x, y) on every replica; the averaged gradients are in gradients(). Returns the mean loss.")
      .def("gradients", [](Model& m) {
        if (!m.variables()) ThrowValueError("model '" + m.name() + "': compile it before asking for gradients");
        return ArrayFromTensor(m.gradients());
      }, "The averaged gradients, f32 [trainable params], over the model's storage: edits reach apply_gradients().")
      .def("apply_gradients", [](Model& m) {
        py::gil_scoped_release release;
        Check(m.apply_gradients());
      });

  k.def("application_names", &keras::applications::Names);
  k.def("preprocess_mode", [](const std::string& app) { return Unwrap(keras::applications::PreprocessMode(app)); });
  // Keras's imagenet_utils.preprocess_input on a float32 copy of `x` (uint8 and other numeric
  // arrays are converted, as Keras casts them to floatx).
  k.def("preprocess_input", [](py::handle x, const std::string& mode) {
    Tensor in = TensorFromArray(x, "x", {.cast_to = DType::kF32});
    Tensor out(DType::kF32, in.shape());
    std::memcpy(out.raw_data(), in.raw_data(), in.nbytes());
    Check(keras::applications::PreprocessInput(&out, mode));
    return ArrayFromTensor(out);
  }, py::arg("x"), py::arg("mode"));
  // Keras's published ImageNet weights of an application configuration: (url, fname, file_hash).
  k.def("imagenet_weights", [](const std::string& app, bool include_top, py::object input_shape, int classes,
                               double alpha, int depth_multiplier, bool minimalistic) {
    keras::applications::Options o;
    o.include_top = include_top;
    o.minimalistic = minimalistic;
    if (!input_shape.is_none()) o.input_shape = ShapeOf(input_shape.cast<std::vector<int64_t>>(), "input_shape");
    o.classes = classes;
    o.alpha = alpha;
    o.depth_multiplier = depth_multiplier;
    auto w = Unwrap(keras::applications::ImagenetWeights(app, o));
    return py::make_tuple(w.url, w.fname, w.file_hash);
  }, py::arg("app"), py::arg("include_top"), py::arg("input_shape"), py::arg("classes"), py::arg("alpha") = 1.0,
     py::arg("depth_multiplier") = 1, py::arg("minimalistic") = false);
  // Keras's utils.get_file into Strata's model cache (io/get_file.h): the local path.
  k.def("get_file", [](const std::string& fname, const std::string& origin, const std::string& file_hash) {
    py::gil_scoped_release release;
    return Unwrap(io::GetFile(fname, origin, file_hash));
  }, py::arg("fname"), py::arg("origin"), py::arg("file_hash") = "");
  // Keras's ImageNet classes, by number: [(WordNet id, name)] (decode_predictions ranks in NumPy,
  // as Keras does, so ties come out in Keras's order too).
  k.def("imagenet_classes", [] {
    py::list out;
    for (const auto& c : keras::applications::ImagenetClasses()) out.append(py::make_tuple(c.id, c.name));
    return out;
  });
  k.def("imagenet_class_index_json", [] { return py::bytes(std::string(keras::applications::ImagenetClassIndexJson())); });
  RegisterKerasFit(k);
}

}  // namespace strata::python
