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
	MaxLayers       = 4096
	MaxHidden       = 1 << 20
	MaxHeads        = 1 << 14
	MaxSeqLength    = 1 << 24
	MaxVocab        = 1 << 24
	MaxGlobalBatch  = 1 << 24
	MaxFileBytes    = 64 << 20 // cluster and model files, hostfiles
	MaxHostfileLine = 4096
)

// MaxRunIDBytes bounds --run-id (PET_RDZV_ID): it names the job's files
// directory on every host, /tmp/pipette-launch-<run-id>-<time>-<random>,
// whose last component must stay within the 255 bytes a file name may
// have (48 bytes are the prefix, time and random part), and the work
// directory /tmp/pipette-<run-id>. 128 leaves room and is far above any
// job name a person types.
const MaxRunIDBytes = 128
