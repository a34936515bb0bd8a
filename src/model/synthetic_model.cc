#include "src/model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/model/model_builder.h"
#include "src/model/store.h"

namespace strata {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr int kLevels = 1 << 16;
// Elements below this are made on the calling thread: a thread team costs more than they do.
constexpr uint64_t kParallelElements = uint64_t{1} << 18;

// SplitMix64's output function: a bijection of 64 bits whose outputs for consecutive inputs
// pass as independent. Element group g of a tensor with key k is Mix(k + g * kGolden).
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Elements of a tensor made on demand, rounded up so that every view starts 64-byte aligned, as
// views of real files' tensors do.
uint64_t PaddedElements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return (n + 63) / 64 * 64;
}

// The bits of `f` stored as `dtype`, in the low DTypeBytes(dtype) bytes.
uint32_t Stored(float f, DType dtype) {
  if (dtype == DType::kF16) return FloatToHalf(f);
  if (dtype == DType::kBF16) return FloatToBf16(f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// How one tensor's elements are made: a level of `levels` picked by 16 bits of the hash, or, for
// a norm weight or a bias, one constant.
struct Recipe {
  uint64_t key = 0;
  const void* levels = nullptr;  // kLevels stored values; nullptr: every element is `constant`
  uint32_t constant = 0;         // stored bits
};

// Elements [first, first + n) of a tensor of `recipe` stored as T, at `out`. Each 64-bit hash
// gives four elements (16 bits each), aligned to groups of four by index.
template <typename T>
void MakeElements(const Recipe& recipe, uint64_t first, uint64_t n, T* out) {
  if (recipe.levels == nullptr) {
    std::fill_n(out, n, static_cast<T>(recipe.constant));
    return;
  }
  const auto* levels = static_cast<const T*>(recipe.levels);
  const uint64_t key = recipe.key;
  const auto one = [&](uint64_t i) {
    return levels[(Mix(key + (i >> 2) * kGolden) >> (16 * (i & 3))) & 0xFFFF];
  };
  const uint64_t end = first + n;
  uint64_t i = first;
  for (; i < end && (i & 3) != 0; ++i) out[i - first] = one(i);
  const int64_t groups = static_cast<int64_t>((end - i) / 4);
  T* aligned = out + (i - first);
  const uint64_t group0 = i >> 2;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t g = 0; g < groups; ++g) {
    const uint64_t h = Mix(key + (group0 + static_cast<uint64_t>(g)) * kGolden);
    T* o = aligned + 4 * g;
    o[0] = levels[h & 0xFFFF];
    o[1] = levels[(h >> 16) & 0xFFFF];
    o[2] = levels[(h >> 32) & 0xFFFF];
    o[3] = levels[h >> 48];
  }
  for (i += 4 * static_cast<uint64_t>(groups); i < end; ++i) out[i - first] = one(i);
}

// Every tensor's recipe, by its view's data, and the level tables they use. Read-only once made,
// so any thread may make bytes from it.
class Recipes {
 public:
  explicit Recipes(DType dtype, uint64_t seed) : dtype_(dtype), seed_(seed) {}

  // The recipe of the tensor in slot `ordinal` of WeightSlots() with shape `shape`: uniform in
  // [-1/sqrt(in), 1/sqrt(in)] for a matrix, 1 for a norm weight, 0 for a bias.
  Recipe For(int ordinal, const std::string& name, const std::vector<int64_t>& shape) {
    Recipe r;
    if (shape.size() == 1) {
      r.constant = Stored(name.ends_with("norm") ? 1.0f : 0.0f, dtype_);
      return r;
    }
    r.key = Mix(seed_ * kGolden + static_cast<uint64_t>(ordinal));
    r.levels = Levels(1.0f / std::sqrt(static_cast<float>(shape[1]))).data();
    return r;
  }
  void Add(const void* data, const Recipe& recipe) { by_data_[data] = recipe; }

  // Elements [first, first + n) of `view`, whose recipe was added under its data, at `out`.
  void Make(const TensorView& view, uint64_t first, uint64_t n, void* out) const {
    MakeRange(by_data_.at(view.data), first, n, out);
  }
  void MakeRange(const Recipe& recipe, uint64_t first, uint64_t n, void* out) const {
    if (dtype_ == DType::kF32) {
      MakeElements(recipe, first, n, static_cast<uint32_t*>(out));
    } else {
      MakeElements(recipe, first, n, static_cast<uint16_t*>(out));
    }
  }

 private:
  // The kLevels values (2k + 1) / kLevels - 1 of [-a, a], k = 0 .. kLevels - 1, as stored:
  // symmetric about 0 and evenly spaced.
  const std::vector<uint8_t>& Levels(float a) {
    auto [it, fresh] = levels_.try_emplace(a);
    if (fresh) {
      const size_t size = DTypeBytes(dtype_);
      it->second.resize(kLevels * size);
      for (int k = 0; k < kLevels; ++k) {
        const float f = a * (static_cast<float>(2 * k + 1) / kLevels - 1.0f);
        const uint32_t bits = Stored(f, dtype_);
        std::memcpy(it->second.data() + k * size, &bits, size);  // little-endian: the low bytes
      }
    }
    return it->second;
  }

  DType dtype_;
  uint64_t seed_;
  std::map<float, std::vector<uint8_t>> levels_;
  std::unordered_map<const void*, Recipe> by_data_;
};

}  // namespace

Result<std::unique_ptr<Model>> MakeSyntheticModel(const ModelConfig& config, DType dtype,
                                                  uint64_t seed, SyntheticWeights weights) {
  STRATA_RETURN_IF_ERROR(config.Validate());
  if (dtype == DType::kQ4) {
    return Status::InvalidArgument("synthetic weights are F32, F16 or BF16, not 4-bit");
  }
  ModelBuilder builder("synthetic");
  builder.config() = config;
  ModelWeights& w = builder.weights();
  w.layers.resize(static_cast<size_t>(config.num_layers));
  std::vector<WeightSlot> slots = WeightSlots(config, &w);
  if (config.tie_word_embeddings) slots.pop_back();  // lm_head, last: the token embedding
  const size_t elem = DTypeBytes(dtype);
  auto recipes = std::make_shared<Recipes>(dtype, seed);

  const uint8_t* reserved = nullptr;
  if (weights == SyntheticWeights::kOnDemand) {
    uint64_t total = 0;
    for (const WeightSlot& s : slots) total += PaddedElements(s.shape);
    STRATA_ASSIGN_OR_RETURN(
        reserved, builder.ReserveOnDemand(total * elem, [recipes](const TensorView& view,
                                                                  uint64_t offset, uint64_t bytes,
                                                                  void* dst) {
          const uint64_t size = DTypeBytes(view.dtype);
          recipes->Make(view, offset / size, bytes / size, dst);
        }));
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    TensorView& v = *slots[i].view;
    v = TensorView{dtype, slots[i].shape, nullptr};
    const Recipe recipe = recipes->For(static_cast<int>(i), slots[i].name, v.shape);
    const uint64_t n = static_cast<uint64_t>(v.numel());
    if (reserved != nullptr) {
      v.data = reserved;
      reserved += PaddedElements(v.shape) * elem;
      recipes->Add(v.data, recipe);
    } else {
      // Builder buffers are floats; halves take half as many.
      float* buf = builder.NewBuffer(dtype == DType::kF32 ? n : (n + 1) / 2);
      recipes->MakeRange(recipe, 0, n, buf);
      v.data = buf;
    }
  }
  if (config.tie_word_embeddings) w.lm_head = w.token_embedding;
  return builder.Finish();
}

}  // namespace strata
