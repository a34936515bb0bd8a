#include "policy/hardware_spec.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "policy/yaml_reader.h"

namespace strata {
namespace {

// Visits every numeric field with its YAML key, so that parsing, printing and validation cannot
// drift apart.
template <typename Spec, typename IntFn, typename RateFn>
void VisitNumbers(Spec& s, IntFn on_int, RateFn on_rate) {
  on_int("gpu_capacity_bytes", s.gpu_capacity_bytes);
  on_int("cpu_capacity_bytes", s.cpu_capacity_bytes);
  on_int("disk_capacity_bytes", s.disk_capacity_bytes);
  on_rate("h2d_gbps", s.h2d_gbps);
  on_rate("d2h_gbps", s.d2h_gbps);
  on_rate("disk_read_gbps", s.disk_read_gbps);
  on_rate("disk_write_gbps", s.disk_write_gbps);
  on_rate("gpu_prefill_tflops", s.gpu_prefill_tflops);
  on_rate("gpu_decode_tflops", s.gpu_decode_tflops);
  on_rate("gpu_memory_gbps", s.gpu_memory_gbps);
  on_rate("gpu_attention_prefill_tflops", s.gpu_attention_prefill_tflops);
  on_rate("gpu_attention_gbps", s.gpu_attention_gbps);
  on_rate("gpu_attention_q4_gbps", s.gpu_attention_q4_gbps);
  on_rate("gpu_dequant_gbps", s.gpu_dequant_gbps);
  on_rate("cpu_memory_gbps", s.cpu_memory_gbps);
  on_rate("cpu_attention_gbps", s.cpu_attention_gbps);
  on_rate("cpu_attention_q4_gbps", s.cpu_attention_q4_gbps);
}

}  // namespace

double HardwareSpec::GemmTflopsAt(double rows, bool prefill) const {
  const std::vector<GemmRate>& curve = gpu_gemm_tflops_by_rows;
  if (curve.empty()) return prefill ? gpu_prefill_tflops : gpu_decode_tflops;
  if (rows < curve.front().rows) return curve.front().tflops * rows / curve.front().rows;
  if (rows >= curve.back().rows) return curve.back().tflops;
  // The first point above `rows`, and the one at or below it.
  const auto above =
      std::upper_bound(curve.begin(), curve.end(), rows,
                       [](double r, const GemmRate& point) { return r < point.rows; });
  const GemmRate& low = above[-1];
  const double t = std::log(rows / low.rows) / std::log(double(above->rows) / low.rows);
  return low.tflops + (above->tflops - low.tflops) * t;
}

Status HardwareSpec::Validate() const {
  Status status;
  auto check = [&](const char* key, auto value) {
    if (status.ok() && !(value > 0)) {
      std::ostringstream v;
      v << value;
      status = Status::InvalidArgument(std::string(key) + " must be positive, got " + v.str());
    }
  };
  VisitNumbers(*this, check, check);
  check("cpu_cores", cpu_cores);
  if (status.ok() && d2d_gbps < 0) {
    status = Status::InvalidArgument("d2d_gbps must be positive or absent");
  }
  if (status.ok() && disk_page_write_gbps < 0) {
    status = Status::InvalidArgument("disk_page_write_gbps must be positive or absent");
  }
  if (status.ok() && copy_beside_gemm_gbps < 0) {
    status = Status::InvalidArgument("copy_beside_gemm_gbps must be positive or absent");
  }
  if (status.ok() && disk_write_wait_bytes < 0) {
    status = Status::InvalidArgument("disk_write_wait_bytes must be non-negative or absent");
  }
  if (status.ok() && gpu_cache_bytes < 0) {
    status = Status::InvalidArgument("gpu_cache_bytes must be positive or absent");
  }
  int64_t previous_rows = 0;
  for (const GemmRate& point : gpu_gemm_tflops_by_rows) {
    if (!status.ok()) break;
    if (point.rows <= 0) {
      status = Status::InvalidArgument("gpu_gemm_tflops_by_rows must have positive rows, got " +
                                       std::to_string(point.rows));
    } else if (point.rows <= previous_rows) {
      status = Status::InvalidArgument(
          "gpu_gemm_tflops_by_rows must have its rows in strictly ascending order, got " +
          std::to_string(point.rows) + " after " + std::to_string(previous_rows));
    } else if (!(point.tflops > 0) || !std::isfinite(point.tflops)) {
      std::ostringstream v;
      v << point.tflops;
      status = Status::InvalidArgument("gpu_gemm_tflops_by_rows must have positive rates, got " +
                                       v.str() + " at " + std::to_string(point.rows) + " rows");
    }
    previous_rows = point.rows;
  }
  return status;
}

Result<HardwareSpec> ParseHardwareSpecYaml(const std::string& text, const std::string& origin) {
  policy_internal::YamlMapReader reader(text, origin);
  HardwareSpec spec;
  reader.String("name", &spec.name);
  reader.OptionalString("description", &spec.description);
  // Zero is read so that Validate() can name it; a negative number fails here with its key.
  VisitNumbers(
      spec, [&](const char* key, int64_t& v) { reader.Int64(key, &v, 0); },
      [&](const char* key, double& v) { reader.Double(key, &v, /*positive=*/false); });
  reader.Int("cpu_cores", &spec.cpu_cores, 0);
  reader.OptionalDouble("d2d_gbps", &spec.d2d_gbps, /*positive=*/true);
  reader.OptionalDouble("disk_page_write_gbps", &spec.disk_page_write_gbps, /*positive=*/true);
  reader.OptionalDouble("copy_beside_gemm_gbps", &spec.copy_beside_gemm_gbps, /*positive=*/true);
  reader.OptionalInt64("disk_write_wait_bytes", &spec.disk_write_wait_bytes, 0);
  reader.OptionalInt64("gpu_cache_bytes", &spec.gpu_cache_bytes, 1);
  std::vector<std::pair<int64_t, double>> curve;
  reader.OptionalWholeToPositiveMap("gpu_gemm_tflops_by_rows", &curve);
  std::sort(curve.begin(), curve.end());  // written in any order; the rows are distinct
  for (const auto& [rows, tflops] : curve) spec.gpu_gemm_tflops_by_rows.push_back({rows, tflops});
  reader.OptionalBool("gpu_emulated", &spec.gpu_emulated);
  reader.OptionalBool("h2d_emulated", &spec.h2d_emulated);
  reader.OptionalBool("d2h_emulated", &spec.d2h_emulated);
  STRATA_RETURN_IF_ERROR(reader.Finish());
  Status valid = spec.Validate();
  if (!valid.ok()) return valid.WithContext(origin);
  return spec;
}

Result<HardwareSpec> LoadHardwareSpecYaml(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, policy_internal::ReadTextFile(path));
  return ParseHardwareSpecYaml(text, path);
}

std::string HardwareSpecToYaml(const HardwareSpec& spec) {
  auto quoted = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += (c == '\n') ? ' ' : c;
    }
    return out + "\"";
  };
  std::ostringstream out;
  out << "name: " << quoted(spec.name) << "\n";
  out << "description: " << quoted(spec.description) << "\n";
  VisitNumbers(
      spec, [&](const char* key, const int64_t& v) { out << key << ": " << v << "\n"; },
      [&](const char* key, const double& v) {
        out << key << ": " << policy_internal::FormatDouble(v) << "\n";
      });
  out << "cpu_cores: " << spec.cpu_cores << "\n";
  if (spec.d2d_gbps > 0) {
    out << "d2d_gbps: " << policy_internal::FormatDouble(spec.d2d_gbps) << "\n";
  }
  if (spec.disk_page_write_gbps > 0) {
    out << "disk_page_write_gbps: " << policy_internal::FormatDouble(spec.disk_page_write_gbps)
        << "\n";
  }
  if (spec.copy_beside_gemm_gbps > 0) {
    out << "copy_beside_gemm_gbps: " << policy_internal::FormatDouble(spec.copy_beside_gemm_gbps)
        << "\n";
  }
  if (spec.disk_write_wait_bytes > 0) {
    out << "disk_write_wait_bytes: " << spec.disk_write_wait_bytes << "\n";
  }
  if (spec.gpu_cache_bytes > 0) out << "gpu_cache_bytes: " << spec.gpu_cache_bytes << "\n";
  if (!spec.gpu_gemm_tflops_by_rows.empty()) {
    const char* separator = "";
    out << "gpu_gemm_tflops_by_rows: {";
    for (const GemmRate& point : spec.gpu_gemm_tflops_by_rows) {
      out << separator << point.rows << ": " << policy_internal::FormatDouble(point.tflops);
      separator = ", ";
    }
    out << "}\n";
  }
  out << "gpu_emulated: " << (spec.gpu_emulated ? "true" : "false") << "\n";
  out << "h2d_emulated: " << (spec.h2d_emulated ? "true" : "false") << "\n";
  out << "d2h_emulated: " << (spec.d2h_emulated ? "true" : "false") << "\n";
  return out.str();
}

}  // namespace strata
