// lanewise's native CPU kernel for lw.torch.op operators.
//
// PyTorch calls an operator's Python kernel through its dispatcher, taking the
// GIL and converting every argument: ~10-30 us a call, more than a small lane
// program runs.  This kernel is C++: it checks the tensors, allocates the
// outputs and calls the program's compiled handler (a Numba cfunc, built by
// lanewise/torch/native.py) with no Python on the way.
//
// One registry entry per operator (one operator per argument dtypes and ranks),
// holding a plan per input sizes: the handler to call and how it runs the lanes.  A call it cannot serve -- a
// size not planned yet, a non-contiguous or lazily conjugated tensor, a lane
// that raised -- runs the operator's Python twin (``<name>_py``), which plans
// the sizes for the next call or raises lanewise's error naming the lane.
//
// Its autograd kernel is C++ too: a call needing no gradient goes straight to
// the CPU kernel; one that does runs the twin, whose Python autograd kernel
// (torch.library.register_autograd) records the backward.  PyTorch's own Python
// autograd kernel costs ~4 us on every call, gradient or not.
//
// Built by native.py with the C++ compiler PyTorch was built for; Python reaches
// it through ctypes (the extern "C" functions at the end), not pybind11.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace {

// int64 handler(int64 plan, int64 words): words holds the inputs' data pointers,
// the outputs' data pointers, then every input's and every output's sizes.  It
// returns -1, or the number of the first lane that raised.
using Handler = int64_t (*)(int64_t, int64_t);

struct Plan {
  Handler handler = nullptr;   // the compiled program for these sizes' executable
  std::vector<int64_t> words;  // the handler's plan (lanewise.bridge.kernel.plan_of)
  std::vector<std::vector<int64_t>> out_shapes;
};

struct Entry {
  std::vector<c10::ScalarType> in_types, out_types;
  std::vector<int64_t> in_ranks, out_ranks;
  std::optional<c10::OperatorHandle> twin;
  std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans;  // by the inputs' sizes
};

// Registration comes from Python threads, calls from any thread: one lock for both
// (held for look-ups only, never while a handler runs).
std::mutex registry_mutex;
std::map<std::string, std::unique_ptr<Entry>> registry;  // by operator name ("lanewise::...")
std::vector<std::unique_ptr<torch::Library>> libraries;  // kept alive: dropping one removes its kernels

const std::map<std::string, c10::ScalarType>& scalar_types() {
  static const std::map<std::string, c10::ScalarType> types = {
      {"bool", c10::kBool},        {"uint8", c10::kByte},      {"uint16", c10::kUInt16},
      {"uint32", c10::kUInt32},    {"uint64", c10::kUInt64},   {"int8", c10::kChar},
      {"int16", c10::kShort},      {"int32", c10::kInt},       {"int64", c10::kLong},
      {"float32", c10::kFloat},    {"float64", c10::kDouble},  {"complex64", c10::kComplexFloat},
      {"complex128", c10::kComplexDouble}};
  return types;
}

// "float64,int64" -> their scalar types; false for a name PyTorch has no type for.
bool parse_types(const char* names, std::vector<c10::ScalarType>* out) {
  std::string all(names);
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    auto found = scalar_types().find(all.substr(start, end - start));
    if (found == scalar_types().end()) return false;
    out->push_back(found->second);
    start = end + 1;
  }
  return true;
}

Entry* entry_of(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto found = registry.find(op.operator_name().name);
  return found == registry.end() ? nullptr : found->second.get();
}

// The tensor can be read as the handler reads it: its dtype, rank, a C-contiguous
// CPU buffer holding the values themselves (no lazy conjugation or negation).
bool servable(const at::Tensor& t, c10::ScalarType type, int64_t rank) {
  return t.defined() && t.scalar_type() == type && t.dim() == rank && t.device().is_cpu() &&
         t.layout() == c10::kStrided && t.is_contiguous() && !t.is_conj() && !t.is_neg();
}

void run_twin(const Entry& entry, torch::jit::Stack* stack) {
  entry.twin->callBoxedForDispatchKey(c10::DispatchKey::CPU, *stack);
}

void run(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Entry* entry = entry_of(op);
  TORCH_CHECK(entry != nullptr, "lanewise: no native kernel registered for ", op.operator_name().name);
  const size_t n_in = entry->in_types.size(), n_out = entry->out_types.size();
  std::vector<int64_t> sizes;
  std::vector<int64_t> words(n_in + n_out);
  bool fast = true;
  for (size_t k = 0; k < n_in; ++k) {
    const c10::IValue& value = torch::jit::peek(*stack, k, n_in);
    if (!value.isTensor() || !servable(value.toTensor(), entry->in_types[k], entry->in_ranks[k])) {
      fast = false;
      break;
    }
    const at::Tensor& t = value.toTensor();
    words[k] = reinterpret_cast<int64_t>(t.data_ptr());
    sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
  }
  std::shared_ptr<const Plan> plan;
  if (fast) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto found = entry->plans.find(sizes);
    if (found != entry->plans.end()) plan = found->second;
  }
  if (!plan) return run_twin(*entry, stack);
  std::vector<at::Tensor> outs;
  outs.reserve(n_out);
  for (size_t k = 0; k < n_out; ++k) {
    outs.push_back(at::empty(plan->out_shapes[k], at::TensorOptions().dtype(entry->out_types[k])));
    words[n_in + k] = reinterpret_cast<int64_t>(outs.back().data_ptr());
  }
  words.insert(words.end(), sizes.begin(), sizes.end());
  for (const auto& shape : plan->out_shapes) words.insert(words.end(), shape.begin(), shape.end());
  const int64_t failed = plan->handler(reinterpret_cast<int64_t>(plan->words.data()),
                                        reinterpret_cast<int64_t>(words.data()));
  if (failed >= 0) return run_twin(*entry, stack);  // it reruns the lanes and raises lanewise's error
  torch::jit::drop(*stack, n_in);
  for (auto& out : outs) stack->emplace_back(std::move(out));
}

bool needs_grad(const Entry& entry, const torch::jit::Stack& stack) {
  if (!c10::GradMode::is_enabled()) return false;
  const size_t n_in = entry.in_types.size();
  for (size_t k = 0; k < n_in; ++k) {
    const c10::IValue& value = torch::jit::peek(stack, k, n_in);
    if (value.isTensor() && value.toTensor().requires_grad()) return true;
  }
  return false;
}

void autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  Entry* entry = entry_of(op);
  TORCH_CHECK(entry != nullptr, "lanewise: no native kernel registered for ", op.operator_name().name);
  if (needs_grad(*entry, *stack)) return entry->twin->callBoxed(stack);
  op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
}

int fail(char* message, size_t size, const std::string& what) {
  if (size > 0) {
    std::strncpy(message, what.c_str(), size - 1);
    message[size - 1] = '\0';
  }
  return 1;
}

}  // namespace

extern "C" {

// Register the native CPU and autograd kernels of operator ``ns::name`` (schema
// defined by Python); its Python twin ``ns::twin`` must be defined, with CPU and
// autograd kernels.
// Returns 0, or 1 with ``message`` filled.
int lw_define(const char* ns, const char* name, const char* twin, const char* in_types,
              const int64_t* in_ranks, const char* out_types, const int64_t* out_ranks, char* message,
              size_t message_size) {
  try {
    const std::string qualname = std::string(ns) + "::" + name;
    auto entry = std::make_unique<Entry>();
    if (!parse_types(in_types, &entry->in_types) || !parse_types(out_types, &entry->out_types))
      return fail(message, message_size, std::string("unknown dtype in ") + in_types + " -> " + out_types);
    entry->in_ranks.assign(in_ranks, in_ranks + entry->in_types.size());
    entry->out_ranks.assign(out_ranks, out_ranks + entry->out_types.size());
    entry->twin = c10::Dispatcher::singleton().findSchemaOrThrow((std::string(ns) + "::" + twin).c_str(), "");
    {
      std::lock_guard<std::mutex> lock(registry_mutex);
      if (registry.count(qualname)) return fail(message, message_size, qualname + " has a kernel already");
      registry[qualname] = std::move(entry);  // never removed: kernels hold the pointer unlocked
    }
    auto library = std::make_unique<torch::Library>(torch::Library::IMPL, ns, std::nullopt, __FILE__, __LINE__);
    library->impl(name, torch::dispatch(c10::DispatchKey::CPU, torch::CppFunction::makeFromBoxedFunction<&run>()));
    library->impl(name, torch::dispatch(c10::DispatchKey::Autograd,
                                        torch::CppFunction::makeFromBoxedFunction<&autograd>()));
    libraries.push_back(std::move(library));
    return 0;
  } catch (const std::exception& e) {
    return fail(message, message_size, e.what());
  }
}

// Plan the inputs' ``sizes`` (every input's, concatenated) of operator ``ns::name``:
// the handler, its plan words and the outputs' shapes (concatenated, ranks as
// defined).  Returns 0; 1 for an operator not registered; 2 when it has ``limit``
// plans already.
int lw_plan(const char* qualname, const int64_t* sizes, int64_t n_sizes, int64_t handler, const int64_t* words,
            int64_t n_words, const int64_t* out_shapes, int64_t limit) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto found = registry.find(qualname);
  if (found == registry.end()) return 1;
  Entry& entry = *found->second;
  if (static_cast<int64_t>(entry.plans.size()) >= limit) return 2;
  auto plan = std::make_shared<Plan>();
  plan->handler = reinterpret_cast<Handler>(handler);
  plan->words.assign(words, words + n_words);
  for (int64_t rank : entry.out_ranks) {
    plan->out_shapes.emplace_back(out_shapes, out_shapes + rank);
    out_shapes += rank;
  }
  entry.plans[std::vector<int64_t>(sizes, sizes + n_sizes)] = std::move(plan);
  return 0;
}

// How many sizes ``ns::name`` has plans for (-1: not registered); for tests.
int64_t lw_plans(const char* qualname) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto found = registry.find(qualname);
  return found == registry.end() ? -1 : static_cast<int64_t>(found->second->plans.size());
}

}  // extern "C"
