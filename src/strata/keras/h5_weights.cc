// Keras weight files through libhdf5's C API. Reading is three passes: the file's structure
// (layers, weight names, shapes, dtypes), the pairing with the model and every check, then
// every value into a staging copy of the model's state; only then does the model change.
#include "strata/keras/h5_weights.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "strata/core/log.h"
#include "strata/core/version.h"

namespace strata::keras {

namespace {

// libhdf5 (Debian's serial build) is not thread-safe: every use goes through this lock, which
// also turns off the library's own error printing for the duration (errors become Status).
std::mutex& Hdf5Mutex() {
  static std::mutex mu;
  return mu;
}

class Hdf5Scope {
 public:
  Hdf5Scope() : lock_(Hdf5Mutex()) {
    H5Eget_auto2(H5E_DEFAULT, &old_fn_, &old_data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~Hdf5Scope() { H5Eset_auto2(H5E_DEFAULT, old_fn_, old_data_); }

 private:
  std::lock_guard<std::mutex> lock_;
  H5E_auto2_t old_fn_ = nullptr;
  void* old_data_ = nullptr;
};

// The innermost message of libhdf5's error stack ("truncated file: eof = ..."), or "".
std::string Hdf5Message() {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD,
           [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
             auto* s = static_cast<std::string*>(out);
             if (n == 0 && e->desc) *s = e->desc;
             return 0;
           },
           &msg);
  H5Eclear2(H5E_DEFAULT);
  return msg;
}

// One libhdf5 handle, closed with its kind's close function.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  ~Handle() { Reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  void Reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t Release() {
    hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

Handle File(hid_t id) { return Handle(id, H5Fclose); }
Handle Group(hid_t id) { return Handle(id, H5Gclose); }
Handle Dataset(hid_t id) { return Handle(id, H5Dclose); }
Handle Attribute(hid_t id) { return Handle(id, H5Aclose); }
Handle Space(hid_t id) { return Handle(id, H5Sclose); }
Handle Type(hid_t id) { return Handle(id, H5Tclose); }
Handle Plist(hid_t id) { return Handle(id, H5Pclose); }

bool LinkExists(hid_t loc, const std::string& path) {
  // H5Lexists needs every intermediate link to exist: walk the path one name at a time.
  std::string prefix;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    prefix += (prefix.empty() ? "" : "/") + path.substr(start, slash - start);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (H5Oexists_by_name(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    start = slash + 1;
  }
  return true;
}

bool IsGroup(hid_t loc, const std::string& path) {
  if (!LinkExists(loc, path)) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(loc, path.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_GROUP;
}

// A list-of-strings attribute as h5py writes numpy string arrays: fixed-length strings (or
// variable-length ones), an empty list as an empty float array; Keras splits a long list into
// name0, name1, ... (HDF5's 64 KiB attribute header limit).
Result<std::vector<std::string>> ReadStringList(hid_t obj, const std::string& name, const std::string& where,
                                                bool* present) {
  std::vector<std::string> out;
  *present = false;
  std::vector<std::string> names;
  if (H5Aexists(obj, name.c_str()) > 0) {
    names.push_back(name);
  } else {
    for (int i = 0;; ++i) {
      std::string chunk = name + std::to_string(i);
      if (H5Aexists(obj, chunk.c_str()) <= 0) break;
      names.push_back(chunk);
    }
  }
  if (names.empty()) return out;
  *present = true;
  for (const std::string& n : names) {
    Handle attr = Attribute(H5Aopen(obj, n.c_str(), H5P_DEFAULT));
    if (!attr.ok()) return Corruption(where + ": cannot open attribute " + n + ": " + Hdf5Message());
    Handle type = Type(H5Aget_type(attr.get()));
    Handle space = Space(H5Aget_space(attr.get()));
    const hssize_t count = H5Sget_simple_extent_npoints(space.get());
    if (count < 0) return Corruption(where + ": attribute " + n + " has no readable extent");
    if (count == 0) continue;
    if (H5Tget_class(type.get()) != H5T_STRING)
      return InvalidArgument(where + ": attribute " + n + " should hold strings (Keras writes byte strings)");
    if (H5Tis_variable_str(type.get()) > 0) {
      std::vector<char*> ptrs(static_cast<size_t>(count), nullptr);
      Handle mem = Type(H5Tcopy(H5T_C_S1));
      H5Tset_size(mem.get(), H5T_VARIABLE);
      if (H5Aread(attr.get(), mem.get(), ptrs.data()) < 0)
        return Corruption(where + ": cannot read attribute " + n + ": " + Hdf5Message());
      for (char* p : ptrs) out.push_back(p ? p : "");
      H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
    } else {
      const size_t size = H5Tget_size(type.get());
      std::vector<char> buf(size * static_cast<size_t>(count) + 1, '\0');
      if (H5Aread(attr.get(), type.get(), buf.data()) < 0)
        return Corruption(where + ": cannot read attribute " + n + ": " + Hdf5Message());
      for (hssize_t i = 0; i < count; ++i) {
        const char* s = buf.data() + static_cast<size_t>(i) * size;
        out.emplace_back(s, strnlen(s, size));
      }
    }
  }
  return out;
}

// One weight in the file: where it is, its shape and element type.
struct FileWeight {
  std::string name;  // as the file names it ("conv1/kernel:0", "0")
  std::string path;  // dataset path from the file's root
  Shape shape;
  H5T_class_t type_class = H5T_NO_CLASS;
  size_t type_size = 0;
};

struct FileLayer {
  std::string name;  // legacy: the layer name; Keras 3: "layers/conv2d_1"
  std::vector<FileWeight> weights;
};

Status DescribeDataset(hid_t file, FileWeight* w, const std::string& where) {
  Handle ds = Dataset(H5Dopen2(file, w->path.c_str(), H5P_DEFAULT));
  if (!ds.ok()) return Corruption(where + ": weight " + w->name + " is not a readable dataset: " + Hdf5Message());
  Handle space = Space(H5Dget_space(ds.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return Corruption(where + ": weight " + w->name + " has no readable shape");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  w->shape = Shape(std::vector<int64_t>(dims.begin(), dims.end()));
  Handle type = Type(H5Dget_type(ds.get()));
  w->type_class = H5Tget_class(type.get());
  w->type_size = H5Tget_size(type.get());
  return Status::OK();
}

std::string TypeName(H5T_class_t c, size_t size) {
  switch (c) {
    case H5T_FLOAT: return "float" + std::to_string(size * 8);
    case H5T_INTEGER: return "int" + std::to_string(size * 8);
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_OPAQUE: return "opaque";
    default: return "HDF5 type class " + std::to_string(static_cast<int>(c));
  }
}

struct ParsedFile {
  KerasWeightsLayout layout = KerasWeightsLayout::kLegacyH5;
  std::vector<FileLayer> layers;          // legacy: layer_names order; Keras 3: every layers/* group
  std::map<std::string, size_t> by_name;  // layer name (legacy) or key (Keras 3) -> index
};

Status ParseLegacy(hid_t file, const std::string& root, const std::string& path, ParsedFile* out) {
  Handle g = Group(H5Gopen2(file, root.c_str(), H5P_DEFAULT));
  if (!g.ok()) return Corruption(path + ": cannot open group " + root + ": " + Hdf5Message());
  bool present = false;
  STRATA_ASSIGN_OR_RETURN(auto names, ReadStringList(g.get(), "layer_names", path, &present));
  const std::string prefix = root == "/" ? "" : root + "/";
  for (const std::string& layer : names) {
    const std::string where = path + ": layer " + layer;
    if (!IsGroup(file, prefix + layer))
      return Corruption(where + " is listed in layer_names but has no group");
    Handle lg = Group(H5Gopen2(file, (prefix + layer).c_str(), H5P_DEFAULT));
    if (!lg.ok()) return Corruption(where + ": cannot open its group: " + Hdf5Message());
    bool has = false;
    STRATA_ASSIGN_OR_RETURN(auto weight_names, ReadStringList(lg.get(), "weight_names", where, &has));
    FileLayer fl;
    fl.name = layer;
    for (const std::string& wn : weight_names) {
      FileWeight w;
      w.name = wn;
      w.path = prefix + layer + "/" + wn;
      if (!LinkExists(file, w.path)) return Corruption(where + ": weight " + wn + " is listed in weight_names but missing");
      STRATA_RETURN_IF_ERROR(DescribeDataset(file, &w, where));
      fl.weights.push_back(std::move(w));
    }
    out->by_name[layer] = out->layers.size();
    out->layers.push_back(std::move(fl));
  }
  return Status::OK();
}

// Keras 3: layers/<key>/vars/<i>; Keras 2.13's first version of the format called the
// container _layer_checkpoint_dependencies.
Status ParseKeras3(hid_t file, const std::string& container, const std::string& path, ParsedFile* out) {
  Handle g = Group(H5Gopen2(file, container.c_str(), H5P_DEFAULT));
  if (!g.ok()) return Corruption(path + ": cannot open group " + container + ": " + Hdf5Message());
  std::vector<std::string> keys;
  H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
             [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
               static_cast<std::vector<std::string>*>(data)->push_back(name);
               return 0;
             },
             &keys);
  for (const std::string& key : keys) {
    FileLayer fl;
    fl.name = "layers/" + key;
    const std::string vars = container + "/" + key + "/vars";
    if (IsGroup(file, vars)) {
      for (int i = 0;; ++i) {
        FileWeight w;
        w.name = std::to_string(i);
        w.path = vars + "/" + w.name;
        if (!LinkExists(file, w.path)) break;
        STRATA_RETURN_IF_ERROR(DescribeDataset(file, &w, path + ": " + fl.name));
        fl.weights.push_back(std::move(w));
      }
    }
    out->by_name[fl.name] = out->layers.size();
    out->layers.push_back(std::move(fl));
  }
  return Status::OK();
}

// Keras's naming.to_snake_case of a class name: "BatchNormalization" -> "batch_normalization",
// "Conv2D" -> "conv2d", "DepthwiseConv2D" -> "depthwise_conv2d".
std::string SnakeCase(const std::string& cls) {
  // (.)([A-Z][a-z]+) -> \1_\2
  std::string a;
  for (size_t i = 0; i < cls.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(cls[i])) && i + 1 < cls.size() &&
        std::islower(static_cast<unsigned char>(cls[i + 1])))
      a += '_';
    a += cls[i];
  }
  // ([a-z])([A-Z]) -> \1_\2, then lower case
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    if (i > 0 && std::islower(static_cast<unsigned char>(a[i - 1])) && std::isupper(static_cast<unsigned char>(a[i])))
      b += '_';
    b += static_cast<char>(std::tolower(static_cast<unsigned char>(a[i])));
  }
  return b;
}

// One model layer with weights, in Keras's terms.
struct ModelLayer {
  std::string name, class_name;
  LayerPtr layer;
  std::string keras3_key;  // "layers/conv2d_1"
  std::vector<const backend::VariableStore::Entry*> vars;  // Keras's order: trainable, then the rest
};

std::string ShortName(const std::string& var) { return var.substr(var.rfind('/') + 1); }

// Keras's weights of each layer: trainable first, then non-trainable, each in creation order
// (the variable store's order within a layer). Strata's BatchNormalization keeps gamma and
// beta as constants when scale / center is false; Keras has no such weights then.
std::vector<ModelLayer> ModelLayers(const Model& model) {
  const backend::VariableStore* store = model.variables();
  std::map<std::string, std::vector<const backend::VariableStore::Entry*>> by_layer;
  for (const auto& e : store->entries()) {
    const size_t slash = e.name.rfind('/');
    if (slash == std::string::npos) continue;
    by_layer[e.name.substr(0, slash)].push_back(&e);
  }
  std::vector<ModelLayer> out;
  std::map<std::string, int> class_count;
  for (const LayerPtr& layer : model.layers()) {
    const std::string snake = SnakeCase(layer->class_name());
    const int n = class_count[snake]++;
    ModelLayer ml;
    ml.name = layer->name();
    ml.class_name = layer->class_name();
    ml.layer = layer;
    ml.keras3_key = "layers/" + snake + (n == 0 ? "" : "_" + std::to_string(n));
    const auto& vars = by_layer[layer->name()];
    // A gamma / beta that is state, not a parameter, is scale / center = false (Keras has no
    // such weight); a frozen layer's gamma / beta stay parameters and are kept, as Keras does.
    for (const auto* e : vars) {
      const std::string s = ShortName(e->name);
      if (ml.class_name == "BatchNormalization" && e->role != graph::VariableRole::kParameter && (s == "gamma" || s == "beta"))
        continue;
      ml.vars.push_back(e);
    }
    out.push_back(std::move(ml));
  }
  return out;
}

// Strata keeps a depthwise kernel as [k, k, 1, C * M] (a grouped convolution), Keras as
// [k, k, C, M]: the same values in the same order, so either shape loads.
bool ShapesMatch(const Shape& model, const Shape& file, const std::string& var) {
  if (model == file) return true;
  if (ShortName(var) == "depthwise_kernel" && model.rank() == 4 && file.rank() == 4)
    return model[0] == file[0] && model[1] == file[1] && model[2] == 1 && model[3] == file[2] * file[3];
  return false;
}

std::string KerasShapeText(const Shape& s) {
  std::string r = "(";
  for (int i = 0; i < s.rank(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.rank() == 1 ? ",)" : ")");
}

struct Pairing {
  const ModelLayer* model;
  const FileLayer* file;
};

// Checks one model layer against one file layer: count, shapes, dtypes. "" when they match.
std::string Mismatch(const ModelLayer& m, const FileLayer& f, const std::string& path) {
  const std::string label = "layer " + m.name + " (" + m.class_name + ")";
  if (m.vars.size() != f.weights.size())
    return path + ": " + label + " has " + std::to_string(m.vars.size()) + " weights, the file's " + f.name + " has " +
           std::to_string(f.weights.size());
  for (size_t i = 0; i < m.vars.size(); ++i) {
    const auto* e = m.vars[i];
    const FileWeight& w = f.weights[i];
    if (!ShapesMatch(e->shape, w.shape, e->name))
      return path + ": " + label + ", weight " + ShortName(e->name) + " (file: " + w.name + "): the model expects shape " +
             KerasShapeText(e->shape) + ", the file holds " + KerasShapeText(w.shape);
  }
  return "";
}

Status CheckDtype(const ModelLayer& m, const backend::VariableStore::Entry& e, const FileWeight& w, const std::string& path) {
  // Floats of any width convert to f32; integers only into state Keras itself keeps as an
  // integer (Normalization's count); nothing else is a number.
  if (w.type_class == H5T_FLOAT) return Status::OK();
  if (w.type_class == H5T_INTEGER && !e.trainable) return Status::OK();
  return InvalidArgument(path + ": layer " + m.name + " (" + m.class_name + "), weight " + ShortName(e.name) +
                         " (file: " + w.name + "): dtype " + TypeName(w.type_class, w.type_size) +
                         ", expected a float dataset");
}

Status ReadValues(hid_t file, const FileWeight& w, float* out, int64_t n, const std::string& where) {
  Handle ds = Dataset(H5Dopen2(file, w.path.c_str(), H5P_DEFAULT));
  if (!ds.ok()) return Corruption(where + ": cannot open " + w.path + ": " + Hdf5Message());
  if (w.shape.num_elements() != n) return Internal(where + ": element count changed while reading " + w.path);
  if (n == 0) return Status::OK();
  if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
    std::string why = Hdf5Message();
    return Truncated(where + ": cannot read the values of " + w.path + " (a truncated or damaged file?): " + why);
  }
  return Status::OK();
}

// Opens a file for reading with a message that names it.
Result<Handle> OpenForRead(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) return ErrnoError("Keras weights: cannot open", path, errno);
  if (!IsHdf5File(path))
    return InvalidArgument(path + ": not an HDF5 file (no HDF5 signature); Keras weight files are .h5 / .weights.h5");
  Handle f = File(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.ok()) return Truncated(path + ": not a readable HDF5 file (truncated or damaged?): " + Hdf5Message());
  return f;
}

}  // namespace

bool IsHdf5File(const std::string& path) {
  static const unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  bool found = false;
  for (long offset = 0; !found && offset <= (1L << 30); offset = offset == 0 ? 512 : offset * 2) {
    unsigned char buf[8];
    if (std::fseek(f, offset, SEEK_SET) != 0 || std::fread(buf, 1, 8, f) != 8) break;
    found = std::memcmp(buf, kSignature, 8) == 0;
  }
  std::fclose(f);
  return found;
}

Result<KerasWeightsReport> LoadKerasWeights(Model& model, const std::string& path, KerasWeightsOptions o) {
  if (!model.variables()) return InvalidArgument("LoadKerasWeights: compile model " + model.name() + " first");
  Hdf5Scope scope;
  STRATA_ASSIGN_OR_RETURN(Handle file, OpenForRead(path));

  // 1. The file's structure.
  ParsedFile parsed;
  bool legacy_names = false;
  {
    Handle root = Group(H5Gopen2(file.get(), "/", H5P_DEFAULT));
    bool present = false;
    STRATA_ASSIGN_OR_RETURN(auto names, ReadStringList(root.get(), "layer_names", path, &present));
    legacy_names = present;
  }
  if (legacy_names) {
    STRATA_RETURN_IF_ERROR(ParseLegacy(file.get(), "/", path, &parsed));
  } else if (IsGroup(file.get(), "model_weights")) {
    STRATA_RETURN_IF_ERROR(ParseLegacy(file.get(), "model_weights", path, &parsed));
  } else if (IsGroup(file.get(), "layers") || IsGroup(file.get(), "_layer_checkpoint_dependencies")) {
    parsed.layout = KerasWeightsLayout::kKeras3;
    STRATA_RETURN_IF_ERROR(ParseKeras3(file.get(), IsGroup(file.get(), "layers") ? "layers" : "_layer_checkpoint_dependencies",
                                       path, &parsed));
  } else {
    return InvalidArgument(path + ": an HDF5 file but not Keras weights (no layer_names attribute, model_weights group "
                           "or layers group)");
  }
  const bool keras3 = parsed.layout == KerasWeightsLayout::kKeras3;
  if (keras3 && o.by_name)
    return InvalidArgument(path + ": by_name applies to legacy .h5 files; a Keras 3 .weights.h5 file names its layers "
                           "by class and position (layers/conv2d_1), as Keras 3 says too");
  if (!keras3 && o.skip_mismatch && !o.by_name)
    return InvalidArgument(path + ": skip_mismatch needs by_name for a legacy .h5 file (as in Keras)");

  // 2. Pair model layers with file layers and check everything.
  std::vector<ModelLayer> model_layers = ModelLayers(model);
  std::vector<const ModelLayer*> weighted;
  for (const auto& m : model_layers)
    if (!m.vars.empty()) weighted.push_back(&m);
  KerasWeightsReport report;
  report.layout = parsed.layout;
  std::vector<Pairing> pairs;
  auto mismatch = [&](const std::string& message, const ModelLayer& m) -> Status {
    if (!o.skip_mismatch) return InvalidArgument(message);
    STRATA_LOG(kWarn) << "skipping " << m.name << ": " << message;
    report.skipped.push_back(m.name + ": " + message);
    return Status::OK();
  };
  // Pairs a model layer with its file layer when their weights match, else skips or fails.
  auto pair = [&](const ModelLayer& m, const FileLayer& f) -> Status {
    const std::string why = Mismatch(m, f, path);
    if (!why.empty()) return mismatch(why, m);
    pairs.push_back({&m, &f});
    return Status::OK();
  };
  if (keras3) {
    for (const ModelLayer* m : weighted) {
      auto it = parsed.by_name.find(m->keras3_key);
      if (it == parsed.by_name.end()) {
        STRATA_RETURN_IF_ERROR(mismatch(path + ": layer " + m->name + " (" + m->class_name + ") is missing: no " +
                                            m->keras3_key + "/vars in the file", *m));
        continue;
      }
      STRATA_RETURN_IF_ERROR(pair(*m, parsed.layers[it->second]));
    }
  } else if (o.by_name) {
    for (const ModelLayer* m : weighted) {
      auto it = parsed.by_name.find(m->name);
      if (it == parsed.by_name.end() || parsed.layers[it->second].weights.empty()) {
        report.absent.push_back(m->name);
        continue;
      }
      STRATA_RETURN_IF_ERROR(pair(*m, parsed.layers[it->second]));
    }
  } else {
    std::vector<const FileLayer*> file_weighted;
    for (const auto& f : parsed.layers)
      if (!f.weights.empty()) file_weighted.push_back(&f);
    std::set<std::string> model_names, file_names;
    for (const auto* m : weighted) model_names.insert(m->name);
    for (const auto* f : file_weighted) file_names.insert(f->name);
    if (model_names == file_names) {
      for (const auto* m : weighted) pairs.push_back({m, &parsed.layers[parsed.by_name[m->name]]});
    } else {
      if (weighted.size() != file_weighted.size()) {
        std::string only_model, only_file;
        for (const auto& n : model_names)
          if (!file_names.count(n)) only_model += (only_model.empty() ? "" : ", ") + n;
        for (const auto& n : file_names)
          if (!model_names.count(n)) only_file += (only_file.empty() ? "" : ", ") + n;
        return InvalidArgument(path + ": layer count mismatch: the model has " + std::to_string(weighted.size()) +
                               " layers with weights, the file " + std::to_string(file_weighted.size()) +
                               (only_model.empty() ? "" : "; missing from the file: " + only_model) +
                               (only_file.empty() ? "" : "; only in the file: " + only_file) +
                               " (by_name = true loads the layers both have)");
      }
      for (size_t i = 0; i < weighted.size(); ++i) pairs.push_back({weighted[i], file_weighted[i]});
    }
    for (const Pairing& p : pairs) {
      std::string why = Mismatch(*p.model, *p.file, path);
      if (!why.empty()) return InvalidArgument(why);
    }
  }
  for (const Pairing& p : pairs)
    for (size_t i = 0; i < p.model->vars.size(); ++i)
      STRATA_RETURN_IF_ERROR(CheckDtype(*p.model, *p.model->vars[i], p.file->weights[i], path));

  // 3. Every value into a copy of the model's state, then the state at once.
  STRATA_ASSIGN_OR_RETURN(std::vector<float> state, model.get_state());
  for (const Pairing& p : pairs) {
    for (size_t i = 0; i < p.model->vars.size(); ++i) {
      const auto* e = p.model->vars[i];
      STRATA_RETURN_IF_ERROR(ReadValues(file.get(), p.file->weights[i], state.data() + e->offset, e->size,
                                        path + ": layer " + p.model->name));
    }
    report.loaded.push_back(p.model->name);
  }
  STRATA_RETURN_IF_ERROR(model.set_state(state));
  return report;
}

namespace {

// Keras's save_attributes_to_hdf5_group: a numpy array of fixed-length byte strings, split
// into name0, name1, ... while a piece exceeds 64512 bytes; an empty list is an empty float64
// array (what h5py makes of np.asarray([])).
Status WriteStringList(hid_t obj, const std::string& name, const std::vector<std::string>& values, const std::string& path) {
  constexpr size_t kHeaderLimit = 64512;
  if (values.empty()) {
    hsize_t zero = 0;
    Handle space = Space(H5Screate_simple(1, &zero, nullptr));
    Handle attr = Attribute(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
    if (!attr.ok()) return IOError(path + ": cannot write attribute " + name + ": " + Hdf5Message());
    return Status::OK();
  }
  size_t width = 1;
  for (const auto& v : values) width = std::max(width, v.size());
  size_t chunks = 1;
  auto piece = [&](size_t c, size_t k) {  // numpy.array_split: the first n % k pieces get one more
    const size_t n = values.size(), base = n / k, extra = n % k;
    const size_t begin = c * base + std::min(c, extra);
    return std::pair<size_t, size_t>(begin, begin + base + (c < extra ? 1 : 0));
  };
  auto fits = [&](size_t k) {
    for (size_t c = 0; c < k; ++c) {
      auto [b, e] = piece(c, k);
      if ((e - b) * width > kHeaderLimit) return false;
    }
    return true;
  };
  if (width > kHeaderLimit) return InvalidArgument(path + ": a name in " + name + " is longer than 64512 bytes");
  while (!fits(chunks)) ++chunks;
  Handle type = Type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), width);
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  for (size_t c = 0; c < chunks; ++c) {
    auto [b, e] = piece(c, chunks);
    std::vector<char> buf((e - b) * width, '\0');
    for (size_t i = b; i < e; ++i) std::memcpy(buf.data() + (i - b) * width, values[i].data(), values[i].size());
    hsize_t n = e - b;
    Handle space = Space(H5Screate_simple(1, &n, nullptr));
    const std::string attr_name = chunks == 1 ? name : name + std::to_string(c);
    Handle attr = Attribute(H5Acreate2(obj, attr_name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    if (!attr.ok() || H5Awrite(attr.get(), type.get(), buf.data()) < 0)
      return IOError(path + ": cannot write attribute " + attr_name + ": " + Hdf5Message());
  }
  return Status::OK();
}

Status WriteStringScalar(hid_t obj, const char* name, const std::string& value, const std::string& path) {
  Handle type = Type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  Handle space = Space(H5Screate(H5S_SCALAR));
  Handle attr = Attribute(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  std::string buf = value.empty() ? std::string(1, '\0') : value;
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), buf.data()) < 0)
    return IOError(path + ": cannot write attribute " + name + ": " + Hdf5Message());
  return Status::OK();
}

Status FsyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return ErrnoError("Keras weights: cannot open for fsync", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError("Keras weights: fsync", path, err);
  return Status::OK();
}

Status WriteLegacy(const Model& model, const std::string& tmp, const std::string& path) {
  Handle file = File(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file.ok()) return IOError(path + ": cannot create " + tmp + ": " + Hdf5Message());
  Handle root = Group(H5Gopen2(file.get(), "/", H5P_DEFAULT));
  std::vector<ModelLayer> layers = ModelLayers(model);
  std::vector<std::string> names;
  for (const auto& m : layers) names.push_back(m.name);
  STRATA_RETURN_IF_ERROR(WriteStringList(root.get(), "layer_names", names, path));
  // The values are in TensorFlow's layout (NHWC activations, HWIO kernels), which is what
  // Keras's "backend" attribute says to a reader.
  STRATA_RETURN_IF_ERROR(WriteStringScalar(root.get(), "backend", "tensorflow", path));
  STRATA_RETURN_IF_ERROR(WriteStringScalar(root.get(), "keras_version", "2.15.0", path));
  STRATA_RETURN_IF_ERROR(WriteStringScalar(root.get(), "strata_version", STRATA_VERSION, path));
  Handle lcpl = Plist(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  STRATA_ASSIGN_OR_RETURN(const std::vector<float> state, model.get_state());  // parameters first
  // Sorted by name as Keras 3 writes them (no group name is a prefix of a later one).
  std::vector<const ModelLayer*> sorted;
  for (const auto& m : layers) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(), [](const ModelLayer* a, const ModelLayer* b) { return a->name < b->name; });
  for (const ModelLayer* m : sorted) {
    Handle g = Group(H5Gcreate2(file.get(), m->name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!g.ok()) return IOError(path + ": cannot create group " + m->name + ": " + Hdf5Message());
    std::vector<std::string> weight_names;
    for (const auto* e : m->vars) weight_names.push_back(e->name + ":0");
    STRATA_RETURN_IF_ERROR(WriteStringList(g.get(), "weight_names", weight_names, path));
    for (size_t i = 0; i < m->vars.size(); ++i) {
      const auto* e = m->vars[i];
      std::vector<hsize_t> dims(e->shape.dims().begin(), e->shape.dims().end());
      // Keras's shape where it differs from Strata's (a depthwise kernel: [k, k, C, M]).
      const Shape keras_shape = m->layer->KerasWeightShape(ShortName(e->name), e->shape);
      dims.assign(keras_shape.dims().begin(), keras_shape.dims().end());
      Handle space = Space(dims.empty() ? H5Screate(H5S_SCALAR)
                                        : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
      // Keras keeps Normalization's count as an int64 variable.
      const bool integer = m->class_name == "Normalization" && ShortName(e->name) == "count";
      Handle ds = Dataset(H5Dcreate2(g.get(), weight_names[i].c_str(), integer ? H5T_STD_I64LE : H5T_IEEE_F32LE,
                                     space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT));
      if (!ds.ok()) return IOError(path + ": cannot create dataset " + m->name + "/" + weight_names[i] + ": " + Hdf5Message());
      const float* values = state.data() + e->offset;
      herr_t rc;
      if (integer) {
        std::vector<int64_t> ints(static_cast<size_t>(e->size));
        for (int64_t k = 0; k < e->size; ++k) ints[static_cast<size_t>(k)] = static_cast<int64_t>(values[k]);
        rc = H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ints.data());
      } else {
        rc = H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
      }
      if (rc < 0) return IOError(path + ": cannot write " + m->name + "/" + weight_names[i] + ": " + Hdf5Message());
    }
  }
  root.Reset();
  lcpl.Reset();
  if (H5Fclose(file.Release()) < 0) return IOError(path + ": cannot close " + tmp + ": " + Hdf5Message());
  return Status::OK();
}

}  // namespace

Status SaveKerasWeights(const Model& model, const std::string& path) {
  if (!model.variables()) return InvalidArgument("SaveKerasWeights: model " + model.name() + " is not compiled");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  Status st;
  {
    Hdf5Scope scope;
    st = WriteLegacy(model, tmp, path);
  }
  if (st.ok()) st = FsyncPath(tmp, O_RDONLY);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoError("Keras weights: rename onto", path, errno);
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return st;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  return FsyncPath(dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace strata::keras
