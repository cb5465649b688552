// strata._strata.data: the C++ Dataset (strata::data::Dataset) and its iterator, built-in map
// functions (BuiltinMap: parse_example, decode_image) and Python callables as map / filter /
// interleave functions. python/strata/data.py gives them tf.data's names and nests elements
// (tuples, dicts, byte strings); here an element is a flat list of numpy arrays.
//
// Threads and the GIL: the consumer releases the GIL while C++ produces an element
// (Iterator.__next__). A Python function runs in whichever pipeline thread calls it and takes the
// GIL for that one call; an exception it raises is kept (ExceptionStore) and re-raised, same
// object, to the caller of __next__, with the stage as a note. Python objects a pipeline holds
// (functions, borrowed arrays) are released under the GIL, from whatever thread drops them.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <random>

#include "bindings.h"
#include "convert.h"
#include "data_map.h"
#include "strata/data/sources.h"
#include "strata/datasets/image_example.h"
#include "strata/image/augment.h"

namespace strata::python {

namespace {

using data::Dataset;
using data::Element;

// ---- Python exceptions raised inside the pipeline ------------------------------------------
// A Status carries only a message, so the exception object waits here under an id written into
// the message; the consumer takes it back out. Bounded: an error dropped by ignore_errors() is
// never claimed, and only the newest kMaxKept stay.
constexpr char kTag[] = " [python exception #";
constexpr size_t kMaxKept = 64;
std::map<uint64_t, py::object>& KeptExceptions() {  // guarded by the GIL
  static auto* kept = new std::map<uint64_t, py::object>();
  return *kept;
}

// With the GIL held, inside a catch of `e`.
Status KeepException(py::error_already_set& e, const std::string& what) {
  static uint64_t next_id = 0;
  const uint64_t id = ++next_id;
  auto& kept = KeptExceptions();
  kept[id] = e.value();
  while (kept.size() > kMaxKept) kept.erase(kept.begin());
  const std::string type = py::str(e.type().attr("__name__"));
  return InvalidArgument(what + ": the Python function raised " + type + ": " +
                         std::string(py::str(e.value())) + kTag + std::to_string(id) + "]");
}

// Raises the error an iterator returned: the kept Python exception when the message names
// one (with the pipeline's context as a note), else the strata.errors class of its code.
[[noreturn]] void ThrowPipelineError(const Status& s) {
  const std::string& msg = s.message();
  if (size_t at = msg.rfind(kTag); at != std::string::npos) {
    const uint64_t id = std::strtoull(msg.c_str() + at + sizeof(kTag) - 1, nullptr, 10);
    auto& kept = KeptExceptions();
    if (auto it = kept.find(id); it != kept.end()) {
      py::object exc = it->second;
      kept.erase(it);
      if (py::hasattr(exc, "add_note")) exc.attr("add_note")("raised in the strata.data pipeline: " + msg.substr(0, at));
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
      throw py::error_already_set();
    }
  }
  ThrowStatus(s);
}

// A Python object held by a pipeline (copied into std::functions, dropped by any thread).
struct PyRef {
  py::object obj;
  explicit PyRef(py::object o) : obj(std::move(o)) {}
  ~PyRef() {
    if (!Py_IsInitialized()) {
      obj.release();  // the interpreter is gone: leak rather than touch it
      return;
    }
    py::gil_scoped_acquire gil;
    obj = py::object();
  }
};
using PyFn = std::shared_ptr<PyRef>;

py::tuple ArraysOf(const Element& e) {
  py::tuple args(e.size());
  for (size_t i = 0; i < e.size(); ++i) args[i] = ArrayFromTensor(e[i]);
  return args;
}

// The Python side (data.py) returns (list of arrays, names or None), already numpy-converted.
Result<Element> ElementFromPython(const py::object& r, const std::string& what) {
  auto t = r.cast<py::tuple>();
  auto flat = t[0].cast<py::list>();
  Element out;
  out.tensors.reserve(flat.size());
  for (size_t i = 0; i < flat.size(); ++i)
    out.tensors.push_back(TensorFromArray(flat[i], what + " output component " + std::to_string(i)));
  if (!t[1].is_none()) out.names = t[1].cast<std::vector<std::string>>();
  return out;
}

// Runs `body` with the GIL, turning a Python exception into a Status.
template <typename T, typename Body>
Result<T> WithPython(const std::string& what, Body body) {
  if (!Py_IsInitialized()) return InvalidArgument(what + ": the Python interpreter has exited");
  py::gil_scoped_acquire gil;
  try {
    return body();
  } catch (py::error_already_set& e) {
    return KeepException(e, what);
  } catch (const std::exception& e) {
    return InvalidArgument(what + ": " + e.what());
  }
}

data::MapFn PythonMap(PyFn fn) {
  return [fn](Element e) -> Result<Element> {
    return WithPython<Element>("map", [&]() -> Result<Element> {
      return ElementFromPython(fn->obj(*ArraysOf(e)), "map");
    });
  };
}

data::FilterFn PythonFilter(PyFn fn) {
  return [fn](const Element& e) -> Result<bool> {
    return WithPython<bool>("filter", [&]() -> Result<bool> { return fn->obj(*ArraysOf(e)).cast<bool>(); });
  };
}

data::InterleaveFn PythonInterleave(PyFn fn) {
  return [fn](const Element& e) -> Result<Dataset> {
    return WithPython<Dataset>("interleave", [&]() -> Result<Dataset> {
      return fn->obj(*ArraysOf(e)).cast<Dataset>();
    });
  };
}

// The consumer's side of an iterator. Destroyed without the GIL: its threads may be waiting
// for it (a Python map function) while they are joined.
struct PyIterator {
  std::unique_ptr<data::Iterator> it;
  ~PyIterator() {
    if (!it) return;
    py::gil_scoped_release nogil;
    it.reset();
  }
};

py::list NextElement(PyIterator& self) {
  Element e;
  bool end = false;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = self.it->GetNext(&e, &end);
  }
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C between elements
  if (!s.ok()) ThrowPipelineError(s);
  if (end) throw py::stop_iteration();
  py::list out;
  for (const Tensor& t : e.tensors) out.append(ArrayFromTensor(t));
  return out;
}

record::Compression CompressionOf(const std::optional<std::string>& c) {
  if (!c) return record::Compression::kAuto;
  if (c->empty() || *c == "NONE") return record::Compression::kNone;
  if (*c == "GZIP") return record::Compression::kGzip;
  if (*c == "ZLIB") return record::Compression::kZlib;
  ThrowValueError("TFRecordDataset: compression_type must be None, '', 'GZIP' or 'ZLIB', got '" + *c + "'");
}

uint64_t SeedOr(std::optional<uint64_t> seed) {
  if (seed) return *seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// strata.data.experimental.decode_image: an encoded (JPEG or PNG) image feature of a parsed
// Example -> (image f32 [H, W, C] in [0, 1] (or as normalised), label i64 []), resized and
// randomly augmented by image::Augmenter, as the C++ image recipes do.
BuiltinMap DecodeImage(const std::string& image_key, const std::optional<std::string>& label_key, int height,
                       int width, int channels, float flip_left_right, float flip_up_down,
                       std::optional<std::pair<float, float>> saturation, float brightness,
                       std::optional<std::pair<float, float>> contrast, float hue, const std::string& resize,
                       std::optional<uint64_t> seed) {
  image::AugmentOptions o;
  o.height = height;
  o.width = width;
  o.channels = channels;
  o.flip_left_right = flip_left_right;
  o.flip_up_down = flip_up_down;
  if (saturation) std::tie(o.saturation_lower, o.saturation_upper) = *saturation;
  o.brightness = brightness;
  if (contrast) std::tie(o.contrast_lower, o.contrast_upper) = *contrast;
  o.hue = hue;
  if (resize == "bilinear") o.resize = image::ResizeMethod::kBilinear;
  else if (resize == "area") o.resize = image::ResizeMethod::kArea;
  else ThrowValueError("decode_image: method must be 'bilinear' or 'area', got '" + resize + "'");
  const uint64_t s = SeedOr(seed);
  // The same seed streams as datasets::FlowersDataset (MixSeed(seed, 2) for the augmenter),
  // so a seed gives the recipe's pixels.
  auto aug = std::make_shared<const image::Augmenter>(Unwrap(image::Augmenter::Make(o, data::MixSeed(s, 2))));
  datasets::ImageKeys keys{image_key, label_key.value_or("")};
  BuiltinMap m;
  m.name = "decode_image";
  m.fn = datasets::DecodeFn(aug, keys, "decode_image");
  m.into_spec = datasets::DecodedSpec(*aug, label_key.has_value());
  m.into = [aug, keys](Element e, data::Rng& rng, Element& out) -> Status {
    return datasets::DecodeInto(*aug, keys, "decode_image", e, rng, out);
  };
  m.seed = data::MixSeed(s, 3);
  return m;
}

}  // namespace

BuiltinMap ComposeMaps(const BuiltinMap& a, const BuiltinMap& b) {
  BuiltinMap m;
  m.name = a.name + " -> " + b.name;
  m.fn = [f = a.fn, g = b.fn](Element e, data::Rng& rng) -> Result<Element> {
    STRATA_ASSIGN_OR_RETURN(Element mid, f(std::move(e), rng));
    return g(std::move(mid), rng);
  };
  if (b.into_spec) {
    m.into_spec = b.into_spec;
    m.into = [f = a.fn, g = b.into](Element e, data::Rng& rng, Element& out) -> Status {
      STRATA_ASSIGN_OR_RETURN(Element mid, f(std::move(e), rng));
      return g(std::move(mid), rng, out);
    };
  }
  m.string_keys = b.string_keys;
  m.seed = b.seed ? b.seed : a.seed;
  return m;
}

void RegisterData(py::module_& parent) {
  py::module_ m = parent.def_submodule("data", "The C++ side of strata.data (see python/strata/data.py).");
  m.attr("AUTOTUNE") = data::AUTOTUNE;

  py::class_<BuiltinMap>(m, "BuiltinMap", "A map function that runs in C++ (parse_example, decode_image).")
      .def_readonly("name", &BuiltinMap::name)
      .def_readonly("string_keys", &BuiltinMap::string_keys)
      .def("then", &ComposeMaps, py::arg("second"), "This function followed by `second`, as one.")
      .def("__repr__", [](const BuiltinMap& b) { return "<strata built-in map " + b.name + ">"; });

  m.def("decode_image", &DecodeImage, py::arg("image_key"), py::arg("label_key"), py::arg("height"),
        py::arg("width"), py::arg("channels"), py::arg("flip_left_right"), py::arg("flip_up_down"),
        py::arg("saturation"), py::arg("brightness"), py::arg("contrast"), py::arg("hue"), py::arg("method"),
        py::arg("seed"));

  py::class_<PyIterator>(m, "Iterator", "A running pipeline: __next__ returns a flat list of arrays.")
      .def("__iter__", [](PyIterator& self) -> PyIterator& { return self; })
      .def("__next__", &NextElement)
      .def("stats_table", [](const PyIterator& self) { return self.it->StatsTable(); },
           "The per-stage statistics (busy, blocked, buffers, parallelism) as a table.");

  py::class_<Dataset>(m, "Dataset", "strata::data::Dataset: an immutable pipeline description.")
      .def_static("range", [](int64_t start, int64_t stop, int64_t step) { return Dataset::range(start, stop, step); },
                  py::arg("start"), py::arg("stop"), py::arg("step"))
      .def_static("from_tensor_slices",
                  [](const py::list& arrays, std::optional<std::vector<std::string>> names) {
                    Element e;
                    for (size_t i = 0; i < arrays.size(); ++i)
                      e.tensors.push_back(TensorFromArray(arrays[i], "from_tensor_slices component " + std::to_string(i)));
                    if (names) e.names = *names;
                    return Dataset::from_tensor_slices(std::move(e));
                  }, py::arg("arrays"), py::arg("names") = py::none())
      .def_static("zip", &Dataset::zip, py::arg("datasets"))
      .def_static("list_files",
                  [](const std::string& pattern, bool shuffle, std::optional<uint64_t> seed) {
                    return Unwrap(data::list_files(pattern, {.shuffle = shuffle, .seed = seed}));
                  }, py::arg("pattern"), py::arg("shuffle"), py::arg("seed"))
      .def_static("from_strings", &data::from_strings, py::arg("strings"))
      .def_static("tfrecord",
                  [](const Dataset& files, std::optional<std::string> compression, std::optional<int64_t> buffer_size,
                     int64_t num_parallel_reads, int64_t cycle_length) {
                    data::TFRecordOptions o;
                    o.compression = CompressionOf(compression);
                    if (buffer_size) {
                      if (*buffer_size < 0) ThrowValueError("TFRecordDataset: buffer_size must be >= 0");
                      o.buffer_size = *buffer_size == 0 ? o.buffer_size : *buffer_size;
                    }
                    if (num_parallel_reads == 0 || num_parallel_reads < data::AUTOTUNE)
                      ThrowValueError("TFRecordDataset: num_parallel_reads must be >= 1 or AUTOTUNE, got " +
                                      std::to_string(num_parallel_reads));
                    o.num_parallel_reads = num_parallel_reads;
                    o.cycle_length = cycle_length;
                    return data::TFRecordDataset(files, o);
                  }, py::arg("files"), py::arg("compression"), py::arg("buffer_size"), py::arg("num_parallel_reads"),
                  py::arg("cycle_length"))
      .def("map_builtin",
           [](const Dataset& ds, const BuiltinMap& f, int64_t num_parallel_calls, std::optional<bool> deterministic) {
             data::MapOptions o{.num_parallel_calls = num_parallel_calls, .deterministic = deterministic, .seed = f.seed};
             if (f.into_spec) return ds.map_into(*f.into_spec, f.into, o);
             return ds.map_with_rng(f.fn, o);
           }, py::arg("fn"), py::arg("num_parallel_calls"), py::arg("deterministic"))
      .def("map_python",
           [](const Dataset& ds, py::function fn, int64_t num_parallel_calls, std::optional<bool> deterministic) {
             return ds.map(PythonMap(std::make_shared<PyRef>(std::move(fn))),
                           {.num_parallel_calls = num_parallel_calls, .deterministic = deterministic});
           }, py::arg("fn"), py::arg("num_parallel_calls"), py::arg("deterministic"))
      .def("filter_python",
           [](const Dataset& ds, py::function fn) { return ds.filter(PythonFilter(std::make_shared<PyRef>(std::move(fn)))); },
           py::arg("predicate"))
      .def("interleave_python",
           [](const Dataset& ds, py::function fn, int64_t cycle_length, int64_t block_length,
              int64_t num_parallel_calls, std::optional<bool> deterministic) {
             return ds.interleave(PythonInterleave(std::make_shared<PyRef>(std::move(fn))),
                                  {.cycle_length = cycle_length, .block_length = block_length,
                                   .num_parallel_calls = num_parallel_calls, .deterministic = deterministic});
           }, py::arg("fn"), py::arg("cycle_length"), py::arg("block_length"), py::arg("num_parallel_calls"),
           py::arg("deterministic"))
      .def("batch", [](const Dataset& ds, int64_t n, bool drop) { return ds.batch(n, {.drop_remainder = drop}); },
           py::arg("batch_size"), py::arg("drop_remainder"))
      .def("padded_batch",
           [](const Dataset& ds, int64_t n, std::vector<std::vector<int64_t>> shapes, double value, bool drop) {
             return ds.padded_batch(n, {.drop_remainder = drop, .padded_shapes = std::move(shapes), .padding_value = value});
           }, py::arg("batch_size"), py::arg("padded_shapes"), py::arg("padding_value"), py::arg("drop_remainder"))
      .def("shuffle",
           [](const Dataset& ds, int64_t n, std::optional<uint64_t> seed, bool reshuffle) {
             return ds.shuffle(n, {.seed = seed, .reshuffle_each_iteration = reshuffle});
           }, py::arg("buffer_size"), py::arg("seed"), py::arg("reshuffle_each_iteration"))
      .def("prefetch", &Dataset::prefetch, py::arg("buffer_size"))
      .def("repeat", &Dataset::repeat, py::arg("count"))
      .def("take", &Dataset::take, py::arg("count"))
      .def("skip", &Dataset::skip, py::arg("count"))
      .def("cache", &Dataset::cache, py::arg("filename"))
      .def("shard", &Dataset::shard, py::arg("num_shards"), py::arg("index"))
      .def("enumerate", &Dataset::enumerate, py::arg("start"))
      .def("ignore_errors", &Dataset::ignore_errors)
      .def("with_options",
           [](const Dataset& ds, std::optional<bool> deterministic, std::optional<bool> autotune_enabled,
              std::optional<int> cpu_budget, std::optional<int64_t> ram_budget, std::optional<bool> map_and_batch_fusion) {
             data::Options o;
             o.deterministic = deterministic;
             if (autotune_enabled || cpu_budget || ram_budget) {
               data::AutotuneOptions a;
               if (autotune_enabled) a.enabled = *autotune_enabled;
               if (cpu_budget) a.cpu_budget = *cpu_budget;
               if (ram_budget) a.ram_budget_bytes = *ram_budget;
               o.autotune = a;
             }
             o.map_and_batch_fusion = map_and_batch_fusion;
             return ds.with_options(o);
           }, py::arg("deterministic"), py::arg("autotune_enabled"), py::arg("cpu_budget"), py::arg("ram_budget"),
           py::arg("map_and_batch_fusion"))
      .def("make_iterator", [](const Dataset& ds) {
             Result<std::unique_ptr<data::Iterator>> r = [&] {
               py::gil_scoped_release nogil;  // stages may start threads, open files
               return ds.make_iterator();
             }();
             auto p = std::make_unique<PyIterator>();
             p->it = Unwrap(std::move(r));
             return p;
           });
}

}  // namespace strata::python
