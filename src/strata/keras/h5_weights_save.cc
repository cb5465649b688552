// Keras weight files out: the legacy layout Keras's save_weights writes and load_weights reads
// back (HDF5 through libhdf5's C API, h5_file.h), written atomically.
#include "strata/keras/h5_weights.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "strata/core/file.h"
#include "strata/core/version.h"
#include "strata/keras/h5_file.h"

namespace strata::keras {

namespace {

using namespace h5;  // NOLINT: h5_file.h

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
    // A name with slashes ("conv1/conv", "vit_encoder/ln") nests, as h5py's create_group does;
    // a group made on the way for a longer name is opened.
    Handle g = Group(H5Lexists(file.get(), m->name.c_str(), H5P_DEFAULT) > 0
                         ? H5Gopen2(file.get(), m->name.c_str(), H5P_DEFAULT)
                         : H5Gcreate2(file.get(), m->name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT));
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
