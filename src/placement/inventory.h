// What a placement plan places, as plain data: per layer the bytes of its dense blocks, its KV
// cache and one FFN neuron, each neuron's activation frequency; the model-wide fixed parts; the
// machine's speeds (the cost model's inputs) and the budgets. Filled by the code that allocates
// (planning/model_inventory.h: KvCache::bytes, Workspace::bytes, the weights' views), never re-derived
// here, so a plan's byte counts are the bytes the run will hold.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct LayerInventory {
  uint64_t dense_bytes = 0;   // attention projections, norms, predictor: read every token
  uint64_t kv_bytes = 0;      // this layer's KV cache (for the planned context, all sequences)
  uint64_t neuron_bytes = 0;  // one neuron's gate + up + down_t rows (a bundle when bundled)
  // One neuron as a device holds and reads it: its rows without a bundle's padding (0: the
  // same as neuron_bytes).
  uint64_t vram_neuron_bytes = 0;
  uint64_t device_neuron_bytes() const {
    return vram_neuron_bytes > 0 ? vram_neuron_bytes : neuron_bytes;
  }
  int64_t n_neurons = 0;
  // RAM the layer's FFN holds when the model is in RAM (its matrices as stored, ffn_down_t
  // included, built at load or not); unused for bundled models (their cache slots count).
  uint64_t ffn_ram_bytes = 0;
  // Per neuron (by id): probability that it fires for a token (profile counts / tokens; 1 for
  // every neuron in a dense FFN; in a dense mixture, its expert's share of the tokens).
  std::vector<double> activation;
  // Share of a token's active neurons that were active in one of the previous window tokens
  // (the profile's window reuse): what the flash tier's window cache can hit.
  double window_hit_rate = 0.5;
};

struct Inventory {
  std::vector<LayerInventory> layers;
  uint64_t output_bytes = 0;  // output norm and head, read every token
  // RAM held whatever the plan: scratch buffers, the embedding table when resident, and the
  // process itself (code, libraries, allocator slack).
  uint64_t fixed_ram_bytes = 0;
  uint64_t workspace_bytes = 0;  // a device's buffers, in VRAM for GPU layers
  // The CPU's buffers, part of fixed_ram_bytes: a device's without attention's score scratch.
  uint64_t host_workspace_bytes = 0;
  // Part of fixed_ram_bytes: the backend's and stores' own lists, and the process itself.
  uint64_t host_scratch_bytes = 0;
  uint64_t embd_bytes = 0;      // n_embd * 4: the partial sum a split layer moves over the link
  bool bundled = false;         // the FFN's home is flash (strata bundle), read into RAM caches
  std::string flash_route;      // for messages: the commands that put this FFN on flash
  // The FFN is on flash as column bundles (strata bundle --columns): its caches are planned
  // apart (placement/column_cache.h), in none of the layers' bytes.
  bool column_bundled = false;
  // TEAL's input-sparse products (--input-columns): a device holds its layers' column copies
  // beside their rows (float types; counted in the device's session bytes).
  bool input_columns = false;
  int kv_sequences = 1;         // sequences sharing kv_bytes (server slots): a token reads one
  bool sparse = true;           // neurons selected per token (predict); false: every neuron
  int64_t min_cache_slots = 0;  // bundled: the smallest cache per layer that decodes
  // A mixture: each expert's neurons (a layer's neurons are its experts', in order; a dense
  // mixture places whole experts); 0 without experts.
  int64_t expert_neurons = 0;
};

// Hard limits per tier; 0 RAM: no limit; 0 VRAM: no GPU.
struct Budgets {
  uint64_t ram = 0;
  uint64_t vram = 0;
};

// Speeds of the machine planned for (measured here, or given for another machine).
struct CostModel {
  double ram_bytes_per_s = 40e9;   // the bandwidth probe (strata bench measures it)
  double vram_bytes_per_s = 1e12;  // the GPU's memory (an RTX 4090: ~1 TB/s)
  double link_bytes_per_s = 25e9;  // host <-> GPU (PCIe 4.0 x16)
  double flash_neuron_s = 0;       // seconds to read one neuron's bundle (probe-storage curve)
  double sync_s = 20e-6;           // per layer whose FFN runs on both devices
};

}  // namespace strata
