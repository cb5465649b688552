// strata._strata.keras: fit / evaluate / predict from numpy arrays or a strata.data Dataset,
// Keras's built-in callbacks, Python-defined callbacks, and Ctrl-C.
//
// The GIL is released for the whole of fit, evaluate and predict. Python callbacks are called
// from the training loop with the GIL taken; an exception they raise stops fit (a Status the
// loop returns) and is raised again, unchanged, to fit's caller. Ctrl-C: Python's SIGINT
// handler only sets a flag while C++ runs, so after every step the loop takes the GIL and runs
// the pending handlers (PyErr_CheckSignals): a KeyboardInterrupt stops fit after that step,
// whose callbacks (a BackupAndRestore's write) have all finished, and is raised to the caller.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert.h"
#include "keras_bindings.h"
#include "strata/data/dataset.h"
#include "strata/keras/callbacks.h"
#include "strata/keras/model.h"
#include "strata/monitor/fit_monitor.h"

namespace strata::python {
namespace {

using keras::Model;

// The first Python exception raised inside a C++ loop, kept (with the GIL) until the loop has
// returned and the GIL is back, then raised again.
struct PendingError {
  py::object type, value, traceback;
  bool set() const { return static_cast<bool>(type); }
  // With the GIL: takes the current Python error.
  void Fetch() {
    PyObject *t = nullptr, *v = nullptr, *tb = nullptr;
    PyErr_Fetch(&t, &v, &tb);
    if (set()) {  // keep the first
      Py_XDECREF(t);
      Py_XDECREF(v);
      Py_XDECREF(tb);
      return;
    }
    type = py::reinterpret_steal<py::object>(t);
    value = py::reinterpret_steal<py::object>(v);
    traceback = py::reinterpret_steal<py::object>(tb);
  }
  [[noreturn]] void Raise() {
    PyErr_Restore(type.release().ptr(), value.release().ptr(), traceback.release().ptr());
    throw py::error_already_set();
  }
};

py::dict LogsDict(const keras::Logs& logs) {
  py::dict d;
  for (const auto& [k, v] : logs) d[py::str(k)] = v;
  return d;
}

// A strata.keras.callbacks.Callback subclass written in Python, called with the GIL taken.
class PythonCallback final : public keras::Callback {
 public:
  PythonCallback(py::object callback, std::shared_ptr<PendingError> error)
      : callback_(std::move(callback)), error_(std::move(error)) {
    // Per-step calls cost the GIL; a callback that does not override a batch hook is not called per step.
    wants_batch_ = !py::hasattr(callback_, "_wants_batch") || callback_.attr("_wants_batch")().cast<bool>();
  }
  ~PythonCallback() override {
    py::gil_scoped_acquire gil;
    callback_ = py::object();
  }
  Status OnTrainBegin(const keras::TrainInfo&) override {
    return Invoke([&] { callback_.attr("on_train_begin")(py::dict()); });
  }
  Status OnEpochBegin(int epoch) override {
    return Invoke([&] { callback_.attr("on_epoch_begin")(epoch, py::dict()); });
  }
  Status OnTrainBatchEnd(int64_t batch, const keras::Logs& logs) override {
    if (!wants_batch_) return Status::OK();
    return Invoke([&] { callback_.attr("on_train_batch_end")(batch, LogsDict(logs)); });
  }
  Status OnEpochEnd(int epoch, keras::Logs& logs) override {
    return Invoke([&] {
      py::dict d = LogsDict(logs);
      callback_.attr("on_epoch_end")(epoch, d);
      // Keras callbacks may add values to the epoch's logs (History keeps them).
      for (auto item : d) {
        const std::string key = py::str(item.first);
        if (!py::isinstance<py::float_>(item.second) && !py::isinstance<py::int_>(item.second)) continue;
        const double v = item.second.cast<double>();
        bool found = false;
        for (auto& [k, old] : logs)
          if (k == key) old = v, found = true;
        if (!found) logs.emplace_back(key, v);
      }
    });
  }
  Status OnTrainEnd(const keras::Logs& logs) override {
    return Invoke([&] { callback_.attr("on_train_end")(LogsDict(logs)); });
  }

 private:
  template <typename F> Status Invoke(F&& f) {
    py::gil_scoped_acquire gil;
    try {
      f();
    } catch (py::error_already_set& e) {
      e.restore();
      error_->Fetch();
      return InvalidArgument("a Python callback raised an exception");
    }
    return Status::OK();
  }
  py::object callback_;
  std::shared_ptr<PendingError> error_;
  bool wants_batch_ = true;
};

// The last callback of every fit from Python: runs pending signal handlers after each step.
class InterruptCheck final : public keras::Callback {
 public:
  explicit InterruptCheck(std::shared_ptr<PendingError> error) : error_(std::move(error)) {}
  Status OnTrainBatchEnd(int64_t, const keras::Logs&) override { return Check(); }
  Status OnEpochEnd(int, keras::Logs&) override { return Check(); }

 private:
  Status Check() {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return Status::OK();
    error_->Fetch();
    return InvalidArgument("interrupted");
  }
  std::shared_ptr<PendingError> error_;
};

// A Dataset passed from Python: strata.data.Dataset (a Python wrapper whose _to_cpp() gives
// the C++ object data.cc binds), or that C++ object itself.
data::Dataset DatasetOf(py::handle obj, const char* arg) {
  py::object target = py::reinterpret_borrow<py::object>(obj);
  if (!py::isinstance<data::Dataset>(target) && py::hasattr(obj, "_to_cpp")) target = obj.attr("_to_cpp")();
  try {
    return target.cast<data::Dataset>();
  } catch (const py::cast_error&) {
    ThrowTypeError(std::string(arg) + ": expected numpy arrays or a strata.data.Dataset, got " +
                   std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
}

// (x..., y) arrays as a Dataset of batches: shuffled and repeated for training (each epoch a
// new order; drop_remainder: the compiled step has a static batch), in order for evaluation.
data::Dataset ArrayDataset(std::vector<Tensor> parts, int64_t batch_size, bool training, bool shuffle, uint64_t seed) {
  const int64_t n = parts[0].shape()[0];
  data::Dataset ds = data::Dataset::from_tensor_slices(data::Element(std::move(parts)));
  if (training) {
    if (shuffle) ds = ds.shuffle(n, {.seed = seed, .reshuffle_each_iteration = true});
    ds = ds.repeat().batch(batch_size, {.drop_remainder = true});
  } else {
    ds = ds.batch(batch_size);
  }
  return ds.prefetch(2);
}

std::vector<Tensor> ArraysWithLabels(const Model& model, py::handle x, py::handle y, bool need_y) {
  std::vector<Tensor> parts = ModelInputs(model, x, "x");
  const int64_t n = parts[0].shape()[0];
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i].shape()[0] != n)
      ThrowValueError("x: the input arrays have different lengths: " + ShapeText(parts[0].shape()) + " and " +
                      ShapeText(parts[i].shape()));
  if (y.is_none()) {
    if (need_y) ThrowValueError("y: labels are needed with numpy x (or pass a Dataset of (x, y) batches as x)");
    return parts;
  }
  Tensor labels = ModelLabels(y, "y");
  if (labels.rank() == 0 || labels.shape()[0] != n)
    ThrowValueError("x and y: x has " + std::to_string(n) + " examples (shape " + ShapeText(parts[0].shape()) +
                    ") but y has shape " + ShapeText(labels.shape()) + ": they must have the same length");
  parts.push_back(std::move(labels));
  return parts;
}

std::vector<std::shared_ptr<keras::Callback>> Callbacks(py::handle list, const std::shared_ptr<PendingError>& error) {
  std::vector<std::shared_ptr<keras::Callback>> out;
  if (list.is_none()) return out;
  for (py::handle item : list) {
    if (py::isinstance<keras::Callback>(item)) out.push_back(item.cast<std::shared_ptr<keras::Callback>>());
    else out.push_back(std::make_shared<PythonCallback>(py::reinterpret_borrow<py::object>(item), error));
  }
  return out;
}

keras::Mode ModeOf(const std::string& mode) {
  if (mode == "auto") return keras::Mode::kAuto;
  if (mode == "min") return keras::Mode::kMin;
  if (mode == "max") return keras::Mode::kMax;
  ThrowValueError("mode must be 'auto', 'min' or 'max', got '" + mode + "'");
}

// Runs `f` without the GIL; what it holds that may own Python references is dropped first.
template <typename F> auto WithoutGil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

}  // namespace

void RegisterKerasFit(py::module_& k) {
  py::class_<keras::Callback, std::shared_ptr<keras::Callback>>(k, "Callback", "A built-in Keras callback (C++ side).");

  k.def("EarlyStopping", [](const std::string& monitor, double min_delta, int patience, const std::string& mode,
                            bool restore_best_weights, int start_from_epoch) {
    return std::shared_ptr<keras::Callback>(std::make_shared<keras::EarlyStopping>(keras::EarlyStopping::Options{
        .monitor = monitor, .min_delta = min_delta, .patience = patience, .mode = ModeOf(mode),
        .restore_best_weights = restore_best_weights, .start_from_epoch = start_from_epoch}));
  });
  k.def("ModelCheckpoint", [](const std::string& filepath, const std::string& monitor, bool save_best_only,
                              const std::string& mode, int verbose) {
    return std::shared_ptr<keras::Callback>(std::make_shared<keras::ModelCheckpoint>(
        filepath, keras::ModelCheckpoint::Options{.monitor = monitor, .save_best_only = save_best_only,
                                                  .mode = ModeOf(mode), .verbose = verbose}));
  });
  k.def("ReduceLROnPlateau", [](const std::string& monitor, double factor, int patience, const std::string& mode,
                                double min_delta, int cooldown, double min_lr, int verbose) {
    if (factor >= 1.0) ThrowValueError("ReduceLROnPlateau: factor must be < 1, got " + std::to_string(factor));
    return std::shared_ptr<keras::Callback>(std::make_shared<keras::ReduceLROnPlateau>(keras::ReduceLROnPlateau::Options{
        .monitor = monitor, .factor = factor, .patience = patience, .mode = ModeOf(mode), .min_delta = min_delta,
        .cooldown = cooldown, .min_lr = min_lr, .verbose = verbose}));
  });
  k.def("CSVLogger", [](const std::string& filename, bool append) {
    return std::shared_ptr<keras::Callback>(std::make_shared<keras::CSVLogger>(filename, append));
  });
  k.def("TerminateOnNaN", [] { return std::shared_ptr<keras::Callback>(std::make_shared<keras::TerminateOnNaN>()); });
  k.def("BackupAndRestore", [](const std::string& backup_dir, int64_t save_freq, bool delete_checkpoint) {
    return std::shared_ptr<keras::Callback>(std::make_shared<keras::BackupAndRestore>(
        backup_dir, keras::BackupAndRestore::Options{.save_freq = save_freq, .delete_checkpoint = delete_checkpoint}));
  });
  k.def("TensorBoard", [](const std::string& log_dir, int64_t update_freq) {
    return std::shared_ptr<keras::Callback>(
        std::make_shared<keras::TensorBoard>(log_dir, keras::TensorBoard::Options{.update_freq = update_freq}));
  });

  k.def("fit", [](Model& model, py::object x, py::object y, int64_t batch_size, int epochs, int verbose,
                  py::object callbacks, py::object val_x, py::object val_y, bool shuffle, int initial_epoch,
                  py::object steps_per_epoch, py::object validation_steps, py::object monitor_port, uint64_t seed) {
    if (batch_size < 1) ThrowValueError("batch_size must be positive, got " + std::to_string(batch_size));
    std::optional<data::Dataset> train, val;
    keras::FitOptions o;
    o.epochs = epochs;
    o.verbose = verbose;
    o.initial_epoch = initial_epoch;
    if (!steps_per_epoch.is_none()) o.steps_per_epoch = steps_per_epoch.cast<int64_t>();
    if (!validation_steps.is_none()) o.validation_steps = validation_steps.cast<int64_t>();
    if (py::isinstance<py::array>(x) || py::isinstance<py::list>(x) || py::isinstance<py::tuple>(x)) {
      std::vector<Tensor> parts = ArraysWithLabels(model, x, y, /*need_y=*/true);
      const int64_t n = parts[0].shape()[0];
      if (n == 0) ThrowValueError("x: no examples");
      const int64_t batch = std::min(batch_size, n);
      // Every epoch is n // batch full batches (the static batch): a different n % batch examples
      // sit out each epoch.
      if (steps_per_epoch.is_none()) o.steps_per_epoch = n / batch;
      train = ArrayDataset(std::move(parts), batch, /*training=*/true, shuffle, seed);
    } else {
      if (!y.is_none()) ThrowValueError("y: pass labels inside the Dataset's (x, y) elements, not as y");
      train = DatasetOf(x, "x");
    }
    if (!val_x.is_none()) {
      if (py::isinstance<py::array>(val_x) || py::isinstance<py::list>(val_x) || py::isinstance<py::tuple>(val_x))
        val = ArrayDataset(ArraysWithLabels(model, val_x, val_y, /*need_y=*/true), batch_size, false, false, seed);
      else
        val = DatasetOf(val_x, "validation_data");
      o.validation_data = &*val;
    }
    auto error = std::make_shared<PendingError>();
    o.callbacks = Callbacks(callbacks, error);
    o.callbacks.push_back(std::make_shared<InterruptCheck>(error));
    std::unique_ptr<monitor::FitMonitor> monitor;
    if (!monitor_port.is_none()) {
      monitor = std::make_unique<monitor::FitMonitor>(monitor::FitMonitorOptions{.http_port = monitor_port.cast<int>()});
      o.observer = monitor.get();
    }
    Result<keras::History> history = WithoutGil([&] {
      Result<keras::History> h = model.fit(*train, o);
      std::fflush(stdout);
      // The datasets may hold the caller's arrays (borrowed): dropped here, where their
      // release can take the GIL without waiting on this thread.
      train.reset();
      val.reset();
      return h;
    });
    o.callbacks.clear();
    if (error->set()) error->Raise();
    Check(history.status());
    py::dict h;
    for (const auto& [key, values] : history->history) h[py::str(key)] = values;
    return py::make_tuple(history->epoch, h);
  }, py::arg("model"), py::arg("x"), py::arg("y"), py::arg("batch_size"), py::arg("epochs"), py::arg("verbose"),
     py::arg("callbacks"), py::arg("val_x"), py::arg("val_y"), py::arg("shuffle"), py::arg("initial_epoch"),
     py::arg("steps_per_epoch"), py::arg("validation_steps"), py::arg("monitor_port"), py::arg("seed"));

  k.def("evaluate", [](Model& model, py::object x, py::object y, int64_t batch_size, py::object steps, int verbose) {
    if (batch_size < 1) ThrowValueError("batch_size must be positive, got " + std::to_string(batch_size));
    std::optional<data::Dataset> ds;
    if (py::isinstance<py::array>(x) || py::isinstance<py::list>(x) || py::isinstance<py::tuple>(x))
      ds = ArrayDataset(ArraysWithLabels(model, x, y, /*need_y=*/true), batch_size, false, false, 0);
    else
      ds = DatasetOf(x, "x");
    keras::EvaluateOptions o{.steps = steps.is_none() ? -1 : steps.cast<int64_t>(), .verbose = verbose};
    Result<keras::Logs> logs = WithoutGil([&] {
      Result<keras::Logs> l = model.evaluate(*ds, o);
      std::fflush(stdout);
      ds.reset();
      return l;
    });
    return Unwrap(std::move(logs));
  });

  k.def("predict", [](Model& model, py::object x, int64_t batch_size, py::object steps) {
    if (batch_size < 1) ThrowValueError("batch_size must be positive, got " + std::to_string(batch_size));
    std::optional<data::Dataset> ds;
    if (py::isinstance<py::array>(x) || py::isinstance<py::list>(x) || py::isinstance<py::tuple>(x))
      ds = ArrayDataset(ArraysWithLabels(model, x, py::none(), /*need_y=*/false), batch_size, false, false, 0);
    else
      ds = DatasetOf(x, "x");
    const int64_t n_steps = steps.is_none() ? -1 : steps.cast<int64_t>();
    Result<Tensor> out = WithoutGil([&] {
      Result<Tensor> t = model.predict(*ds, n_steps);
      ds.reset();
      return t;
    });
    return ArrayFromTensor(Unwrap(std::move(out)));
  });
}

}  // namespace strata::python
