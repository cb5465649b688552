#include "strata/backend/reference/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "strata/backend/dropout_mask.h"
#include "strata/core/dtype.h"

namespace strata::backend::reference {

using namespace graph;  // NOLINT: this file is the op list

namespace {

using Vec = std::vector<double>;

double RoundBF16(double v) { return ToF32(ToBF16(static_cast<float>(v))); }

// Visits every (x index, w index, y index) multiply-add of a grouped, strided, dilated,
// padded 2-D convolution over NHWC input, HWIO kernel and NHWC output.
template <typename F>
void ForEachConvTap(const Shape& xs, const Shape& ks, const Shape& ys, const Conv2DOptions& o, F&& f) {
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  const int64_t KH = ks[0], KW = ks[1], CG = ks[2], O = ks[3];
  const int64_t OH = ys[1], OW = ys[2], OG = O / o.groups;
  const WindowDim wh = ComputeWindow(H, KH, o.stride_h, o.dilation_h, o.padding);
  const WindowDim ww = ComputeWindow(W, KW, o.stride_w, o.dilation_w, o.padding);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t oc = 0; oc < O; ++oc) {
          const int64_t g = oc / OG;
          const int64_t yi = ((n * OH + oh) * OW + ow) * O + oc;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * o.stride_h - wh.pad_before + kh * o.dilation_h;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * o.stride_w - ww.pad_before + kw * o.dilation_w;
              if (iw < 0 || iw >= W) continue;
              for (int64_t ci = 0; ci < CG; ++ci) {
                const int64_t xi = ((n * H + ih) * W + iw) * C + g * CG + ci;
                const int64_t wi = ((kh * KW + kw) * CG + ci) * O + oc;
                f(xi, wi, yi);
              }
            }
          }
        }
}

// Visits every (output index, input index) pair of a pooling window over NHWC data, with
// the count of valid (unpadded) taps of the window.
template <typename F>
void ForEachPoolWindow(const Shape& xs, const Shape& ys, const PoolOptions& o, F&& f) {
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3], OH = ys[1], OW = ys[2];
  const WindowDim wh = ComputeWindow(H, o.window_h, o.stride_h, 1, o.padding);
  const WindowDim ww = ComputeWindow(W, o.window_w, o.stride_w, 1, o.padding);
  std::vector<int64_t> taps;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          taps.clear();
          for (int64_t kh = 0; kh < o.window_h; ++kh) {
            const int64_t ih = oh * o.stride_h - wh.pad_before + kh;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < o.window_w; ++kw) {
              const int64_t iw = ow * o.stride_w - ww.pad_before + kw;
              if (iw < 0 || iw >= W) continue;
              taps.push_back(((n * H + ih) * W + iw) * C + c);
            }
          }
          f(((n * OH + oh) * OW + ow) * C + c, taps);
        }
}

double Act(Activation a, double x) {
  switch (a) {
    case Activation::kRelu: return x > 0 ? x : 0;
    case Activation::kRelu6: return std::min(std::max(x, 0.0), 6.0);
    case Activation::kGelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::kSwish: return x / (1 + std::exp(-x));
    case Activation::kSigmoid: return 1 / (1 + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kLinear: return x;
  }
  return x;
}

// d act / d x, given x or y as the forward op stored (autodiff.cc: ActivationGradUsesOutput).
double ActGrad(Activation a, double v) {
  switch (a) {
    case Activation::kRelu: return v > 0 ? 1 : 0;                 // v = y
    case Activation::kRelu6: return v > 0 && v < 6 ? 1 : 0;       // v = y
    case Activation::kSigmoid: return v * (1 - v);                // v = y
    case Activation::kTanh: return 1 - v * v;                     // v = y
    case Activation::kGelu: {                                     // v = x
      const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
      const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      return cdf + v * pdf;
    }
    case Activation::kSwish: {                                    // v = x
      const double s = 1 / (1 + std::exp(-v));
      return s + v * s * (1 - s);
    }
    case Activation::kLinear: return 1;
  }
  return 1;
}

// Splits a shape at `axes` into (outer-to-inner) strides so reductions can map a full index
// to its reduced index.
int64_t ReducedIndex(const Shape& s, const std::vector<int>& axes, int64_t linear) {
  int64_t r = 0, mul = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    const int64_t idx = linear % s[d];
    linear /= s[d];
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      r += idx * mul;
      mul *= s[d];
    }
  }
  return r;
}

}  // namespace

Evaluator::Evaluator(const Graph& g, std::vector<Value> fetches) : g_(g), schedule_(MakeSchedule(g, fetches)) {}

const std::vector<double>& Evaluator::value(Value v) const {
  static const std::vector<double> kEmpty;
  auto it = values_.find({v.node, v.output});
  return it == values_.end() ? kEmpty : it->second;
}

const std::vector<double>& Evaluator::in(const Value& v, std::map<int, std::vector<double>>& leaves) {
  const Node& n = g_.node(v.node);
  if (n.kind == OpKind::kInput || n.kind == OpKind::kVariable) return leaves[v.node];
  return values_[{v.node, v.output}];
}

Status Evaluator::Run(std::map<int, std::vector<double>>& leaves, uint64_t step) {
  for (int i = 0; i < g_.num_nodes(); ++i) {
    const Node& n = g_.node(i);
    if (!schedule_.live[i]) continue;
    if (n.kind == OpKind::kConstant) {
      out(i, 0).assign(n.out_shapes[0].num_elements(), n.attrs.scalar);
    } else if (n.kind == OpKind::kInput || n.kind == OpKind::kVariable) {
      auto it = leaves.find(i);
      if (it == leaves.end() || static_cast<int64_t>(it->second.size()) != n.out_shapes[0].num_elements())
        return InvalidArgument(OpLabel(n.name, n.kind) + "no value of " + n.out_shapes[0].ToString() + " was fed");
      values_[{i, 0}] = it->second;
    }
  }
  for (int i : schedule_.order) STRATA_RETURN_IF_ERROR(RunNode(i, leaves, step));
  return Status::OK();
}

Status Evaluator::RunNode(int i, std::map<int, std::vector<double>>& leaves, uint64_t step) {
  const Node& n = g_.node(i);
  const std::string label = OpLabel(n.name, n.kind);
  std::vector<const Vec*> x;
  for (const Value& v : n.inputs) x.push_back(&in(v, leaves));
  for (size_t k = 0; k < n.out_shapes.size(); ++k) out(i, static_cast<int>(k)).assign(n.out_shapes[k].num_elements(), 0.0);
  Vec* y = n.out_shapes.empty() ? nullptr : &out(i, 0);
  const Shape xs = n.inputs.empty() ? Shape{} : n.inputs[0].shape();
  switch (n.kind) {
    case OpKind::kConv2D:
      ForEachConvTap(xs, n.inputs[1].shape(), n.out_shapes[0], n.attrs.conv,
                     [&](int64_t xi, int64_t wi, int64_t yi) { (*y)[yi] += (*x[0])[xi] * (*x[1])[wi]; });
      break;
    case OpKind::kConv2DBackpropInput:  // inputs dy, kernel
      ForEachConvTap(n.out_shapes[0], n.inputs[1].shape(), n.inputs[0].shape(), n.attrs.conv,
                     [&](int64_t xi, int64_t wi, int64_t yi) { (*y)[xi] += (*x[0])[yi] * (*x[1])[wi]; });
      break;
    case OpKind::kConv2DBackpropFilter:  // inputs x, dy
      ForEachConvTap(xs, n.out_shapes[0], n.inputs[1].shape(), n.attrs.conv,
                     [&](int64_t xi, int64_t wi, int64_t yi) { (*y)[wi] += (*x[0])[xi] * (*x[1])[yi]; });
      break;
    case OpKind::kMatMul: {
      const Shape& as = n.inputs[0].shape();
      const Shape& bs = n.inputs[1].shape();
      const bool ta = n.attrs.transpose_a, tb = n.attrs.transpose_b;
      const int64_t M = n.out_shapes[0][0], Nn = n.out_shapes[0][1], K = ta ? as[0] : as[1];
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < Nn; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += (*x[0])[ta ? k * as[1] + m : m * as[1] + k] * (*x[1])[tb ? j * bs[1] + k : k * bs[1] + j];
          (*y)[m * Nn + j] = s;
        }
      break;
    }
    case OpKind::kBiasAdd: {
      const int64_t C = xs[-1];
      for (size_t e = 0; e < y->size(); ++e) (*y)[e] = (*x[0])[e] + (*x[1])[e % C];
      break;
    }
    case OpKind::kBiasAddGrad: {
      const int64_t C = n.out_shapes[0][0];
      for (size_t e = 0; e < x[0]->size(); ++e) (*y)[e % C] += (*x[0])[e];
      break;
    }
    case OpKind::kBatchNorm: {
      const int64_t C = xs[-1], M = xs.num_elements() / C;
      Vec& mean = out(i, 1);
      Vec& var = out(i, 2);
      y = &out(i, 0);
      for (int64_t e = 0; e < M * C; ++e) mean[e % C] += (*x[0])[e] / static_cast<double>(M);
      for (int64_t e = 0; e < M * C; ++e) {
        const double d = (*x[0])[e] - mean[e % C];
        var[e % C] += d * d / static_cast<double>(M);
      }
      for (int64_t e = 0; e < M * C; ++e) {
        const int64_t c = e % C;
        (*y)[e] = (*x[1])[c] * ((*x[0])[e] - mean[c]) / std::sqrt(var[c] + n.attrs.bn.epsilon) + (*x[2])[c];
      }
      // Moving statistics (variables, updated in place); the variance update is unbiased.
      Vec& mm = leaves[n.inputs[3].node];
      Vec& mv = leaves[n.inputs[4].node];
      const double mom = n.attrs.bn.momentum;
      const double unbias = M > 1 ? static_cast<double>(M) / static_cast<double>(M - 1) : 1.0;
      for (int64_t c = 0; c < C; ++c) {
        mm[c] = mm[c] * mom + mean[c] * (1 - mom);
        mv[c] = mv[c] * mom + var[c] * unbias * (1 - mom);
      }
      break;
    }
    case OpKind::kBatchNormInference: {
      const int64_t C = xs[-1];
      for (size_t e = 0; e < y->size(); ++e) {
        const int64_t c = static_cast<int64_t>(e) % C;
        (*y)[e] = (*x[1])[c] * ((*x[0])[e] - (*x[3])[c]) / std::sqrt((*x[4])[c] + n.attrs.bn.epsilon) + (*x[2])[c];
      }
      break;
    }
    case OpKind::kBatchNormGrad: {  // inputs x, gamma, mean, var, dy; outputs dx, dgamma, dbeta
      const int64_t C = xs[-1], M = xs.num_elements() / C;
      Vec& dx = out(i, 0);
      Vec& dg = out(i, 1);
      Vec& db = out(i, 2);
      Vec istd(C);
      for (int64_t c = 0; c < C; ++c) istd[c] = 1 / std::sqrt((*x[3])[c] + n.attrs.bn.epsilon);
      for (int64_t e = 0; e < M * C; ++e) {
        const int64_t c = e % C;
        const double xhat = ((*x[0])[e] - (*x[2])[c]) * istd[c];
        db[c] += (*x[4])[e];
        dg[c] += (*x[4])[e] * xhat;
      }
      for (int64_t e = 0; e < M * C; ++e) {
        const int64_t c = e % C;
        const double xhat = ((*x[0])[e] - (*x[2])[c]) * istd[c];
        dx[e] = (*x[1])[c] * istd[c] / static_cast<double>(M) *
                (static_cast<double>(M) * (*x[4])[e] - db[c] - xhat * dg[c]);
      }
      break;
    }
    case OpKind::kActivation:
      for (size_t e = 0; e < y->size(); ++e) (*y)[e] = Act(n.attrs.activation, (*x[0])[e]);
      break;
    case OpKind::kActivationGrad:
      for (size_t e = 0; e < y->size(); ++e) (*y)[e] = (*x[1])[e] * ActGrad(n.attrs.activation, (*x[0])[e]);
      break;
    case OpKind::kSoftmax: {
      const int64_t K = xs[-1], rows = xs.num_elements() / K;
      for (int64_t r = 0; r < rows; ++r) {
        double mx = -std::numeric_limits<double>::infinity(), s = 0;
        for (int64_t k = 0; k < K; ++k) mx = std::max(mx, (*x[0])[r * K + k]);
        for (int64_t k = 0; k < K; ++k) s += ((*y)[r * K + k] = std::exp((*x[0])[r * K + k] - mx));
        for (int64_t k = 0; k < K; ++k) (*y)[r * K + k] /= s;
      }
      break;
    }
    case OpKind::kSoftmaxGrad: {  // inputs y, dy
      const int64_t K = xs[-1], rows = xs.num_elements() / K;
      for (int64_t r = 0; r < rows; ++r) {
        double dot = 0;
        for (int64_t k = 0; k < K; ++k) dot += (*x[0])[r * K + k] * (*x[1])[r * K + k];
        for (int64_t k = 0; k < K; ++k) (*y)[r * K + k] = (*x[0])[r * K + k] * ((*x[1])[r * K + k] - dot);
      }
      break;
    }
    case OpKind::kMaxPool:
      ForEachPoolWindow(xs, n.out_shapes[0], n.attrs.pool, [&](int64_t yi, const std::vector<int64_t>& taps) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t t : taps) m = std::max(m, (*x[0])[t]);
        (*y)[yi] = m;
      });
      break;
    case OpKind::kMaxPoolGrad:  // inputs x, dy: the gradient goes to the first maximum
      ForEachPoolWindow(xs, n.inputs[1].shape(), n.attrs.pool, [&](int64_t yi, const std::vector<int64_t>& taps) {
        int64_t best = taps[0];
        for (int64_t t : taps)
          if ((*x[0])[t] > (*x[0])[best]) best = t;
        (*y)[best] += (*x[1])[yi];
      });
      break;
    case OpKind::kAvgPool:
      ForEachPoolWindow(xs, n.out_shapes[0], n.attrs.pool, [&](int64_t yi, const std::vector<int64_t>& taps) {
        double s = 0;
        for (int64_t t : taps) s += (*x[0])[t];
        (*y)[yi] = s / static_cast<double>(taps.size());
      });
      break;
    case OpKind::kAvgPoolGrad:  // input dy
      ForEachPoolWindow(n.out_shapes[0], xs, n.attrs.pool, [&](int64_t yi, const std::vector<int64_t>& taps) {
        for (int64_t t : taps) (*y)[t] += (*x[0])[yi] / static_cast<double>(taps.size());
      });
      break;
    case OpKind::kAdd: for (size_t e = 0; e < y->size(); ++e) (*y)[e] = (*x[0])[e] + (*x[1])[e]; break;
    case OpKind::kSub: for (size_t e = 0; e < y->size(); ++e) (*y)[e] = (*x[0])[e] - (*x[1])[e]; break;
    case OpKind::kMultiply: {
      const Shape& as = n.inputs[0].shape();
      const Shape& bs = n.inputs[1].shape();
      if (as == bs) {
        for (size_t e = 0; e < y->size(); ++e) (*y)[e] = (*x[0])[e] * (*x[1])[e];
        break;
      }
      // The second input broadcast along its size-1 dimensions (Graph::Multiply).
      for (int64_t e = 0; e < as.num_elements(); ++e) {
        int64_t rest = e, be = 0, bstride = 1;
        for (int d = as.rank() - 1; d >= 0; --d) {
          const int64_t i = rest % as[d];
          rest /= as[d];
          if (bs[d] != 1) be += i * bstride;
          bstride *= bs[d];
        }
        (*y)[e] = (*x[0])[e] * (*x[1])[be];
      }
      break;
    }
    case OpKind::kScale: for (size_t e = 0; e < y->size(); ++e) (*y)[e] = (*x[0])[e] * n.attrs.scalar; break;
    case OpKind::kReshape: case OpKind::kIdentity: *y = *x[0]; break;
    case OpKind::kCast: *y = *x[0]; break;
    case OpKind::kConcat: {
      const Shape& ys = n.out_shapes[0];
      const int axis = n.attrs.axis;
      int64_t inner = 1;
      for (int d = axis + 1; d < ys.rank(); ++d) inner *= ys[d];
      int64_t outer = ys.num_elements() / (ys[axis] * inner), offset = 0;
      for (size_t k = 0; k < x.size(); ++k) {
        const int64_t len = n.inputs[k].shape()[axis];
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t e = 0; e < len * inner; ++e) (*y)[(o * ys[axis] + offset) * inner + e] = (*x[k])[o * len * inner + e];
        offset += len;
      }
      break;
    }
    case OpKind::kSlice: {
      const int axis = n.attrs.axis;
      int64_t inner = 1;
      for (int d = axis + 1; d < xs.rank(); ++d) inner *= xs[d];
      const int64_t outer = xs.num_elements() / (xs[axis] * inner), len = n.attrs.end - n.attrs.begin;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t e = 0; e < len * inner; ++e)
          (*y)[o * len * inner + e] = (*x[0])[(o * xs[axis] + n.attrs.begin) * inner + e];
      break;
    }
    case OpKind::kDropout: {
      const double rate = n.attrs.scalar;
      Vec& mask = out(i, 1);
      y = &out(i, 0);
      for (size_t e = 0; e < y->size(); ++e) {
        mask[e] = DropoutUniform(n.attrs.seed, step, e) < rate ? 0.0 : 1.0 / (1.0 - rate);
        (*y)[e] = (*x[0])[e] * mask[e];
      }
      break;
    }
    case OpKind::kReduceSum: case OpKind::kReduceMean: {
      double count = 1;
      for (int a : n.attrs.axes) count *= static_cast<double>(xs[a]);
      for (int64_t e = 0; e < xs.num_elements(); ++e)
        (*y)[ReducedIndex(xs, n.attrs.axes, e)] += (*x[0])[e] / (n.kind == OpKind::kReduceMean ? count : 1.0);
      break;
    }
    case OpKind::kBroadcast: {
      const Shape& ys = n.out_shapes[0];
      for (int64_t e = 0; e < ys.num_elements(); ++e) (*y)[e] = (*x[0])[ReducedIndex(ys, n.attrs.axes, e)];
      break;
    }
    case OpKind::kSoftmaxCrossEntropy: {  // outputs loss, probabilities
      const int64_t N = xs[0], K = xs[1];
      const double eps = n.attrs.label_smoothing;
      Vec& p = out(i, 1);
      double loss = 0;
      for (int64_t r = 0; r < N; ++r) {
        const double lab = (*x[1])[r];
        if (!(lab >= 0 && lab < static_cast<double>(K)))
          return InvalidArgument(label + "label " + std::to_string(static_cast<int64_t>(lab)) + " of example " +
                                 std::to_string(r) + " is outside [0, " + std::to_string(K) + ")");
        double mx = -std::numeric_limits<double>::infinity(), s = 0;
        for (int64_t k = 0; k < K; ++k) mx = std::max(mx, (*x[0])[r * K + k]);
        for (int64_t k = 0; k < K; ++k) s += std::exp((*x[0])[r * K + k] - mx);
        const double lse = mx + std::log(s);
        for (int64_t k = 0; k < K; ++k) {
          p[r * K + k] = std::exp((*x[0])[r * K + k] - lse);
          const double q = (k == static_cast<int64_t>(lab) ? 1 - eps : 0) + eps / static_cast<double>(K);
          loss -= q * ((*x[0])[r * K + k] - lse);
        }
      }
      out(i, 0)[0] = loss / static_cast<double>(N);
      break;
    }
    case OpKind::kSoftmaxCrossEntropyGrad: {  // inputs probabilities, labels, dloss
      const int64_t N = xs[0], K = xs[1];
      const double eps = n.attrs.label_smoothing, dl = (*x[2])[0];
      for (int64_t r = 0; r < N; ++r)
        for (int64_t k = 0; k < K; ++k) {
          const double q = (k == static_cast<int64_t>((*x[1])[r]) ? 1 - eps : 0) + eps / static_cast<double>(K);
          (*y)[r * K + k] = ((*x[0])[r * K + k] - q) * dl / static_cast<double>(N);
        }
      break;
    }
    case OpKind::kMeanSquaredError: {
      double s = 0;
      for (size_t e = 0; e < x[0]->size(); ++e) s += ((*x[0])[e] - (*x[1])[e]) * ((*x[0])[e] - (*x[1])[e]);
      (*y)[0] = s / static_cast<double>(x[0]->size());
      break;
    }
    case OpKind::kMeanSquaredErrorGrad:  // inputs a, b, dloss: d/da mean((a - b)^2)
      for (size_t e = 0; e < y->size(); ++e)
        (*y)[e] = 2 * ((*x[0])[e] - (*x[1])[e]) * (*x[2])[0] / static_cast<double>(y->size());
      break;
    default:
      return Unimplemented(label + "not supported by the reference evaluator");
  }
  for (size_t k = 0; k < n.out_dtypes.size(); ++k)
    if (n.out_dtypes[k] == DType::kBF16)
      for (double& v : out(i, static_cast<int>(k))) v = RoundBF16(v);
  return Status::OK();
}

}  // namespace strata::backend::reference
