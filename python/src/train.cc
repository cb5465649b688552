// strata._strata.train: the training recipe and its trainer (strata/train/), the library's
// `strata train`. python/strata/_train.py gives them strata.train(...) and strata.presets.
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings.h"
#include "convert.h"
#include "strata/core/cpu.h"
#include "strata/train/recipe.h"
#include "strata/train/trainer.h"

namespace strata::python {
namespace {

namespace py = pybind11;
using train::Recipe;

// Every field of Recipe, bound by name: the Python keywords of strata.train(...) are exactly these
// (Recipe.fields() lists them; a test checks them against `strata train --help`).
template <typename C>
void BindFields(C& c, py::list& names) {
#define STRATA_FIELD(name)             \
  c.def_readwrite(#name, &Recipe::name); \
  names.append(#name)
  STRATA_FIELD(preset);
  STRATA_FIELD(data);
  STRATA_FIELD(val);
  STRATA_FIELD(image_key);
  STRATA_FIELD(label_key);
  STRATA_FIELD(image_size);
  STRATA_FIELD(channels);
  STRATA_FIELD(classes);
  STRATA_FIELD(pad_crop);
  STRATA_FIELD(flip);
  STRATA_FIELD(model);
  STRATA_FIELD(weights);
  STRATA_FIELD(freeze_until);
  STRATA_FIELD(freeze_backbone_epochs);
  STRATA_FIELD(epochs);
  STRATA_FIELD(steps_per_epoch);
  STRATA_FIELD(validation_steps);
  STRATA_FIELD(batch_per_replica);
  STRATA_FIELD(replicas);
  STRATA_FIELD(optimizer);
  STRATA_FIELD(lr);
  STRATA_FIELD(lr_scaling);
  STRATA_FIELD(schedule);
  STRATA_FIELD(warmup_epochs);
  STRATA_FIELD(weight_decay);
  STRATA_FIELD(label_smoothing);
  STRATA_FIELD(ema);
  STRATA_FIELD(tta);
  STRATA_FIELD(metrics);
  STRATA_FIELD(precision);
  STRATA_FIELD(seed);
  STRATA_FIELD(deterministic);
  STRATA_FIELD(checkpoint_dir);
  STRATA_FIELD(resume);
  STRATA_FIELD(out);
  STRATA_FIELD(tensorboard);
  STRATA_FIELD(monitor);
  STRATA_FIELD(monitor_interval);
  STRATA_FIELD(monitor_port);
  STRATA_FIELD(monitor_bind);
  STRATA_FIELD(trace);
  STRATA_FIELD(report_json);
  STRATA_FIELD(verbose);
  STRATA_FIELD(default_data);
  STRATA_FIELD(resize_spec_file);
  STRATA_FIELD(val_split);
#undef STRATA_FIELD
}

py::dict ReportDict(const train::TrainReport& r) {
  py::dict d;
  d["chief"] = r.chief;
  d["history"] = r.history.history;
  d["epoch"] = r.history.epoch;
  d["val_loss"] = r.val_loss;
  d["val_accuracy"] = r.val_accuracy;
  d["val_accuracy_tta"] = r.val_accuracy_tta;
  d["val_f1_macro"] = r.val_f1_macro;
  d["model_path"] = r.model_path;
  d["replicas"] = r.replicas;
  d["global_batch"] = r.global_batch;
  d["steps_per_epoch"] = r.steps_per_epoch;
  d["wall_seconds"] = r.wall_seconds;
  d["train_seconds"] = r.train_seconds;
  d["validation_seconds"] = r.validation_seconds;
  d["images_per_second"] = r.images_per_second;
  d["seconds_at_epoch_end"] = r.seconds_at_epoch_end;
  d["cross_host_json"] = r.cross_host_json;
  return d;
}

}  // namespace

void RegisterTrain(py::module_& m) {
  py::module_ t = m.def_submodule("train", "The training recipe and its trainer: what `strata train` runs.");
  py::class_<Recipe> recipe(t, "Recipe", "train::Recipe: everything `strata train`'s flags describe (strata/train/recipe.h).");
  recipe.def(py::init<>());
  py::list names;
  BindFields(recipe, names);
  recipe.def_static("fields", [names]() { return names; }, "The recipe's field names, in the header's order.");
  recipe.def("copy", [](const Recipe& r) { return Recipe(r); });

  t.def("preset", [](const std::string& name) { return Unwrap(train::Preset(name)); }, py::arg("name"),
        "The recipe a preset names: \"\" or \"fashion_mnist\" (the default job), \"flowers\".");
  t.def("preset_names", &train::PresetNames);
  t.def("check", [](const Recipe& r) { python::Check(train::Check(r)); }, py::arg("recipe"));
  t.def("resolve_inputs", [](Recipe& r, bool make_data) {
    py::gil_scoped_release nogil;  // the default dataset may be made (seconds, once)
    return Unwrap(train::ResolveInputs(&r, r.verbose != 0, make_data));
  }, py::arg("recipe"), py::arg("make_data") = true,
        "Fills image_size, data/val (Fashion-MNIST, made on first use) and channels; returns where the channels came from.");
  t.def("usable_cores", &UsableCores, "The replicas a recipe runs by default: the cores this process may use.");
  t.def("run", [](const Recipe& r) {
    Result<train::TrainReport> report = [&] {
      py::gil_scoped_release nogil;
      return train::Run(r);
    }();
    return ReportDict(Unwrap(std::move(report)));
  }, py::arg("recipe"), "Trains as `strata train` does; returns the report as a dict.");

  // The recipe's pieces, for a user who takes it apart (python/strata/presets/).
  t.def("make_dataset", [](const Recipe& r, const std::string& pattern, int replicas, bool training) {
    return Unwrap(train::MakeDataset(r, pattern, replicas, training));
  }, py::arg("recipe"), py::arg("pattern"), py::arg("replicas"), py::arg("training"));
  t.def("make_schedule", &train::MakeSchedule, py::arg("recipe"), py::arg("steps_per_epoch"), py::arg("replicas"));
  t.def("make_model", [](const Recipe& r) { return Unwrap(train::MakeModel(r)); }, py::arg("recipe"));
  t.def("peak_learning_rate", &train::PeakLearningRate, py::arg("recipe"), py::arg("replicas"));
}

}  // namespace strata::python
