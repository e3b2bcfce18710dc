# kiln's entry points. `make run` and `make test` work from a fresh clone on Debian 12 as root:
# each first installs what it needs (scripts/install-deps.sh is idempotent and fast).
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all deps build run test test-asan test-seeds fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the quickstart example builds the seed MLP and a ResNet-18 with the nn API,
# compiles both, checks them against the reference evaluator and times them; train_classifier
# then trains the seed MLP and LeNet-5 on synthetic data with compiled training steps (a short
# run, about 10 s once its steps are in the compile cache) and checks their accuracy.
run: build
	./$(BUILD)/quickstart
	./$(BUILD)/train_classifier

# Everything but the large seed workloads (see test-seeds).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE 'seed-large|zoo-large'

# Every seed workload (ResNet-18/50, VGG16, BERT too), exported from PyTorch and checked against
# its output; several minutes and about 2 GB of memory at the peak.
test-seeds: build
	cd $(BUILD) && ctest --output-on-failure -L seed

# Every model of the zoo (bench/zoo/models.py) against PyTorch, the large ones too: about
# half an hour and a few GB of memory at the peak.
.PHONY: test-zoo
test-zoo: build
	cd $(BUILD) && ctest --output-on-failure -L zoo

# Under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan, -O1 -g1: quicker to compile,
# with the line tables that reports need). `make test-asan` builds and runs the unit tests of
# the parts that read user input (the IR and its parser, the graph API, the ONNX importer):
# run it before landing changes to those parts (CI runs `make test` only). `make test-asan-all`
# builds everything and runs every unit and golden test (the ONNX suite, the seed workloads
# and the model zoo run in `make test` only: they would multiply the time under the sanitizers).
ASAN_CONFIGURE = cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1"
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
.PHONY: test-asan-all
test-asan: deps
	$(ASAN_CONFIGURE)
	cmake --build build-asan -j $(JOBS) --target kiln_ir_tests kiln_frontend_tests kiln_onnx_tests
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure -j $(JOBS) -L 'unit-(ir|frontend|onnx)'

test-asan-all: deps
	$(ASAN_CONFIGURE)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure -j $(JOBS) -LE 'conformance|seed|training|zoo'

# libFuzzer targets (clang): `make fuzz FUZZ_SECONDS=600` runs the .kir parser fuzzer,
# `make fuzz-onnx` the ONNX loader's, `make fuzz-tensors`, `fuzz-manifest` and `fuzz-artifact`
# the files the runtime reads (below).
FUZZ_SECONDS ?= 60
fuzz: deps
	CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON -DKILN_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzz-kir-parser
	mkdir -p build-fuzz/corpus-kir
	./build-fuzz/tests/fuzz/fuzz-kir-parser build-fuzz/corpus-kir tests/golden -max_total_time=$(FUZZ_SECONDS) -max_len=4096

# `make fuzz-onnx FUZZ_SECONDS=900` runs the ONNX loader fuzzer. Its seeds are the ONNX node
# suite's models (the largest is about 7 KB, hence -max_len) and tensor files, from the main
# build's generated suite or else generated here (tests/conformance/generate.sh), plus the
# inputs that once crashed it; without the suite it still runs, from the regressions alone.
.PHONY: fuzz-onnx
fuzz-onnx: deps
	CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON -DKILN_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzz-onnx-loader
	mkdir -p build-fuzz/corpus-onnx
	seeds=$(BUILD)/onnx-conformance/node; \
	if [ ! -d "$$seeds" ]; then \
	  seeds=build-fuzz/onnx-conformance/node; \
	  bash tests/conformance/generate.sh build-fuzz/onnx-conformance || seeds=; \
	fi; \
	./build-fuzz/tests/fuzz/fuzz-onnx-loader build-fuzz/corpus-onnx tests/onnx/fuzz-regressions $$seeds \
	  -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -rss_limit_mb=2048 -timeout=20

# The file fuzzers (tests/fuzz/FileFuzzTargets.h, ArtifactTampering.h), each seeded with files
# kiln itself wrote, and with the inputs that once failed (tests/runtime/fuzz-regressions/):
#   make fuzz-tensors    .npy, .safetensors and training checkpoints: kiln's own small tensors of
#                        every dtype, a checkpoint `kiln-run --train --save` writes in both forms,
#                        and the seed workloads' small .npy files when $(BUILD)/seeds has them
#   make fuzz-manifest   the training manifest, from a `kiln-compile --train` artifact's
#   make fuzz-artifact   compiled models and training steps cut short or tampered with; it first
#                        loads every truncation and single-byte change of their description
#                        (about a minute), then fuzzes
# The artifacts are the ones tests/CMakeLists.txt compiles from tests/fuzz/artifacts/ (target
# kiln_fuzz_artifacts, in $(BUILD)), so the normal build comes first.
FUZZ_CONFIGURE = CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON -DKILN_TESTS=OFF
FUZZ_FLAGS = -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=20
FUZZ_ARTIFACTS = --artifact=$(BUILD)/tests/fuzz-artifacts/step.so --artifact=$(BUILD)/tests/fuzz-artifacts/model.so
.PHONY: fuzz-file-seeds fuzz-tensors fuzz-manifest fuzz-artifact
fuzz-file-seeds: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target kiln_fuzz_artifacts kiln-run
	rm -rf build-fuzz/seeds-tensors && mkdir -p build-fuzz/seeds-tensors
	for form in step.safetensors step-npy; do \
	  ./$(BUILD)/kiln-run $(BUILD)/tests/fuzz-artifacts/step.so --train --steps 1 --seed 1 \
	    --save build-fuzz/seeds-tensors/$$form > /dev/null || exit 1; \
	done
	if [ -d $(BUILD)/seeds ]; then find $(BUILD)/seeds -name '*.npy' -size -8k -exec cp {} build-fuzz/seeds-tensors/ ';'; fi

fuzz-tensors: fuzz-file-seeds
	$(FUZZ_CONFIGURE)
	cmake --build build-fuzz -j $(JOBS) --target fuzz-tensor-files
	./build-fuzz/tests/fuzz/fuzz-tensor-files --write-seeds=build-fuzz/seeds-tensors/kiln
	mkdir -p build-fuzz/corpus-tensors
	./build-fuzz/tests/fuzz/fuzz-tensor-files build-fuzz/corpus-tensors build-fuzz/seeds-tensors \
	  $(wildcard tests/runtime/fuzz-regressions/tensor-files) $(FUZZ_FLAGS) -max_len=4096

fuzz-manifest: fuzz-file-seeds
	$(FUZZ_CONFIGURE)
	cmake --build build-fuzz -j $(JOBS) --target fuzz-training-manifest
	mkdir -p build-fuzz/corpus-manifest build-fuzz/seeds-manifest
	./build-fuzz/tests/fuzz/fuzz-training-manifest --print-manifest=$(BUILD)/tests/fuzz-artifacts/step.so \
	  > build-fuzz/seeds-manifest/step.txt
	./build-fuzz/tests/fuzz/fuzz-training-manifest build-fuzz/corpus-manifest build-fuzz/seeds-manifest \
	  $(wildcard tests/runtime/fuzz-regressions/manifest) $(FUZZ_FLAGS) -max_len=2048

fuzz-artifact: fuzz-file-seeds
	$(FUZZ_CONFIGURE)
	cmake --build build-fuzz -j $(JOBS) --target fuzz-artifact
	./build-fuzz/tests/fuzz/fuzz-artifact $(FUZZ_ARTIFACTS) --sweep
	mkdir -p build-fuzz/corpus-artifact
	./build-fuzz/tests/fuzz/fuzz-artifact $(FUZZ_ARTIFACTS) build-fuzz/corpus-artifact \
	  $(wildcard tests/runtime/fuzz-regressions/artifact) $(FUZZ_FLAGS) -max_len=256

# Differential compile fuzzing (tests/fuzz/compile, no clang needed): random graphs from
# consecutive seeds compiled through the inference pipeline, with their gradient graphs, and
# compared with the reference evaluator; reproducers of failures go to $(BUILD)/fuzz-compile-out.
# `make fuzz-compile FUZZ_SECONDS=600 FUZZ_SEED=1`; `make fuzz-compile-asan FUZZ_SECONDS=1800`
# runs it under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan; the generated kernels
# are compiled by the system compiler without them).
FUZZ_SEED ?= 1
.PHONY: fuzz-compile fuzz-compile-asan
fuzz-compile: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target kiln-fuzz-compile
	./$(BUILD)/kiln-fuzz-compile --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) --out $(BUILD)/fuzz-compile-out

fuzz-compile-asan: deps
	$(ASAN_CONFIGURE)
	cmake --build build-asan -j $(JOBS) --target kiln-fuzz-compile
	$(ASAN_ENV) ./build-asan/kiln-fuzz-compile --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) --out build-asan/fuzz-compile-out

clean:
	rm -rf build build-asan build-fuzz

# `make bench`: kiln beside ONNX Runtime and PyTorch eager at 1 and 2 threads on the seed
# workloads, then SGEMM against OpenBLAS, ResNet-50's compile time, and one training step
# against PyTorch eager (mlp, lenet5, nn ResNet-18 b8 with BatchNorm, bert_mini; kiln-train-bench
# and kiln-run --train), bf16 and int8 against f32 (bench.py), then int8 accuracy on held-out inputs
# (bench/quantized_accuracy.py); writes bench/results.md (about 30 minutes: 5 inference rounds, 3
# training). `make bench BENCH_NAMES=mlp_b1024,lenet5_b64` for a quick one.
BENCH_NAMES ?= mlp_b1024,lenet5_b64,resnet18_b1,resnet18_b8,resnet50_b1,vgg16_b1,bert_mini_s128_b8,bert_base_s128
BENCH_ROUNDS ?= 5
.PHONY: bench
bench: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target kiln-run kiln-gemm-bench kiln-train-bench kiln-quantize _kiln
	bash scripts/install-peers.sh
	# an absolute folder: export-seeds.sh runs the exporter from the peers folder
	bash scripts/export-seeds.sh $(abspath $(BUILD)/seeds) $(BENCH_NAMES)
	/usr/bin/python3 bench/bench.py --names $(BENCH_NAMES) --rounds $(BENCH_ROUNDS) \
	  --seeds $(BUILD)/seeds --zoo $(abspath $(BUILD)/zoo) --kiln-bin $(BUILD) --out bench/results.md
	/usr/bin/python3 bench/quantized_accuracy.py --seeds $(BUILD)/seeds --zoo $(abspath $(BUILD)/zoo) \
	  --kiln-bin $(abspath $(BUILD)) --out bench/results.md

# `make bench-ddp`: samples/s of ResNet-18 training at a global batch of 32 (kiln-ddp-bench),
# 2 ranks x 1 thread under mpirun against 1 process x 2 threads, with the allreduce's time in
# flight and the share of it that overlapped the backward pass; prints, writes nothing (the
# figures and the scaling model they feed are in bench/results.md, "Data-parallel training").
# About 3 minutes once compiled. Open MPI's switches for running as root are set here alone.
DDP_BATCH ?= 32
.PHONY: bench-ddp
bench-ddp: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target kiln-ddp-bench
	@echo "load average: $$(cut -d' ' -f1-3 /proc/loadavg)"
	$(BUILD)/kiln-ddp-bench --batch $(DDP_BATCH) --threads 2
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
	  mpirun --oversubscribe -np 2 $(BUILD)/kiln-ddp-bench --data-parallel --batch $(DDP_BATCH) --threads 1
	@echo "load average: $$(cut -d' ' -f1-3 /proc/loadavg)"

# The model zoo (bench/zoo/models.py, 62 models from torchvision and torch.nn) beside ONNX
# Runtime and PyTorch eager at 1 and 2 threads: exported and checked once, then timed in
# interleaved rounds; writes the zoo section of bench/results.md. A separate target because the
# whole zoo takes over an hour here (40 minutes at 2 rounds): `make bench-zoo ZOO_NAMES=small`
# for the small models; `ZOO_FLAGS=--update` re-measures ZOO_NAMES and keeps the other rows.
ZOO_NAMES ?= all
ZOO_ROUNDS ?= 3
ZOO_FLAGS ?=
.PHONY: bench-zoo
bench-zoo: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target kiln-run
	bash scripts/install-peers.sh
	/usr/bin/python3 bench/zoo/bench_zoo.py --names $(ZOO_NAMES) --rounds $(ZOO_ROUNDS) $(ZOO_FLAGS) \
	  --zoo $(abspath $(BUILD)/zoo) --kiln-bin $(abspath $(BUILD)) --out bench/results.md
