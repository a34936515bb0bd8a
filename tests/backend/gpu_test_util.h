// Helpers for the cross-backend op tests: skipping without a GPU, device arrays, random inputs and
// the normalised error ‖got − ref‖ / ‖ref‖ against fp64 references.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "src/backend/cuda/cuda_check.h"
#include "src/backend/cuda/cuda_device.h"
#include "src/backend/cuda/cuda_resources.h"
#include "src/core/dtype.h"

namespace strata::testing {

// Every GPU test derives from this: it skips cleanly on machines without a CUDA device.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaDeviceInfo info = QueryCudaDevices();
    if (info.device_count == 0) GTEST_SKIP() << "no CUDA device: " << info.error;
    STRATA_CUDA_CHECK(cudaSetDevice(0));
  }
};

// A device copy of a host vector; Download() waits for all work on the legacy stream (the tests
// launch there) and copies back.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n), buf_(sizeof(T) * (n == 0 ? 1 : n)) {}
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { Upload(host); }

  void Upload(const std::vector<T>& host) {
    STRATA_CUDA_CHECK(cudaMemcpy(buf_.get(), host.data(), sizeof(T) * host.size(),
                                 cudaMemcpyHostToDevice));
  }
  // Fills every byte with 0xFF: NaN for floats, -1 for integers, so unwritten outputs show.
  void Poison() { STRATA_CUDA_CHECK(cudaMemset(buf_.get(), 0xFF, sizeof(T) * n_)); }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    STRATA_CUDA_CHECK(cudaDeviceSynchronize());
    STRATA_CUDA_CHECK(cudaMemcpy(host.data(), buf_.get(), sizeof(T) * n_, cudaMemcpyDeviceToHost));
    return host;
  }
  T* get() const { return buf_.as<T>(); }
  size_t size() const { return n_; }

 private:
  size_t n_;
  DeviceBuffer buf_;
};

// Fresh random inputs on every run unless STRATA_TEST_SEED is set; the seed is printed on failure
// through SCOPED_TRACE by the callers.
inline uint64_t TestSeed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("STRATA_TEST_SEED");
    return env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device()();
  }();
  return seed;
}

inline std::vector<float> RandomFloats(std::mt19937_64& rng, size_t n, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> RandomNormals(std::mt19937_64& rng, size_t n, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ‖got − ref‖₂ / ‖ref‖₂ (absolute when ref is all zeros); NaN anywhere gives NaN, which fails
// every EXPECT_LT.
template <typename Got>
double NormalizedError(const std::vector<double>& ref, const std::vector<Got>& got) {
  if (ref.size() != got.size()) return NAN;
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

inline std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline std::vector<uint16_t> ToHalfBits(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToHalf(v[i]);
  return h;
}

inline std::vector<uint16_t> ToBf16Bits(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even (finite inputs)
    h[i] = static_cast<uint16_t>(bits >> 16);
  }
  return h;
}

}  // namespace strata::testing
