// strata._strata.io: tf.train.Example parsing (a built-in map function for Dataset.map, and one
// record at a time) and the TFRecord writer. python/strata/io.py gives them tf.io's names
// (FixedLenFeature, VarLenFeature, parse_example, TFRecordWriter).
#include <pybind11/stl.h>

#include "bindings.h"
#include "convert.h"
#include "data_map.h"
#include "strata/data/sources.h"
#include "strata/record/record_writer.h"

namespace strata::python {

namespace {

// One feature of a spec as io.py hands it over: (key, dtype name, var_len, shape, default
// values or None).
using SpecTuple = std::tuple<std::string, std::string, bool, std::vector<int64_t>, std::optional<py::list>>;

std::vector<record::FeatureSpec> SpecOf(const std::vector<SpecTuple>& features) {
  std::vector<record::FeatureSpec> spec;
  for (const auto& [key, dtype, var_len, shape, defaults] : features) {
    record::FeatureSpec f;
    f.key = key;
    f.var_len = var_len;
    f.shape = shape;
    if (dtype == "string") f.type = record::FeatureKind::kBytes;
    else if (dtype == "int64") f.type = record::FeatureKind::kInt64;
    else if (dtype == "float32") f.type = record::FeatureKind::kFloat;
    else ThrowTypeError("feature '" + key + "': dtype must be string, int64 or float32, got " + dtype);
    if (defaults) {
      f.has_default = true;
      try {
        for (py::handle v : *defaults) {
          if (f.type == record::FeatureKind::kBytes) f.default_bytes.push_back(v.cast<std::string>());
          else if (f.type == record::FeatureKind::kInt64) f.default_int64s.push_back(v.cast<int64_t>());
          else f.default_floats.push_back(v.cast<float>());
        }
      } catch (const py::cast_error&) {
        ThrowTypeError("feature '" + key + "': default_value does not hold " + dtype + " values");
      }
    }
    spec.push_back(std::move(f));
  }
  return spec;
}

BuiltinMap ParseExample(const std::vector<SpecTuple>& features) {
  std::vector<record::FeatureSpec> spec = SpecOf(features);
  BuiltinMap m;
  m.name = "parse_example";
  for (const auto& f : spec)
    if (f.type == record::FeatureKind::kBytes) m.string_keys.push_back(f.key);
  data::MapFn parse = Unwrap(data::ParseExampleFn(std::move(spec)));
  m.fn = [parse](data::Element e, data::Rng&) { return parse(std::move(e)); };
  return m;
}

// One serialized Example -> (arrays in spec order, keys).
py::tuple ParseSingleExample(py::bytes serialized, const std::vector<SpecTuple>& features) {
  BuiltinMap m = ParseExample(features);
  data::Element in({data::StringTensor(std::string_view(serialized))});
  data::Rng rng;
  data::Element out = Unwrap(m.fn(std::move(in), rng));
  py::list arrays;
  for (const Tensor& t : out.tensors) arrays.append(ArrayFromTensor(t));
  return py::make_tuple(arrays, out.names);
}

class PyRecordWriter {
 public:
  PyRecordWriter(const std::string& path, const std::string& compression, int level) {
    record::RecordWriterOptions o;
    if (compression.empty() || compression == "NONE") o.compression = record::Compression::kNone;
    else if (compression == "GZIP") o.compression = record::Compression::kGzip;
    else if (compression == "ZLIB") o.compression = record::Compression::kZlib;
    else ThrowValueError("TFRecordWriter: compression_type must be '', 'GZIP' or 'ZLIB', got '" + compression + "'");
    o.compression_level = level;
    writer_ = Unwrap(record::RecordWriter::Open(path, o));
  }
  void Write(py::bytes record) {
    Live();
    std::string_view bytes(record);
    Status s;
    {
      py::gil_scoped_release nogil;
      s = writer_->WriteRecord(bytes);
    }
    Check(s);
  }
  void Flush() {
    Live();
    Check(writer_->Flush());
  }
  void Close() {
    if (!writer_) return;  // closing twice is fine, as in TensorFlow
    Status s;
    {
      py::gil_scoped_release nogil;
      s = writer_->Close();
    }
    writer_.reset();
    Check(s);
  }
  int64_t records() const { return writer_ ? writer_->records_written() : -1; }

 private:
  void Live() const {
    if (!writer_) ThrowValueError("TFRecordWriter: the writer is closed");
  }
  std::unique_ptr<record::RecordWriter> writer_;
};

}  // namespace

void RegisterIo(py::module_& parent) {
  py::module_ m = parent.def_submodule("io", "The C++ side of strata.io (see python/strata/io.py).");
  m.def("parse_example", &ParseExample, py::arg("features"),
        "A built-in map function: serialized tf.train.Example -> dict of arrays (runs in C++).");
  m.def("parse_single_example", &ParseSingleExample, py::arg("serialized"), py::arg("features"));
  py::class_<PyRecordWriter>(m, "TFRecordWriter")
      .def(py::init<const std::string&, const std::string&, int>(), py::arg("path"), py::arg("compression_type"),
           py::arg("compression_level"))
      .def("write", &PyRecordWriter::Write, py::arg("record"))
      .def("flush", &PyRecordWriter::Flush)
      .def("close", &PyRecordWriter::Close);
}

}  // namespace strata::python
