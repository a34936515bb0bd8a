#include "src/job/shard.h"

#include <charconv>

#include "src/job/stable_hash.h"

namespace strata {
namespace {

constexpr int kMaxShards = 65536;

bool ParseInt(std::string_view s, int* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

std::string ShardSpec::ToString() const {
  return std::to_string(index) + "/" + std::to_string(count);
}

Result<ShardSpec> ParseShardSpec(std::string_view text) {
  const auto bad = [&]() {
    return Status::InvalidArgument("--shard must be I/N with 0 <= I < N <= " +
                                   std::to_string(kMaxShards) + ", e.g. 0/4; got \"" +
                                   std::string(text) + "\"");
  };
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return bad();
  ShardSpec s;
  if (!ParseInt(text.substr(0, slash), &s.index) || !ParseInt(text.substr(slash + 1), &s.count)) {
    return bad();
  }
  if (s.count < 1 || s.count > kMaxShards || s.index < 0 || s.index >= s.count) return bad();
  return s;
}

int ShardOf(std::string_view custom_id, uint64_t line_number, int count) {
  const uint64_t n = static_cast<uint64_t>(count);
  if (custom_id.empty()) return static_cast<int>((line_number - 1) % n);
  return static_cast<int>(Mix64(Fnv1a64(custom_id)) % n);
}

}  // namespace strata
