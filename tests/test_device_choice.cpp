// The device decision (planning/device_choice.h) as a pure function: nothing asked means the
// CPU; a GPU asked and absent means the CPU with a note naming why; the whole model on the GPU
// when it fits (from -ngl or from --vram-budget alone); errors before any work where running
// elsewhere would defy the request.
#include <gtest/gtest.h>

#include "core/error.h"
#include "planning/device_choice.h"

namespace strata {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

DeviceFacts gpu(uint64_t free_gib, uint64_t need_gib) {
  DeviceFacts f;
  f.gpu_present = true;
  f.gpu_free_bytes = free_gib * kGiB;
  f.needed_bytes = need_gib * kGiB;
  f.n_layer = 32;
  return f;
}

DeviceRequest asking(int ngl, uint64_t budget_gib = 0, std::string device = "") {
  DeviceRequest r;
  r.gpu_layers = ngl;
  r.vram_budget = budget_gib * kGiB;
  r.device = std::move(device);
  return r;
}

TEST(DeviceChoice, NothingAskedIsTheCpuWithoutANote) {
  const DeviceChoice c = choose_device({}, gpu(80, 4));
  EXPECT_EQ(c.kind, DeviceKind::Cpu);
  EXPECT_TRUE(c.note.empty());
  EXPECT_EQ(choose_device(asking(99, 0, "cpu"), gpu(80, 4)).kind, DeviceKind::Cpu);
}

TEST(DeviceChoice, AllLayersOnAGpuThatHoldsThem) {
  const DeviceChoice c = choose_device(asking(99), gpu(80, 4));
  EXPECT_EQ(c.kind, DeviceKind::Cuda);
  EXPECT_EQ(c.budget, 80 * kGiB) << "without --vram-budget the GPU's free memory is the limit";
  // llama.cpp's count: -ngl of every layer leaves the output head on the CPU, -ngl 33 not.
  EXPECT_EQ(choose_device(asking(32), gpu(80, 4)).gpu_layers, 32);
  EXPECT_EQ(choose_device(asking(33), gpu(80, 4)).gpu_layers, 0);
  EXPECT_EQ(choose_device(asking(0, 0, "cuda"), gpu(80, 4)).kind, DeviceKind::Cuda);
}

TEST(DeviceChoice, AVramBudgetAloneOffloadsWhatFitsAndOtherwiseSaysWhy) {
  const DeviceChoice fits = choose_device(asking(0, 8), gpu(80, 4));
  EXPECT_EQ(fits.kind, DeviceKind::Cuda);
  EXPECT_EQ(fits.budget, 8 * kGiB);
  const DeviceChoice too_big = choose_device(asking(0, 8), gpu(80, 12));
  EXPECT_EQ(too_big.kind, DeviceKind::Cpu);
  EXPECT_NE(too_big.note.find("12.00 GiB"), std::string::npos) << too_big.note;
  EXPECT_NE(too_big.note.find("--vram-budget"), std::string::npos) << too_big.note;
}

TEST(DeviceChoice, NoGpuIsTheCpuWithTheReason) {
  DeviceFacts none;
  none.no_gpu_reason = "no CUDA GPU was found";
  none.n_layer = 32;
  const DeviceChoice c = choose_device(asking(99), none);
  EXPECT_EQ(c.kind, DeviceKind::Cpu);
  EXPECT_EQ(c.note, "note: no CUDA GPU was found; running on the CPU");
  EXPECT_THROW(choose_device(asking(0, 0, "cuda"), none), Error) << "--device cuda insists";
}

TEST(DeviceChoice, RequestsThatCannotBeHonouredAreErrors) {
  EXPECT_THROW(choose_device(asking(99), gpu(8, 12)), Error) << "-ngl of a model too big";
  EXPECT_THROW(choose_device(asking(99, 100), gpu(80, 4)), Error) << "budget above free";
  EXPECT_THROW(choose_device(asking(0, 0, "tpu"), gpu(80, 4)), Error);
  EXPECT_THROW(choose_device(asking(-1), gpu(80, 4)), Error);
}

TEST(DeviceChoice, TheReferenceDeviceNeedsNoGpuAndKeepsItsBudget) {
  DeviceFacts none;
  none.n_layer = 4;
  none.needed_bytes = 3 * kGiB;
  const DeviceChoice c = choose_device(asking(0, 0, "reference"), none);
  EXPECT_EQ(c.kind, DeviceKind::Reference);
  EXPECT_EQ(c.budget, 0u);
  EXPECT_THROW(choose_device(asking(0, 2, "reference"), none), Error) << "3 GiB in a 2 GiB budget";
}

TEST(DeviceChoice, AModelLargerThanTheGpuSplitsItsFfnWhenItsDenseBlocksFit) {
  DeviceFacts f = gpu(16, 26);
  f.can_split = true;
  f.dense_bytes = 3 * kGiB;
  f.min_split_bytes = 1 * kGiB;
  const DeviceChoice c = choose_device(asking(0, 8), f);
  EXPECT_EQ(c.kind, DeviceKind::Cuda);
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.budget, 8 * kGiB);
  EXPECT_NE(c.note.find("hottest FFN neurons"), std::string::npos) << c.note;
  EXPECT_TRUE(choose_device(asking(99), f).split) << "-ngl of a model larger than the GPU";
  DeviceFacts big = f;
  big.gpu_free_bytes = 48 * kGiB;
  EXPECT_FALSE(choose_device(asking(0, 40), big).split) << "it fits whole";
  f.dense_bytes = 9 * kGiB;
  EXPECT_TRUE(choose_device(asking(0, 8), f).split) << "some layers' attention on the CPU";
  f.min_split_bytes = 9 * kGiB;
  try {
    choose_device(asking(0, 8), f);
    FAIL() << "not even one layer fits";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("even one layer"), std::string::npos) << e.what();
  }
}

TEST(DeviceChoice, SomeLayersByNglGoToTheGpu) {
  const DeviceChoice c = choose_device(asking(10), gpu(80, 4));
  EXPECT_EQ(c.kind, DeviceKind::Cuda);
  EXPECT_EQ(c.gpu_layers, 10);
  EXPECT_FALSE(c.split);
  DeviceFacts none;
  none.n_layer = 32;
  none.no_gpu_reason = "no CUDA GPU was found";
  EXPECT_EQ(choose_device(asking(10), none).kind, DeviceKind::Cpu) << "no GPU: the CPU, a note";
}

// A bundled model's FFN is always split (VRAM, the RAM cache, flash), whole or not; placed by
// neurons, never by layers.
TEST(DeviceChoice, BundledModelsSplitTheirFfnAcrossThreeTiers) {
  DeviceFacts f = gpu(80, 4);
  f.bundled = true;
  f.can_split = true;
  f.min_split_bytes = 1 * kGiB;
  const DeviceChoice all = choose_device(asking(99), f);
  EXPECT_EQ(all.kind, DeviceKind::Cuda);
  EXPECT_TRUE(all.split) << "every neuron fits, still a split store";
  const DeviceChoice some = choose_device(asking(0, 2), f);
  EXPECT_TRUE(some.split);
  EXPECT_EQ(some.budget, 2 * kGiB);
  EXPECT_NE(some.note.find("RAM and flash"), std::string::npos) << some.note;
  EXPECT_THROW(choose_device(asking(10), f), Error) << "-ngl of some layers";
  DeviceFacts reference = f;
  reference.gpu_present = false;
  const DeviceChoice unlimited = choose_device(asking(0, 0, "reference"), reference);
  EXPECT_TRUE(unlimited.split);
  EXPECT_EQ(unlimited.budget, f.needed_bytes) << "no budget: room for every neuron";
  DeviceFacts exact = f;
  exact.can_split = false;  // --check-predictor
  const DeviceChoice cpu = choose_device(asking(99), exact);
  EXPECT_EQ(cpu.kind, DeviceKind::Cpu);
  EXPECT_FALSE(cpu.note.empty());
}

}  // namespace
}  // namespace strata
