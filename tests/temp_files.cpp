// Removes this process's temporary files when the tests end. Test files are named
// "strata_<pid>_..." or "strata_gguf_<pid>_..." in gtest's TempDir (test_helpers.h, test_gguf.cpp)
// and are shared between the test cases of one process (tiny models written once), so they go
// at the end, not after each test; ctest runs each case as its own process, and thousands of
// them accumulated in /tmp before this.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace {

class RemoveTempFiles : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::string pid = std::to_string(::getpid());
    const std::vector<std::string> prefixes = {"strata_" + pid + "_", "strata_gguf_" + pid + "_"};
    std::error_code ec;
    std::vector<std::filesystem::path> ours;
    for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir(), ec)) {
      const std::string name = entry.path().filename().string();
      for (const auto& prefix : prefixes) {
        if (name.starts_with(prefix)) ours.push_back(entry.path());
      }
    }
    for (const auto& path : ours) std::filesystem::remove_all(path, ec);
  }
};

const auto* const kRemoveTempFiles = ::testing::AddGlobalTestEnvironment(new RemoveTempFiles);

}  // namespace
