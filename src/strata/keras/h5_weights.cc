// Keras weight files through libhdf5's C API. Reading is three passes: the file's structure
// (layers, weight names, shapes, dtypes), the pairing with the model and every check, then
// every value into a staging copy of the model's state; only then does the model change.
#include "strata/keras/h5_weights.h"

#include <fcntl.h>
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
#include "strata/keras/h5_file.h"

namespace strata::keras {

namespace {

using namespace h5;  // NOLINT: h5_file.h

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

// The layer a weight belongs to, by its name: "stem_conv" for "stem_conv/kernel:0" and for
// "convnext_tiny_stem/stem_conv/kernel:0"; "" for a bare "kernel:0".
std::string SublayerOf(const std::string& weight) {
  const size_t last = weight.rfind('/');
  if (last == std::string::npos) return "";
  const size_t before = weight.rfind('/', last - 1);
  return weight.substr(before == std::string::npos ? 0 : before + 1, last - (before == std::string::npos ? 0 : before + 1));
}

// A nested model's group (Keras's ConvNeXt wraps its stem and each downsampling pair in a
// Sequential: group "convnext_tiny_stem" holds convnext_tiny_stem_conv/kernel:0, ...,
// convnext_tiny_stem_layernorm/beta:0) becomes one file layer per inner layer, in order, named
// by its weights, as Strata's models hold those layers directly. A group whose weights name two
// or more layers, none of them the group itself, is nested; any other group stays as it is, and
// so does a group the model has a layer of that name for (a MultiHeadAttention's weights name
// its EinsumDense parts: mha/query/kernel:0, mha/key/kernel:0, ...).
std::vector<FileLayer> SplitNested(FileLayer fl, const std::set<std::string>& model_layers) {
  if (model_layers.count(fl.name)) return {std::move(fl)};
  std::vector<std::string> order;
  for (const FileWeight& w : fl.weights) {
    const std::string s = SublayerOf(w.name);
    if (s.empty() || s == fl.name) return {std::move(fl)};
    if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
  }
  if (order.size() < 2) return {std::move(fl)};
  std::vector<FileLayer> parts(order.size());
  for (size_t i = 0; i < order.size(); ++i) parts[i].name = order[i];
  for (FileWeight& w : fl.weights) {
    const size_t i = static_cast<size_t>(std::find(order.begin(), order.end(), SublayerOf(w.name)) - order.begin());
    parts[i].weights.push_back(std::move(w));
  }
  return parts;
}

Status ParseLegacy(hid_t file, const std::string& root, const std::string& path,
                   const std::set<std::string>& model_layers, ParsedFile* out) {
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
    for (FileLayer& part : SplitNested(std::move(fl), model_layers)) {
      out->by_name[part.name] = out->layers.size();
      out->layers.push_back(std::move(part));
    }
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

// Strata keeps a depthwise kernel as [k, k, 1, C * M] (a grouped convolution), Keras as
// [k, k, C, M]: the same values in the same order, so either shape loads.
bool ShapesMatch(const Shape& model, const Shape& file, const std::string& var) {
  if (model == file) return true;
  if (ShortName(var) == "depthwise_kernel" && model.rank() == 4 && file.rank() == 4)
    return model[0] == file[0] && model[1] == file[1] && model[2] == 1 && model[3] == file[2] * file[3];
  return false;
}

// A variable's name within its layer: "kernel", "query/kernel", "position_embedding/embeddings".
std::string WeightOf(const ModelLayer& m, const backend::VariableStore::Entry& e) {
  return e.name.substr(m.name.size() + 1);
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
    if (!ShapesMatch(e->shape, w.shape, e->name) &&
        !m.layer->ResampleWeight(WeightOf(m, *e), w.shape, {}, e->shape, nullptr))
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
  std::vector<ModelLayer> model_layers = ModelLayers(model);
  std::set<std::string> layer_names;
  for (const auto& m : model_layers) layer_names.insert(m.name);
  ParsedFile parsed;
  bool legacy_names = false;
  {
    Handle root = Group(H5Gopen2(file.get(), "/", H5P_DEFAULT));
    bool present = false;
    STRATA_ASSIGN_OR_RETURN(auto names, ReadStringList(root.get(), "layer_names", path, &present));
    legacy_names = present;
  }
  if (legacy_names) {
    STRATA_RETURN_IF_ERROR(ParseLegacy(file.get(), "/", path, layer_names, &parsed));
  } else if (IsGroup(file.get(), "model_weights")) {
    STRATA_RETURN_IF_ERROR(ParseLegacy(file.get(), "model_weights", path, layer_names, &parsed));
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
    std::set<std::string> taken;
    for (const ModelLayer* m : weighted) taken.insert(m->name);
    for (const auto& f : parsed.layers)
      if (!f.weights.empty() && !taken.count(f.name)) report.unused.push_back(f.name);
    if (!report.absent.empty() || !report.unused.empty()) {
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
        return v.empty() ? std::string("none") : s;
      };
      STRATA_LOG(kWarn) << path << ": a partial load by name: model layers not in the file (left as they were): "
                        << join(report.absent) << "; file layers no model layer took: " << join(report.unused);
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
      const FileWeight& w = p.file->weights[i];
      const std::string where = path + ": layer " + p.model->name;
      if (ShapesMatch(e->shape, w.shape, e->name)) {
        STRATA_RETURN_IF_ERROR(ReadValues(file.get(), w, state.data() + e->offset, e->size, where));
        continue;
      }
      // The layer resamples the file's value to the model's shape (Mismatch asked it already).
      std::vector<float> in(static_cast<size_t>(w.shape.num_elements())), out;
      STRATA_RETURN_IF_ERROR(ReadValues(file.get(), w, in.data(), w.shape.num_elements(), where));
      if (!p.model->layer->ResampleWeight(WeightOf(*p.model, *e), w.shape, in, e->shape, &out) ||
          static_cast<int64_t>(out.size()) != e->size)
        return Internal(where + ": resampling " + w.name + " to " + KerasShapeText(e->shape) + " failed");
      std::copy(out.begin(), out.end(), state.begin() + e->offset);
    }
    report.loaded.push_back(p.model->name);
  }
  STRATA_RETURN_IF_ERROR(model.set_state(state));
  return report;
}

}  // namespace strata::keras
