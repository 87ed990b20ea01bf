#pragma once
// OrderedDict: a map that remembers insertion order (as Python's dict), used for state dicts
// and named parameters. Lookup by key is O(1); iteration yields (key, value) in order.
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/error.h"

namespace kiln::nn {

template <typename Key, typename Value>
class OrderedDict {
 public:
  using Item = std::pair<Key, Value>;
  using iterator = typename std::vector<Item>::iterator;
  using const_iterator = typename std::vector<Item>::const_iterator;

  OrderedDict() = default;
  OrderedDict(std::initializer_list<Item> items) {
    for (const auto& it : items) insert(it.first, it.second);
  }

  // Adds key -> value; ValueError if the key exists already.
  Value& insert(const Key& key, Value value) {
    KILN_CHECK(!contains(key), ValueError, "OrderedDict: key '", key, "' already exists");
    index_.emplace(key, items_.size());
    items_.emplace_back(key, std::move(value));
    return items_.back().second;
  }
  // Adds or replaces (a replaced key keeps its position).
  Value& insert_or_assign(const Key& key, Value value) {
    auto it = index_.find(key);
    if (it == index_.end()) return insert(key, std::move(value));
    items_[it->second].second = std::move(value);
    return items_[it->second].second;
  }
  bool contains(const Key& key) const { return index_.count(key) != 0; }
  const Value* find(const Key& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  Value* find(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  // ValueError naming the key when absent.
  const Value& at(const Key& key) const {
    const Value* v = find(key);
    KILN_CHECK(v != nullptr, ValueError, "OrderedDict: no key '", key, "'");
    return *v;
  }
  Value& at(const Key& key) { return const_cast<Value&>(std::as_const(*this).at(key)); }
  const Value& operator[](const Key& key) const { return at(key); }
  Value& operator[](const Key& key) { return at(key); }
  // Removes a key (order of the others is kept); returns whether it was present.
  bool erase(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    size_t pos = it->second;
    items_.erase(items_.begin() + std::ptrdiff_t(pos));
    index_.erase(it);
    for (auto& kv : index_)
      if (kv.second > pos) --kv.second;
    return true;
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    index_.clear();
  }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }
  std::vector<Key> keys() const {
    std::vector<Key> k;
    k.reserve(items_.size());
    for (const auto& it : items_) k.push_back(it.first);
    return k;
  }
  std::vector<Value> values() const {
    std::vector<Value> v;
    v.reserve(items_.size());
    for (const auto& it : items_) v.push_back(it.second);
    return v;
  }

 private:
  std::vector<Item> items_;
  std::unordered_map<Key, size_t> index_;
};

}  // namespace kiln::nn
