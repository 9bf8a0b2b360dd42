// Package limits holds the bounds pipette-launch puts on its inputs, each
// with the reason for it, so that a typo such as node[1-99999999] or
// slots=99999999 is refused by name before anything is sized by it.
package limits

const (
	// MaxHosts bounds the hosts of one job after every host list is
	// expanded. A resolved cluster file keeps links per island pair; only a
	// measured matrix is hosts² entries, as 16-bit codes (16384 hosts:
	// 268 M pairs, 512 MB). The launcher holds an SSH session per host.
	// 16384 hosts of 8 GPUs are 131072 GPUs, beyond today's largest jobs.
	MaxHosts = 16384
	// MaxGPUsPerHost bounds gpus_per_host, hostfile slots and
	// --nproc-per-node. The largest shipping servers hold 16 GPUs; 64 leaves
	// room without letting 99999999 through.
	MaxGPUsPerHost = 64
	// MaxRanks bounds the ranks of one job (hosts x ranks per host): every
	// rank gets its own argv and environment in the rendered launch.
	MaxRanks = 65536
	// MaxNameLen bounds one host entry as written (user@name:port): DNS names
	// are at most 253 bytes.
	MaxNameLen = 300

	// Model shape bounds: well above any published model (the largest dense
	// models have ~128 layers, hidden 25600, 128 heads, 256k vocabularies),
	// low enough that parameter and memory arithmetic cannot overflow.
	MaxLayers      = 4096
	MaxHidden      = 1 << 20
	MaxHeads       = 1 << 14
	MaxSeqLength   = 1 << 24
	MaxVocab       = 1 << 24
	MaxGlobalBatch = 1 << 24
	MaxFileBytes   = 64 << 20 // every input file read whole: cluster, model, DeepSpeed config, env, hostfile, ...
	// MaxTokenizerBytes bounds a tokenizer file read for its vocabulary
	// size: published tokenizer.json files reach ~35 MB (256k-entry
	// vocabularies with merges); 512 MiB leaves room and still stops
	// /dev/zero or a weights file given by mistake.
	MaxTokenizerBytes = 512 << 20
	MaxHostfileLine   = 4096
)
