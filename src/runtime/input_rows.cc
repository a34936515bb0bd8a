#include "src/runtime/input_rows.h"

#include <algorithm>

#include "src/core/check.h"

namespace strata {
namespace {

void SortDistinct(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

InputRows BlockInputRows(const std::vector<GenerationRequest>& requests,
                         const BlockSequences& sequences, int prompt_len, int token,
                         int position_offset) {
  InputRows rows;
  rows.token = token;
  if (token == 0) {
    for (const GenerationRequest& r : requests) {
      rows.tokens.insert(rows.tokens.end(), r.prompt.begin(), r.prompt.end());
    }
    for (int p = 0; p < prompt_len; ++p) rows.positions.push_back(p + position_offset);
  } else {
    for (int s = 0; s < sequences.size(); ++s) {
      rows.tokens.push_back(sequences.last_token(s));
      const int length = static_cast<int>(requests[static_cast<size_t>(s)].prompt.size());
      rows.positions.push_back(length + token - 1 + position_offset);
    }
  }
  SortDistinct(rows.tokens);
  SortDistinct(rows.positions);
  return rows;
}

int32_t RowIndex(std::span<const int32_t> rows, int32_t id) {
  const auto it = std::lower_bound(rows.begin(), rows.end(), id);
  STRATA_CHECK(it != rows.end() && *it == id);
  return static_cast<int32_t>(it - rows.begin());
}

}  // namespace strata
