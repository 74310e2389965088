// Standalone driver for tests/core/fuzz_geometry.cc without libFuzzer: runs every
// file of the given corpus directories (or single files) through the fuzz target,
// then a fixed number of deterministic random mutations of them (byte flips,
// interesting-value tags, insertions, deletions, splices). Built with ASan + UBSan
// by `make core-test-asan`; exits non-zero only through the target's own abort or
// a sanitizer report.
//
//   fuzz_replay [--mutations N] [--seed S] PATH...
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern int64_t g_fuzz_accepted, g_fuzz_kernel_runs;

namespace {

// One input may take at most this long (a hang fails the run, naming the input).
constexpr unsigned kInputTimeoutSeconds = 20;
const char* volatile g_current = "?";
char g_current_buf[64];

void OnAlarm(int) {
  const char msg[] = "fuzz_replay: input timed out (hang): ";
  (void)!write(2, msg, sizeof(msg) - 1);
  (void)!write(2, g_current, std::strlen(g_current));
  (void)!write(2, "\n", 1);
  std::abort();
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void Collect(const std::string& path, std::vector<std::string>* files) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz_replay: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return;
  }
  DIR* dir = opendir(path.c_str());
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());  // deterministic order
  for (const std::string& n : names) files->push_back(path + "/" + n);
}

// Tag bytes of the decoder's Value(): small values, the interesting-value table, raw 8 bytes.
uint8_t RandomTag(std::mt19937_64& rng) {
  switch (rng() % 3) {
    case 0: return static_cast<uint8_t>(rng() % 16);
    case 1: return static_cast<uint8_t>(0xB0 + rng() % 0x40);
    default: return static_cast<uint8_t>(rng());
  }
}

std::vector<uint8_t> Mutate(const std::vector<uint8_t>& base, const std::vector<std::vector<uint8_t>>& corpus,
                            std::mt19937_64& rng) {
  std::vector<uint8_t> v = base;
  const int n = 1 + rng() % 4;
  for (int i = 0; i < n; ++i) {
    const size_t pos = v.empty() ? 0 : rng() % v.size();
    switch (rng() % 6) {
      case 0:
        if (!v.empty()) v[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!v.empty()) v[pos] = RandomTag(rng);
        break;
      case 2: v.insert(v.begin() + pos, RandomTag(rng)); break;
      case 3:
        if (!v.empty()) v.erase(v.begin() + pos);
        break;
      case 4:
        if (!v.empty()) v[pos] = static_cast<uint8_t>(v[pos] + 1 - 2 * (rng() % 2));
        break;
      default: {  // splice: the tail of another corpus entry
        const std::vector<uint8_t>& other = corpus[rng() % corpus.size()];
        if (!other.empty()) {
          const size_t from = rng() % other.size();
          v.resize(pos);
          v.insert(v.end(), other.begin() + from, other.end());
        }
      }
    }
  }
  if (v.size() > 512) v.resize(512);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mutations = 0;
  uint64_t seed = 20240611;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) {
      mutations = std::atoll(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      Collect(a, &files);
    }
  }
  std::vector<std::vector<uint8_t>> corpus;
  for (const std::string& f : files) corpus.push_back(ReadFile(f));
  if (corpus.empty()) corpus.push_back({});
  const auto t0 = std::chrono::steady_clock::now();
  std::signal(SIGALRM, OnAlarm);
  for (size_t i = 0; i < files.size(); ++i) {
    g_current = files[i].c_str();
    alarm(kInputTimeoutSeconds);
    LLVMFuzzerTestOneInput(corpus[i].data(), corpus[i].size());
  }
  const int64_t corpus_accepted = g_fuzz_accepted, corpus_kernels = g_fuzz_kernel_runs;
  std::mt19937_64 rng(seed);
  for (int64_t m = 0; m < mutations; ++m) {
    const std::vector<uint8_t> input = Mutate(corpus[rng() % corpus.size()], corpus, rng);
    std::snprintf(g_current_buf, sizeof(g_current_buf), "mutation %lld (--seed %llu)", (long long)m,
                  (unsigned long long)seed);
    g_current = g_current_buf;
    alarm(kInputTimeoutSeconds);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  alarm(0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "fuzz_replay: %zu corpus inputs (%lld accepted geometries, %lld kernel runs), %lld mutations "
      "(seed %llu; %lld accepted, %lld kernel runs) in %.1f s: no failures\n",
      files.size(), (long long)corpus_accepted, (long long)corpus_kernels, (long long)mutations,
      (unsigned long long)seed, (long long)(g_fuzz_accepted - corpus_accepted),
      (long long)(g_fuzz_kernel_runs - corpus_kernels), secs);
  return 0;
}
