#!/bin/sh
# The sanitizer and fuzzing jobs (CI runs them after scripts/test.sh), each in its own build
# tree with clang from Debian, and how long each part took:
#   1. build-asan: everything under AddressSanitizer + UndefinedBehaviorSanitizer, with the
#      libFuzzer targets; runs the unit tests, the CLI error script and a smoke run of every
#      fuzz target on its seed corpus (FUZZ_SECONDS each, default 5).
#   2. build-tsan: the unit tests under ThreadSanitizer, run on the suites that use threads
#      (thread pool, sparse operators, sessions, flash reads, the server, the device backends
#      with the CUDA kernels on the emulated GPU, whose CUDA threads TSan sees as threads).
# Usage: scripts/sanitize.sh [asan|tsan|all]   (default all)
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
what=${1:-all}
fuzz_seconds=${FUZZ_SECONDS:-5}
jobs=$(nproc 2>/dev/null || echo 2)

scripts/setup.sh >/dev/null  # the Debian packages of the main build
scripts/install_packages.sh clang-14 libclang-rt-14-dev

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

started=$(date +%s)
step() {  # step NAME: prints how long the previous step took
  now=$(date +%s)
  echo "== $1 (+$((now - started)) s)"
}

configure() {  # configure DIR SANITIZERS [more cmake args]
  dir=$1 san=$2
  shift 2
  CC=clang-14 CXX=clang++-14 scripts/cmake_configure.sh "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTRATA_SANITIZE="$san" -DSTRATA_BUILD_BENCH=OFF -DSTRATA_CUDA=OFF \
    -DSTRATA_WERROR="${STRATA_WERROR:-OFF}" "$@"
}

# Tests whose measure means nothing under a sanitizer, by name, with the reason:
#   AnonymousMemory.PopulatedMemoryIsZeroAndWritesNeedNoPageFaults counts page faults, and the
#   sanitizers' shadow memory and allocators fault pages of their own.
excluded='^AnonymousMemory\.PopulatedMemoryIsZeroAndWritesNeedNoPageFaults$'
# The emulated GPU's whole-model numerics (the main tree runs them): under ASan they took 310 of
# its 1330 s of test time. Every kernel they call runs under ASan op by op in
# BackendOps.*/cuda_emu, and the sessions' device code (uploads, splits, budgets, a mixture split)
# in the CudaSession and CudaEmu suites kept.
emulated_numerics='ShippedModelLogitsAndGreedyTextAreTheCpus|BlockKvCachesAreWithinToleranceOfTheCpusBlockCaches|EveryTypeIsWithinTolerance|KvCacheInF16IsWithinToleranceOfTheCpusF16Cache|SparseModesAreWithinToleranceOfTheCpu|TheSameInputsGiveTheSameBitsEveryRun|MixturesOfExpertsAreWithinToleranceOfTheCpu'
# The chi-square test of speculative sampling draws 600 verification steps on the shipped model
# (1.2 s in the main tree): the drafting and verifying code it runs, the other DraftModel tests
# run under ASan too.
statistical='^DraftModel\.AcceptedTokensFollowTheTargetsDistribution$'
# The slowest two under ASan (76 s and 55 s of its test time): the emulated GPU's column
# products over every type (each CPU column kernel runs under ASan in InputSparsity's other
# tests, the CUDA ones op by op in BackendOps.*/cuda_emu), and an IQ2_M quantization of the
# whole shipped model (the lattice quantizers run under ASan in IqQuants.*).
# Then three more by size (32, 27 and 17 s): a 1B-shape model over three tiers (ThreeTiers'
# other tests run its code on small models), every unit type's model dense and sparse (their
# kernels run under ASan in UnitTypes' and Kernels' other tests), and a batch of sequences against
# each alone (the other BatchScheduler tests batch too).
heavy='^InputSparsity\.ColumnProductsOnTheEmulatedGpuAreTheCpusAndItsRowMajorOnes$|^Imatrix\.LatticeMixturesNeedAndUseAnImportanceMatrix$|^ThreeTiers\.AOneBillionShapeSplitsAsTheCpuAloneInRamAndBundled$|^UnitTypes\.ModelsRunDenseAndSparse$|^BatchScheduler\.SequencesInABatchGiveTheTextTheyGiveAlone$'
asan_excluded="$excluded|$statistical|$heavy|^On/CudaSession\.($emulated_numerics)/cuda_emu( |$)"

if [ "$what" = all ] || [ "$what" = asan ]; then
  step "asan+ubsan: build"
  configure build-asan address,undefined -DSTRATA_FUZZ=ON
  scripts/build.sh build-asan
  step "asan+ubsan: unit tests"
  (cd build-asan && ctest -j "$jobs" -L unit -E "$asan_excluded" --output-on-failure)
  step "asan+ubsan: CLI error script"
  (cd build-asan && ctest -R '^cli_bad_input$' --output-on-failure)
  step "asan+ubsan: fuzz smoke runs ($fuzz_seconds s each)"
  for t in gguf safetensors convert tokenizer openai http plan jinja grammar schema; do
    work="build-asan/fuzz-work/$t"
    rm -rf "$work" && mkdir -p "$work"
    # New inputs go to a scratch corpus; the seeds in the repository are only read.
    "build-asan/tests/fuzz/fuzz_$t" -max_total_time="$fuzz_seconds" -print_final_stats=1 \
      -artifact_prefix="$work/" "$work" "tests/fuzz/corpus/$t" >"$work/log" 2>&1 || {
      cat "$work/log"
      echo "fuzz_$t failed: the input is in $work"
      exit 1
    }
    echo "fuzz_$t: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/log" | cut -d' ' -f2) runs, no failure"
  done
fi

if [ "$what" = all ] || [ "$what" = tsan ]; then
  step "tsan: build"
  configure build-tsan thread
  scripts/build.sh build-tsan strata_tests
  step "tsan: threaded tests"
  # The emulated GPU's numerics suites run one device stream at a time (the main and ASan
  # trees run them); under TSan only the suites where the CPU and the device overlap (the
  # splits, budgets, the emulator's own threads) -- the rest cost ~5 minutes of CI here. The
  # emulated mixture split (67 s under TSan) is left to the main tree too: the same split's CPU
  # part beside a device runs under TSan in SplitFfn's mixture tests (the reference device, in
  # RAM and over three tiers), and the emulator's threads in the CudaSession splits kept. The
  # emulated GPU's attention numerics (every cache type, score rule and batch: 105 s under TSan
  # with the soft cap and sinks) too: one stream, its other ops' threads still run here. The
  # 1B-shape three-tier split (the largest model of the suite; ThreeTiers' small models run the
  # same threads) and the KV cache block formats' numerics (Session's other tests run its threads)
  # are left to the main tree.
  build-tsan/tests/strata_tests \
    --gtest_filter='ThreadPool.*:FifoMutex.*:ServerSoak.*:ServerLoading.*:ServerDrain*:ServerEmbeddings.*:BatchScheduler.*:SchedulerSpeculation.*:ServerBatching.*:AxpyBuckets.*:SparseOps.*:SparseFfn.*:Session.*:Flash.*:FlashOverlap.*:Timeline.*:Server.*:ServerHttp.*:MappedFile.*:TransferQueue.*:PlannedSession.*:*BackendOps.*:ReferenceDevice.*:DeviceSession.*:SplitFfn.*:ThreeTiers.*:CudaEmu.*:*CudaSession.*:InputSparsity.InputSparseProducts*-*CudaSession.ShippedModel*:*CudaSession.EveryType*:*CudaSession.MixturesOfExperts*:*CudaSession.SparseModes*:*CudaSession.KvCacheInF16*:*CudaSession.BlockKvCaches*:*CudaSession.TheSameInputs*:*CudaSession.OneBillion*:*CudaSession.MixtureSplit*:*BackendOps.NormRopeKvAndAttention*/cuda_emu:ThreeTiers.AOneBillionShape*:Session.BlockKvCaches*'
fi
step "done"
cd "$root"
