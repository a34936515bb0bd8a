#include "src/tokenizer/bpe_model.h"

#include <queue>

#include "src/tokenizer/byte_level.h"

namespace strata {

Result<BpeModel> BpeModel::Create(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                  const std::vector<std::pair<std::string, std::string>>& merges,
                                  Options options) {
  BpeModel model;
  model.options_ = options;
  model.byte_ids_.fill(-1);
  std::unordered_map<std::string_view, int32_t> ids_by_spelling;
  ids_by_spelling.reserve(vocab.size());
  for (const auto& [spelling, id] : vocab) {
    ids_by_spelling[spelling] = id;
    std::optional<std::string> bytes = ByteLevelDecode(spelling);
    if (!bytes.has_value() || bytes->empty()) continue;
    if (bytes->size() == 1) model.byte_ids_[static_cast<uint8_t>((*bytes)[0])] = id;
    model.ids_by_bytes_[std::move(*bytes)] = id;
  }
  model.merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    joined = left + right;
    const auto l = ids_by_spelling.find(left);
    const auto r = ids_by_spelling.find(right);
    const auto j = ids_by_spelling.find(joined);
    if (l == ids_by_spelling.end() || r == ids_by_spelling.end() || j == ids_by_spelling.end()) {
      return Status::Corrupt("BPE merge " + std::to_string(rank) + " ('" + left + "' + '" + right +
                             "') names a token that is not in the vocabulary");
    }
    // The first occurrence of a pair holds its rank.
    model.merges_.emplace(PairKey(l->second, r->second),
                          MergeTarget{static_cast<int32_t>(rank), j->second});
  }
  return model;
}

const BpeModel::MergeTarget* BpeModel::FindMerge(int32_t left, int32_t right) const {
  const auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::Encode(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const auto it = ids_by_bytes_.find(std::string(word));
    if (it != ids_by_bytes_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int prev, next;  // neighbours in the list; -1 at the ends
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  bool previous_unknown = false;
  for (char c : word) {
    int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    const bool unknown = id < 0;
    if (unknown) {
      if (options_.unk_id < 0 || (options_.fuse_unk && previous_unknown)) continue;
      id = options_.unk_id;
    }
    previous_unknown = unknown;
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, -1, true});
    if (index > 0) symbols[index - 1].next = index;
  }

  struct Candidate {
    int32_t rank;
    int pos;
    int32_t new_id;
  };
  // Lowest rank first, then leftmost, as tokenizers' Merge ordering.
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const MergeTarget* m = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, static_cast<int>(i), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.pos];
    if (!current.alive || current.next < 0) continue;
    Symbol& right = symbols[current.next];
    // Skip entries made stale by an earlier merge of either side.
    const MergeTarget* m = FindMerge(current.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    current.id = top.new_id;
    right.alive = false;
    current.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (current.prev >= 0) {
      if (const MergeTarget* p = FindMerge(symbols[current.prev].id, current.id)) {
        queue.push({p->rank, current.prev, p->new_id});
      }
    }
    if (current.next >= 0) {
      if (const MergeTarget* n = FindMerge(current.id, symbols[current.next].id)) {
        queue.push({n->rank, top.pos, n->new_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.alive) ids->push_back(s.id);
  }
}

}  // namespace strata
