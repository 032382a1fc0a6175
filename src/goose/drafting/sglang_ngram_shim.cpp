// goose's C entry points to SGLang's own n-gram matcher (sglang/kernels/jit/csrc/ngram_corpus/*.cpp,
// compiled beside this file by goose.drafting.sglang_native). SGLang binds the same class through
// tvm-ffi (ngram_corpus_ffi.cpp); this shim takes plain pointers instead so ctypes can call it, and
// makes every insert synchronous (SGLang synchronizes before each match, so drafts are the same).
// Every call returns 0, or -1 with the C++ exception's message in `err`.

#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include "ngram.h"

namespace {

int fail(const std::exception& e, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) {
    std::strncpy(err, e.what(), err_len - 1);
    err[err_len - 1] = '\0';
  }
  return -1;
}

}  // namespace

extern "C" {

int goose_sgl_ngram_new(size_t capacity, size_t max_trie_depth, size_t min_bfs_breadth, size_t max_bfs_breadth,
                        size_t draft_token_num, int prob, size_t external_sam_budget, void** out, char* err,
                        size_t err_len) {
  try {
    sglang::ngram::Param param;
    param.enable = true;
    param.enable_router_mode = false;
    param.max_trie_depth = max_trie_depth;
    param.min_bfs_breadth = min_bfs_breadth;
    param.max_bfs_breadth = max_bfs_breadth;
    param.draft_token_num = draft_token_num;
    param.match_type = prob ? "PROB" : "BFS";
    param.external_sam_budget = external_sam_budget;
    *out = new sglang::ngram::Ngram(capacity, param);
    return 0;
  } catch (const std::exception& e) {
    return fail(e, err, err_len);
  }
}

void goose_sgl_ngram_free(void* handle) {
  delete static_cast<sglang::ngram::Ngram*>(handle);
}

int goose_sgl_ngram_insert(void* handle, const int32_t* tokens, size_t len, char* err, size_t err_len) {
  try {
    auto* ngram = static_cast<sglang::ngram::Ngram*>(handle);
    std::vector<std::vector<int32_t>> batch(1, std::vector<int32_t>(tokens, tokens + len));
    ngram->asyncInsert(std::move(batch));
    ngram->synchronize();
    return 0;
  } catch (const std::exception& e) {
    return fail(e, err, err_len);
  }
}

// One request's draft: `out_tokens` holds draft_token_num tokens, `out_mask` draft_token_num^2 bytes.
int goose_sgl_ngram_match(void* handle, int64_t state_id, const int32_t* tokens, size_t len, size_t total_len,
                          int32_t* out_tokens, uint8_t* out_mask, size_t capacity, char* err, size_t err_len) {
  try {
    auto* ngram = static_cast<sglang::ngram::Ngram*>(handle);
    std::vector<int64_t> ids{state_id};
    std::vector<std::vector<int32_t>> tails(1, std::vector<int32_t>(tokens, tokens + len));
    std::vector<size_t> lens{total_len};
    auto result = ngram->batchMatch(ids, tails, lens);
    if (result.token.size() > capacity || result.mask.size() > capacity * capacity) {
      throw std::runtime_error("draft larger than the buffer");
    }
    std::memcpy(out_tokens, result.token.data(), result.token.size() * sizeof(int32_t));
    std::memcpy(out_mask, result.mask.data(), result.mask.size());
    return static_cast<int>(result.token.size());
  } catch (const std::exception& e) {
    return fail(e, err, err_len);
  }
}

void goose_sgl_ngram_erase(void* handle, int64_t state_id) {
  static_cast<sglang::ngram::Ngram*>(handle)->eraseMatchState({state_id});
}

void goose_sgl_ngram_reset(void* handle) {
  static_cast<sglang::ngram::Ngram*>(handle)->reset();
}

}  // extern "C"
